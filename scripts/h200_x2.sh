#!/usr/bin/env bash
# Issue 13 on a two-H200 host, two device calls run back to back (stores live in /tmp/x2, copied to $OUT).
#   STEP=1  GPU 0: the seven built-in backends' quick grid, REPEATS (1), on one GPU (the one-GPU wall,
#           wall / timed); GPU 1 at the same time, on its own cores: the same with --min-time MIN (0.5),
#           cut at FLOOR_LIMIT (the sweep's share of samples under a floor)
#   STEP=2  both GPUs: the quick grid sharded, then --replicate; analyze of the replicate store by
#           GPU (the winner-change rate between two GPUs of one model: the method's noise floor)
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/x2
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 COLUMNS=${COLUMNS:-120}
keep() { cp /tmp/x2/*.sqlite /tmp/x2/*.txt /tmp/x2/*.md "$OUT"/ 2>/dev/null; true; }
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
case ${STEP:?STEP=1|2} in
  1)
    mkdir -p /tmp/x2/floor
    ( CUDA_VISIBLE_DEVICES=1 PHASES=one REPEATS=${REPEATS:-1} DB_DIR=/tmp/x2/floor PHASE_LIMIT=${FLOOR_LIMIT:-440} \
        GRID_ARGS="--grid quick --min-time ${MIN:-0.5}" taskset -c 16-31 bash scripts/h200_multi.sh 2>&1 | tail -3
      python3 -m attnbench show --db /tmp/x2/floor/multi-one.sqlite --status 2>&1 | tail -18 ) > /tmp/x2/floor.txt 2>&1 &
    CUDA_VISIBLE_DEVICES=0 PHASES=one REPEATS=${REPEATS:-1} DB_DIR=/tmp/x2 PHASE_LIMIT=${ONE_LIMIT:-440} \
      taskset -c 0-15 bash scripts/h200_multi.sh 2>&1 | tail -3
    wait; cp /tmp/x2/floor/multi-one.sqlite /tmp/x2/floor-one.sqlite; cat /tmp/x2/floor.txt; keep ;;
  2)
    PHASES="shard replicate" REPEATS=${REPEATS:-1} DB_DIR=/tmp/x2 LIMIT_shard=${SHARD_LIMIT:-200} \
      LIMIT_replicate=${REPLICATE_LIMIT:-330} bash scripts/h200_multi.sh 2>&1 | tail -8
    python3 -m attnbench analyze --by device_uuid /tmp/x2/multi-replicate.sqlite --md /tmp/x2/replicate-analyze.md \
      2>&1 | tail -25
    keep ;;
esac
