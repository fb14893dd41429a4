#!/usr/bin/env bash
# One `attnbench run` too long for a device session (the `portability` grid, three repeats: about 4
# GPU-hours), measured as segments of one resumed run, a segment per session. The store travels
# between sessions slimmed (raw samples and kernel lists dropped: resume needs only which attempts
# have a row) as out/carry/NAME.sqlite.gz, named in the call's `carry`; each segment's own rows come
# back whole as an export. Importing every segment's export and the runs table into one store gives
# the sweep's wall / timed (`attnbench show --status` sums each run's wall, start-up included): an
# upper bound on one uninterrupted run's, since each segment starts its workers and compiler afresh.
#
# The first call of a session starts the segment in a process session of its own: the run resumes
# from the carried store and is interrupted (SIGINT, as ^C: resumable) SPAN seconds after it started;
# then this segment's rows, the runs table and the slimmed store are written. Every call (back to back,
# each within 30 s of the last) waits up to WAIT seconds and returns them once the segment has ended.
#   NAME=port      the run's files          ARGS="..."   attnbench run's arguments (not --db)
#   SPAN=1540      seconds the run may take this session      WAIT=570   seconds this call waits
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 COLUMNS=100
OUT=${OUT:-/tmp/out}; NAME=${NAME:-port}; D=/tmp/seg-$NAME; mkdir -p "$D" "$OUT"
ARGS=${ARGS:-"--grid portability --repeats 3 --min-time 0.55 --device cuda:0"}
CARRIED=out/carry/$NAME.sqlite.gz

if [ ! -e "$D/started" ]; then
  date +%s > "$D/started"
  nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader 2>/dev/null
  [ -e "$CARRIED" ] && gunzip -c "$CARRIED" > "$D/run.sqlite"
  cat > "$D/segment.sh" <<'SEGMENT'
set -u
cd "$REPO"
s=$(date +%s.%N)
timeout -s INT "${SPAN:-1540}" python3 -m attnbench run $ARGS --db "$D/run.sqlite" > "$D/log" 2>&1
rc=$?; e=$(date +%s.%N)
python3 - "$D" "$NAME" "$rc" "$s" "$e" <<'PY'
import os, sqlite3, subprocess, sys
d, name, rc, s, e = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5])
store = f"{d}/run.sqlite"
con = sqlite3.connect(store)
runs = con.execute("SELECT run_id FROM runs ORDER BY started_at").fetchall()
con.close()
run_id, seg = runs[-1][0], f"{name}-seg{len(runs)}"
with open(f"{d}/walls.txt", "a") as f:
    print(f"{seg}: run {run_id} rc {rc} command wall {e - s:.1f} s", file=f)
def copy(path, sql, params=()):
    """The store changed by sql in a backup, written compact into path (one file, nothing in a WAL)."""
    for p in (path, f"{d}/backup.sqlite"):
        if os.path.exists(p):
            os.remove(p)
    tmp = sqlite3.connect(f"{d}/backup.sqlite")
    src = sqlite3.connect(store)
    src.backup(tmp)
    src.close()
    tmp.execute(sql, params)
    tmp.commit()
    tmp.execute(f"VACUUM INTO '{path}'")
    tmp.close()
copy(f"{d}/rows.sqlite", "DELETE FROM attempts WHERE run_id != ?", (run_id,))  # this segment's rows
copy(f"{d}/slim.sqlite", "UPDATE attempts SET samples_us = NULL, dispatch_kernels = NULL")  # to resume from
env = dict(os.environ)
subprocess.run([sys.executable, "-m", "attnbench", "export", "--db", f"{d}/rows.sqlite", "--out",
                f"{d}/out/{seg}.jsonl.gz"], check=True, stdout=subprocess.DEVNULL, env=env)
subprocess.run([sys.executable, "-m", "attnbench", "export", "--db", store, "--table", "runs", "--out",
                f"{d}/out/{seg}.runs.jsonl"], check=True, stdout=subprocess.DEVNULL, env=env)
subprocess.run(f"gzip -9 -c {d}/slim.sqlite > {d}/out/{name}.sqlite.gz", shell=True, check=True)
PY
touch "$D/ended"
SEGMENT
  mkdir -p "$D/out"
  REPO=$PWD D=$D NAME=$NAME ARGS=$ARGS setsid nohup bash "$D/segment.sh" > "$D/segment.log" 2>&1 < /dev/null &
fi
end=$(( $(date +%s) + ${WAIT:-570} ))
while [ ! -e "$D/ended" ] && [ "$(date +%s)" -lt $end ]; do sleep 2; done
if [ -e "$D/ended" ] && [ ! -e "$D/returned" ]; then
  cp "$D"/out/* "$OUT"/ && touch "$D/returned"
fi
tail -c 3000 "$D/log" 2>/dev/null | tr '\r' '\n' | tail -6 > "$OUT/$NAME.log.tail"
echo "segment: $( [ -e "$D/ended" ] && echo ended || echo "running for $(( $(date +%s) - $(cat "$D/started") )) s")"
cat "$D/walls.txt" 2>/dev/null; cat "$D/segment.log" 2>/dev/null | tail -3
[ -e "$D/ended" ] && python3 -m attnbench show --db "$D/run.sqlite" --status 2>&1 | grep -m2 -A1 "attempts ("
tail -2 "$OUT/$NAME.log.tail"
exit 0
