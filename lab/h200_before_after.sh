#!/usr/bin/env bash
# A behaviour-preserving change on one H200: the quick grid at BASE and at the working tree, back to back,
# then the GPU tests. Here, first: mkdir -p out/before && git archive BASE src | tar -x -C out/before
# Device call (carry out/before):  STEP=both LIMIT=275 bash lab/h200_before_after.sh ; STEP=tests ...
# Back here: python lab/before_after.py quick-before.jsonl.gz quick-after.jsonl.gz
set -u
export PYTHONUNBUFFERED=1 COLUMNS=100
OUT=${OUT:-/tmp/out}; mkdir -p /tmp/ab "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader
one() {  # NAME SRC REPEATS LIMIT
  ( export PYTHONPATH=$2
    timeout $4 python3 -m attnbench run --grid quick --repeats $3 --db /tmp/ab/$1.sqlite 2>&1 | tail -4
    python3 -m attnbench export --db /tmp/ab/$1.sqlite --out $OUT/quick-$1.jsonl.gz
    python3 -m attnbench export --db /tmp/ab/$1.sqlite --table runs --out $OUT/quick-$1.runs.jsonl )
}
case ${STEP:?STEP=both|tests} in
both)
  one before $PWD/out/before/src ${REPEATS:-1} ${LIMIT:-275}
  one after $PWD/src ${REPEATS:-1} ${LIMIT:-275} ;;
tests)
  export PYTHONPATH=$PWD/src
  timeout ${TEST_LIMIT:-300} python3 -m pytest -q -m gpu tests/test_gpu.py -p no:cacheprovider 2>&1 | tee $OUT/gpu-tests.txt | tail -8 ;;
esac
