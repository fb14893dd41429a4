#!/usr/bin/env bash
# One H200: the seven built-in backends' quick grid (REPEATS, default 1) and where its wall went.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
PHASES=one REPEATS=${REPEATS:-1} DB_DIR=$OUT PHASE_LIMIT=${LIMIT:-540} bash scripts/h200_multi.sh 2>&1 | tail -6
COLUMNS=100 python3 -m attnbench show --db "$OUT/multi-one.sqlite" --status 2>&1 | tail -20
