#!/usr/bin/env bash
# Issue 13 on a two-H200 host: the seven built-in backends' quick grid, REPEATS (1), stores in
# /tmp/x2 (gzipped copies and walls.txt to $OUT). Each step fits one device call.
#   STEP=ratio      sharded over both GPUs (--devices 0,1), then on GPU 0 alone, in that order (a
#                   later phase finds the host's files warm: the sharded wall is not flattered);
#                   prints both walls and sharded / one GPU (target <= 0.55). About 200 + 330 s.
#   STEP=replicate  --devices 0,1 --replicate, then `attnbench analyze --by device_uuid` of it: the
#                   winner-change rate between two GPUs of one model (the method's noise floor). About 330 s.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/x2
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 COLUMNS=${COLUMNS:-100}
keep() {
  for f in /tmp/x2/*.sqlite; do gzip -c -9 "$f" > "$OUT/$(basename "$f").gz"; done
  cp /tmp/x2/walls.txt /tmp/x2/*.md "$OUT"/ 2>/dev/null; true
}
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
case ${STEP:?STEP=ratio|replicate} in
  ratio)
    PHASES="shard one" REPEATS=${REPEATS:-1} DB_DIR=/tmp/x2 LIMIT_shard=${SHARD_LIMIT:-215} \
      LIMIT_one=${ONE_LIMIT:-368} bash scripts/h200_multi.sh 2>&1 | grep -v -i warn | tail -9 ;;
  replicate)
    PHASES=replicate REPEATS=${REPEATS:-1} DB_DIR=/tmp/x2 LIMIT_replicate=${REPLICATE_LIMIT:-440} \
      bash scripts/h200_multi.sh 2>&1 | grep -v -i warn | tail -4
    python3 -m attnbench analyze --by device_uuid /tmp/x2/multi-replicate.sqlite --md /tmp/x2/replicate-analyze.md \
      2>&1 | tail -25 ;;
  *) echo "STEP=ratio|replicate"; exit 2 ;;
esac
keep
