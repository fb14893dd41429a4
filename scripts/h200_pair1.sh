#!/usr/bin/env bash
# GPU tests, then the quick grid (one repeat) on cuda:0 and cuda:1 of one host at once.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
timeout 250 python3 -m pytest -q -s -m gpu tests/test_gpu.py -p no:cacheprovider 2>&1 | grep -E "^ROW|passed|failed|Error|assert" | tail -30
QUICK_LIMIT=${QUICK_LIMIT:-300} REPEATS=1 bash scripts/h200_pair.sh 2>&1 | tail -30
