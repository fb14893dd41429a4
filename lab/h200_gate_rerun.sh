#!/usr/bin/env bash
# compare's gate on one GPU, end to end: the same grid three times (A, B: the same code; C: planted-flash
# doing ATTNBENCH_PLANT more work), then compare A->B, B->A (reruns: must pass) and A->C, B->C (the planted
# lines must regress, the rest pass). Device call:  bash lab/h200_gate_rerun.sh   (writes under $OUT)
set -u
export PYTHONUNBUFFERED=1 COLUMNS=100 PYTHONPATH=$PWD/src
OUT=${OUT:-/tmp/out}; G=/tmp/gate; mkdir -p $G "$OUT"
ARGS="--grid ${GRID:-quick} --backends sdpa-flash,sdpa-cudnn,sdpa-efficient,planted-flash
      --plugin lab/plugins/planted_slowdown.py --repeats 3 --modes prefill,decode,train_fwd"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader
for run in A:0 B:0 C:${PLANT:-0.15}; do
  name=${run%%:*}; plant=${run#*:}; t0=$SECONDS
  ATTNBENCH_PLANT=$plant timeout ${LIMIT:-150} python3 -m attnbench run $ARGS --db $G/$name.sqlite 2>&1 | tail -2
  echo "run $name (plant $plant): $((SECONDS - t0)) s"
  python3 -m attnbench export --db $G/$name.sqlite --out $OUT/gate-$name.jsonl.gz
  python3 -m attnbench export --db $G/$name.sqlite --table runs --out $OUT/gate-$name.runs.jsonl
done
for pair in A:B B:A A:C B:C; do
  b=${pair%%:*}; n=${pair#*:}
  python3 -m attnbench compare $G/$b.sqlite $G/$n.sqlite --json $OUT/compare-$b$n.json > $OUT/compare-$b$n.txt 2>&1
  echo "compare $b -> $n: exit $? | $(tail -2 $OUT/compare-$b$n.txt | head -1)"
done
