#!/usr/bin/env bash
# attnbench referee on one H200 (issue 42.3): cudnn-frontend's published H200 rows (tests/fixtures/referee/:
# training 8k bf16 rows, cuDNN 9.19.1; inference prefill and decode rows, cuDNN 9.27.0) re-measured here with
# sdpa-cudnn, and cudnn-fe / fa4 where their rows name them (a backend that is not installed: its rows say so).
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
timeout 20 python3 - <<'PY' 2>&1 | tail -3
import importlib.util as u, torch
print("torch", torch.__version__, "cuDNN", torch.backends.cudnn.version(),
      "| fa4 (flash_attn.cute):", "importable" if u.find_spec("flash_attn") and u.find_spec("flash_attn.cute") else "absent",
      "| cudnn-fe (cudnn):", "importable" if u.find_spec("cudnn") else "absent")
PY

# the GPU test: one published-form decode row re-measured and judged (~15 s)
timeout $(( $(left) / 5 )) python3 -m pytest -q -m gpu tests/test_referee.py -p no:cacheprovider 2>&1 | tail -3

# the measurements: inference rows (prefill and decode) first, then training (fwd, fwd+bwd)
for part in inference training; do
  [ "$part" = inference ] && share=$(( $(left) * 55 / 100 ))
  [ "$part" = training ] && share=$(( $(left) - 12 ))
  t=$SECONDS
  timeout -s INT -k 15 $share python3 -m attnbench referee $FIX/cudnn_fe_h200_$part.csv --device cuda \
      --db "$R/referee.sqlite" --repeats "$REPEATS" --max-time 0.3 > "$R/run-$part.txt" 2>&1
  echo "referee $part: exit $? after $((SECONDS - t)) s (limit $share s)"
  grep -E "error|Error|Traceback" "$R/run-$part.txt" | head -3
done
[ -f "$R/referee.sqlite.log" ] && grep -iE "error|traceback" "$R/referee.sqlite.log" | tail -3

# the tables, from the store (nothing measured), last
for part in inference training; do
  COLUMNS=80 timeout 20 python3 -m attnbench referee $FIX/cudnn_fe_h200_$part.csv --no-run --db "$R/referee.sqlite" \
      --json "$R/$part.json" > "$R/$part.txt" 2>&1
  echo; cat "$R/$part.txt"
done
echo "wall $((SECONDS - T0)) s of BUDGET $BUDGET"
