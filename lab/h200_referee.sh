#!/usr/bin/env bash
# attnbench referee on one H200 (issue 42.3): cudnn-frontend's published H200 rows (tests/fixtures/referee/:
# training 8k bf16 rows, cuDNN 9.19.1; inference prefill and decode rows, cuDNN 9.27.0) re-measured here with
# sdpa-cudnn, and cudnn-fe / fa4 where their rows name them (a backend that is not installed: its rows say so);
# GB200 rows of cuDNN and FA4 (tests/fixtures/referee/cudnn_fe_gb200_training_per_pass.csv) when time is left.
# Run from the repository root:  BUDGET=150 bash lab/h200_referee.sh   (writes under $OUT/referee/)
# Each measuring step is cut at its share of BUDGET; the table is then printed from what the store holds
# (referee --no-run), so a step cut short still shows its finished rows.
set -u
export PYTHONUNBUFFERED=1 COLUMNS=${COLUMNS:-100} PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
OUT=${OUT:-/tmp/out}; R=$OUT/referee; mkdir -p "$R"
BUDGET=${BUDGET:-150}; REPEATS=${REPEATS:-2}; FIX=tests/fixtures/referee
T0=$SECONDS
left() { echo $(( BUDGET - (SECONDS - T0) )); }

nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv,noheader
timeout 30 python3 -m attnbench backends 2>&1 | grep -E "^ *(sdpa-cudnn|cudnn-fe|fa4) " | cut -c1-110

# the GPU test: one published-form decode row re-measured and judged (~15 s)
timeout $(( $(left) / 5 )) python3 -m pytest -q -m gpu tests/test_referee.py -p no:cacheprovider 2>&1 | tail -3

# the measurements: inference rows (prefill and decode), training (fwd, fwd+bwd), then, if time is left, the
# GB200 per-pass rows (cuDNN and FA4: "cannot compare" here, another GPU model, their ratio shown)
FILES="cudnn_fe_h200_inference.csv:45 cudnn_fe_h200_training.csv:70 cudnn_fe_gb200_training_per_pass.csv:100"
for item in $FILES; do
  f=${item%%:*}; pct=${item#*:}; share=$(( ($(left) - 12) * pct / 100 ))
  if [ "$share" -lt 25 ]; then echo "referee $f: skipped ($share s left for it)"; continue; fi
  t=$SECONDS
  timeout -s INT -k 15 $share python3 -m attnbench referee $FIX/$f --device cuda --db "$R/referee.sqlite" \
      --repeats "$REPEATS" --max-time 0.3 > "$R/run-${f%.csv}.txt" 2>&1
  echo "referee $f: exit $? after $((SECONDS - t)) s (limit $share s)"
  grep -E "error|Error|Traceback" "$R/run-${f%.csv}.txt" | head -3
done
[ -f "$R/referee.sqlite.log" ] && grep -iE "error|traceback" "$R/referee.sqlite.log" | tail -3

# the tables, from the store (nothing measured), last
for item in $FILES; do
  f=${item%%:*}
  COLUMNS=80 timeout 20 python3 -m attnbench referee $FIX/$f --no-run --db "$R/referee.sqlite" \
      --json "$R/${f%.csv}.json" > "$R/${f%.csv}.txt" 2>&1
  echo; cat "$R/${f%.csv}.txt"
done
echo "wall $((SECONDS - T0)) s of BUDGET $BUDGET"
