#!/usr/bin/env bash
# A sweep longer than one device call (10 min): the first call starts it in a process session of its
# own, which runs on while the machine stays warm (back-to-back calls, each within its 30 s); every
# call waits up to WAIT seconds for it, then copies the log's tail to $OUT with what the run has
# written. The sweep's wall is one uninterrupted span, from its start to its end. A checkout whose
# row exports take it past what a call sends: `bash lab/device_slim.sh hide` first, `restore` after.
#   NAME=pt          the run's folder, /tmp/NAME, and the names of what comes back
#   ARGS="..."       attnbench run's arguments (not --db)
#   LIMIT=900        seconds the run may take; then it is interrupted as by ^C (resumable)
#   WAIT=580         seconds this call waits
#   BEFORE="..."     a command the first call runs before the sweep starts, with the sweep's environment
#                    (GPU tests: run beside the sweep they would share its GPU and perturb its timings)
#   PARTS=1          one part of a sweep too long for a session (lab/sweep_parts.py): the run
#                    resumes from out/carry/NAME.sqlite.gz (name out/carry in the call's `carry`), and
#                    when it ends what comes back is its own rows, the runs table and the slimmed store
#                    the next part resumes from; without PARTS, the store's exports (ended) or a
#                    gzipped backup of it (running). The sweep's compiler cache (run keeps it beside the
#                    store while the sweep is unfinished) travels too: out/carry/NAME.cache.txz.NN in,
#                    NAME.cache.txz.NN back (xz, 12 MiB pieces, four at most: what a call returns and
#                    carries; when all of it is larger, Inductor's and JAX's parts, else JAX's:
#                    lab/sweep_parts.py pack). A machine lost mid-part (a call missed its 30 s)
#                    leaves the last call's NAME.sqlite.gz backup: `sweep_parts.py take` makes the
#                    part from it, to its last row, and the next part resumes from there
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 COLUMNS=100
OUT=${OUT:-/tmp/out}; NAME=${NAME:-pt}; D=/tmp/$NAME; mkdir -p "$D" "$OUT"
if [ ! -e "$D/started" ]; then
  nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader 2>/dev/null
  [ -n "${BEFORE:-}" ] && { bash -c "$BEFORE" 2>&1 | tail -12; }
  [ "${PARTS:-0}" = 1 ] && [ -e "out/carry/$NAME.sqlite.gz" ] && gunzip -c "out/carry/$NAME.sqlite.gz" > "$D/run.sqlite"
  if [ "${PARTS:-0}" = 1 ] && ls out/carry/$NAME.cache.t?z.* > /dev/null 2>&1; then
    python3 lab/sweep_parts.py unpack out/carry/$NAME.cache.t?z.* --to "$D/run.sqlite.compile-cache"
    echo "compiler cache from the last part: $(du -sm "$D/run.sqlite.compile-cache" | cut -f1) MiB"
  fi
  date +%s.%N > "$D/started"
  setsid nohup bash -c "timeout -s INT ${LIMIT:-900} python3 -m attnbench run $ARGS --db $D/run.sqlite \
    > $D/log 2>&1; echo \$? > $D/rc; date +%s.%N > $D/ended" > /dev/null 2>&1 < /dev/null &
fi
end=$(( $(date +%s) + ${WAIT:-580} ))
while [ ! -e "$D/ended" ] && [ "$(date +%s)" -lt $end ]; do sleep 2; done
if [ -e "$D/ended" ] && [ "${PARTS:-0}" = 1 ]; then
  [ -e "$D/returned" ] || python3 lab/sweep_parts.py segment "$D/run.sqlite" --out "$OUT" --name "$NAME" \
    && touch "$D/returned"
  C="$D/run.sqlite.compile-cache"
  if [ -d "$C" ]; then
    du -sm "$C"/* 2>/dev/null | sort -rn
    python3 lab/sweep_parts.py pack "$C" --out "$OUT" --name "$NAME"
  fi
elif [ -e "$D/ended" ]; then  # the store's rows travel as exports (a sweep's sqlite can pass 16 MiB)
  python3 -m attnbench export --db "$D/run.sqlite" --out "$OUT/$NAME.jsonl.gz" > /dev/null
  python3 -m attnbench export --db "$D/run.sqlite" --table runs --out "$OUT/$NAME.runs.jsonl" > /dev/null
elif [ -e "$D/run.sqlite" ]; then  # a consistent backup, to resume from if the machine is lost
  python3 -c "import sqlite3, sys; sqlite3.connect(sys.argv[1]).backup(sqlite3.connect(sys.argv[2]))" \
    "$D/run.sqlite" "$D/backup.sqlite" && gzip -1 -c "$D/backup.sqlite" > "$OUT/$NAME.sqlite.gz"
fi
tail -c 4000 "$D/log" | tr '\r' '\n' | tail -8 > "$OUT/$NAME.log.tail"
if [ -e "$D/ended" ]; then
  echo "ended: rc $(cat "$D/rc"), wall $(python3 -c "print(round($(cat "$D/ended") - $(cat "$D/started"), 1))") s"
  python3 -m attnbench show --db "$D/run.sqlite" --status 2>&1 | tail -28
else
  echo "running for $(python3 -c "import time; print(round(time.time() - $(cat "$D/started")))") s"
  tail -3 "$OUT/$NAME.log.tail"
fi
exit 0
