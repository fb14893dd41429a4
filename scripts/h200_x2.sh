#!/usr/bin/env bash
# Issue 13 on a two-H200 host: the seven built-in backends' quick grid, REPEATS (1), stores in
# /tmp/x2 (gzipped copies and walls.txt to $OUT). Each step fits one device call.
#   STEP=ratio      sharded over both GPUs (--devices 0,1), then on GPU 0 alone, in that order (a
#                   later phase finds the host's files warm: the sharded wall is not flattered);
#                   prints both walls and sharded / one GPU (target <= 0.55). About 200 + 330 s.
#   STEP=ratio3     the same with `run`'s default three repeats, both runs detached
#                   (scripts/h200_detached.sh: /tmp/x2s sharded, then /tmp/x2o on GPU 0): call it again
#                   back to back until it prints the ratio (about 400 + 750 s in all, three calls;
#                   GRID=smoke DEVS=cpu:0,cpu:1 ONE=cpu BACKENDS=reference tries it on a CPU).
#   STEP=replicate  --devices 0,1 --replicate, then `attnbench analyze --by device_uuid` of it: the
#                   winner-change rate between two GPUs of one model (the method's noise floor). About 330 s.
#   STEP=tests      the GPU tests (one- and two-GPU ones, the library backends that are installed).
# After a run step, the rows that changed their worker's shared state (runner/process_state.py) are
# listed: a real backend should have none. If the checkout is past what a call sends (64 MiB), set
# the row exports aside for the calls: `bash scripts/device_slim.sh hide`, then `restore`.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/x2
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 COLUMNS=${COLUMNS:-100}
keep() {
  for f in /tmp/x2/*.sqlite; do gzip -c -9 "$f" > "$OUT/$(basename "$f").gz"; done
  cp /tmp/x2/walls.txt /tmp/x2/*.md "$OUT"/ 2>/dev/null; true
}
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
case ${STEP:?STEP=ratio|replicate|tests} in
  ratio)
    PHASES="shard one" REPEATS=${REPEATS:-1} DB_DIR=/tmp/x2 LIMIT_shard=${SHARD_LIMIT:-215} \
      LIMIT_one=${ONE_LIMIT:-368} bash scripts/h200_multi.sh 2>&1 | grep -v -i warn | tail -9 ;;
  replicate)
    PHASES=replicate REPEATS=${REPEATS:-1} DB_DIR=/tmp/x2 LIMIT_replicate=${REPLICATE_LIMIT:-440} \
      bash scripts/h200_multi.sh 2>&1 | grep -v -i warn | tail -4
    python3 -m attnbench analyze --by device_uuid /tmp/x2/multi-replicate.sqlite --md /tmp/x2/replicate-analyze.md \
      2>&1 | tail -25 ;;
  ratio3)
    B=${BACKENDS:-sdpa-flash,sdpa-cudnn,sdpa-efficient,sdpa-math,flex,compile,reference}
    t0=$(date +%s)
    [ -e /tmp/x2s/ended ] || NAME=x2s ARGS="--grid ${GRID:-quick} --repeats 3 --backends $B --devices ${DEVS:-0,1}" LIMIT=900 \
      WAIT=560 bash scripts/h200_detached.sh | tail -3
    left=$(( 560 - $(date +%s) + t0 ))
    if [ -e /tmp/x2s/ended ] && [ $left -gt 20 ]; then
      NAME=x2o ARGS="--grid ${GRID:-quick} --repeats 3 --backends $B --device ${ONE:-cuda:0}" LIMIT=1500 WAIT=$left \
        bash scripts/h200_detached.sh | tail -3
    fi
    if [ -e /tmp/x2s/ended ] && [ -e /tmp/x2o/ended ]; then
      python3 - <<'PY'
import os
import sys
def wall(d):
    return float(open(f"/tmp/{d}/ended").read()) - float(open(f"/tmp/{d}/started").read())
# a run that failed or was cut at its LIMIT did not finish the grid: its wall is no ratio's term
rc = {d: open(f"/tmp/{d}/rc").read().strip() for d in ("x2s", "x2o")}
if set(rc.values()) != {"0"}:
    sys.exit(f"no ratio: a run did not finish (exit status {rc}; the logs: /tmp/x2s/log, /tmp/x2o/log)")
s, o = wall("x2s"), wall("x2o")
print(f"{os.environ.get('GRID', 'quick')} grid, 3 repeats: two devices {s:.1f} s, one {o:.1f} s: {s / o:.3f} (target <= 0.55)")
PY
    fi
    exit 0 ;;
  tests)
    python3 -m pytest -q -m gpu tests/test_gpu.py tests/test_gpu_backends.py -p no:cacheprovider 2>&1 \
      | tee "$OUT/gpu_tests.log" | tail -15
    exit 0 ;;
  *) echo "STEP=ratio|replicate|tests"; exit 2 ;;
esac
python3 - /tmp/x2/*.sqlite <<'PY'
import sqlite3, sys
for f in sys.argv[1:]:
    for r in sqlite3.connect(f).execute("select backend, status, count(*), min(substr(reason, 1, 100)) from attempts "
                                        "where reason like '%set back%' group by 1, 2"):
        print(f.rsplit("/", 1)[-1], *r)
PY
keep
