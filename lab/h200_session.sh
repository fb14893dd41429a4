#!/usr/bin/env bash
# One H200 session for issues 39-42, in device calls run back to back (the machine keeps /tmp only
# while warm):
#   STEP=stage PART=p1        copy out/stage/$PART (carry it) into /tmp/stage: the staged wheels of
#                             FA4 and cudnn-frontend (../shared/device/stage-wheels)
#   STEP=run NAMES="a b"      install the staged wheels (once), then lab/h200_<name>.sh for each name,
#                             each under its own BUDGET_<name> (seconds; default 150) and timeout;
#                             each leaves $OUT/<name>/ and $OUT/<name>.log; the logs' tails are printed
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 COLUMNS=${COLUMNS:-120}
case ${STEP:?STEP=stage|run} in
  stage)
    mkdir -p /tmp/stage && cp "out/stage/${PART:?}"/* /tmp/stage/ && ls /tmp/stage | wc -l ;;
  run)
    if [ -x /tmp/stage/install-staged ] && [ ! -f /tmp/site.sh ]; then
      /tmp/stage/install-staged > /tmp/site.sh 2> /tmp/site.err || { echo "install-staged failed"; tail -5 /tmp/site.err; }
    fi
    [ -f /tmp/site.sh ] && source /tmp/site.sh
    export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
    python3 -m attnbench backends 2>&1 | grep -E "fa4|cudnn-fe|triton" | cut -c1-110
    for name in ${NAMES:?}; do
      b=BUDGET_$name; budget=${!b:-150}
      t0=$(date +%s)
      BUDGET=$budget timeout $((budget + 20)) bash "lab/h200_$name.sh" > "$OUT/$name.log" 2>&1
      echo "== $name rc=$? wall=$(( $(date +%s) - t0 ))s (budget $budget)"
      tail -n ${TAIL:-30} "$OUT/$name.log" | cut -c1-160
    done ;;
esac
