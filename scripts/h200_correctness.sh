#!/usr/bin/env bash
# GPU tests (two-GPU ones too, on a two-GPU host), then the tolerance evidence on cuda:0:
# the SDPA backends (flex and compile compile every shape: the quick grid covers them) on the spread of scripts/tolerance_spread.py.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
t0=$(date +%s)
timeout ${TEST_LIMIT:-300} python3 -m pytest -q -m gpu tests/test_gpu.py -p no:cacheprovider > "$OUT/gpu_tests.txt" 2>&1
echo "gpu tests rc=$? in $(( $(date +%s) - t0 )) s"; tail -4 "$OUT/gpu_tests.txt"
t0=$(date +%s)
timeout ${SPREAD_LIMIT:-240} python3 scripts/tolerance_spread.py --device cuda:0 \
  --backends sdpa-math,sdpa-flash,sdpa-efficient,sdpa-cudnn --out "$OUT/spread_gpu.json" \
  > "$OUT/spread_gpu.txt" 2> "$OUT/spread_gpu.err"
echo "spread rc=$? in $(( $(date +%s) - t0 )) s"
grep -v "^skip" "$OUT/spread_gpu.err" | tail -5
tail -12 "$OUT/spread_gpu.txt"
