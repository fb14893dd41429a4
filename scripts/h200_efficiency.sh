#!/usr/bin/env bash
# One H200: the seven built-in backends' quick grid (REPEATS, default 1) and where its wall went.
#   LIMIT=540       seconds of run in this call (the run resumes on the next call with the same DB_DIR)
#   DB_DIR=$OUT     where the store lives; /tmp/NAME outlives a call while the machine stays warm
#                   (back-to-back calls), and is copied to $OUT after each call
#   GRID_ARGS       e.g. "--grid quick --min-time 0.5"
# The quick grid, 3 repeats, under a floor (about 25 device-minutes: three back-to-back calls, each
# resuming the last; the named compile cache keeps what one uninterrupted run's cache would hold):
#   DB_DIR=/tmp/eff3 REPEATS=3 LIMIT=560 \
#     GRID_ARGS="--grid quick --min-time 0.5 --compile-cache /tmp/eff3/cc" bash scripts/h200_efficiency.sh
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DB_DIR=${DB_DIR:-$OUT}; mkdir -p "$DB_DIR"
PHASES=one REPEATS=${REPEATS:-1} DB_DIR=$DB_DIR PHASE_LIMIT=${LIMIT:-540} bash scripts/h200_multi.sh 2>&1 | tail -6
COLUMNS=100 python3 -m attnbench show --db "$DB_DIR/multi-one.sqlite" --status 2>&1 | tail -20
[ "$DB_DIR" != "$OUT" ] && cp "$DB_DIR"/multi-one.sqlite "$DB_DIR"/walls.txt "$OUT"/
exit 0
