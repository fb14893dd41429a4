#!/usr/bin/env bash
# Multi-device runs on a two-H200 host (issue 13): the quick grid, 3 repeats, on one GPU, on both
# GPUs sharded (target: wall <= 0.55x one GPU), and on both with --replicate (every attempt once per
# GPU: their comparison is the method's noise floor). Stores go to $OUT; prints each phase's wall and
# wall / summed timed samples (how much of the wall was spent timing).
#   PHASES="one shard replicate"  which phases to run (each is about 9, 5 and 9 minutes on the full grid)
#   GRID_ARGS="--grid quick"       e.g. "--grid quick --modes decode" for a shorter comparison
#   PHASE_LIMIT=560                seconds per phase (a phase cut short resumes on the next call;
#                                  its wall is then not comparable and is marked "cut")
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 COLUMNS=160
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
PHASES=${PHASES:-one shard replicate}
GRID_ARGS=${GRID_ARGS:---grid quick}
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
nproc
for phase in $PHASES; do
  case $phase in
    one) args="--device cuda:0" ;;
    shard) args="--devices 0,1" ;;
    replicate) args="--devices 0,1 --replicate" ;;
    *) echo "unknown phase $phase"; exit 2 ;;
  esac
  db=$OUT/multi-$phase.sqlite
  t0=$(date +%s.%N)
  timeout ${PHASE_LIMIT:-560} python3 -m attnbench run $GRID_ARGS --repeats 3 $args --db "$db" 2>&1 | tail -4
  rc=${PIPESTATUS[0]}
  t1=$(date +%s.%N)
  echo "$phase $(python3 -c "print(round($t1 - $t0, 1))") $rc" >> "$OUT/walls.txt"
  echo "phase $phase: wall $(python3 -c "print(round($t1 - $t0, 1))") s, rc $rc"
done
python3 - "$OUT" <<'PY'
import json, sqlite3, sys
out = sys.argv[1]
walls = {}
for line in open(f"{out}/walls.txt"):
    phase, wall, rc = line.split()
    walls[phase] = (float(wall), int(rc))  # the latest call of each phase
for phase, (wall, rc) in walls.items():
    c = sqlite3.connect(f"{out}/multi-{phase}.sqlite")
    timed = sum(sum(json.loads(s)) * (k or 1) / 1e6 for s, k in
                c.execute("select samples_us, calls_per_sample from attempts where status='OK'"))
    n = c.execute("select count(*) from attempts").fetchone()[0]
    per = c.execute("select device_index, host_cores, count(*), round(sum(wall_s), 1) from attempts "
                    "where wall_s > 0 group by 1, 2").fetchall()
    print(f"{phase:9s} wall {wall:7.1f} s{' (cut)' if rc else ''}  rows {n}  timed {timed:6.1f} s  "
          f"wall/timed {wall / timed if timed else float('nan'):5.1f}  per device (index, cores, rows, wall_s) {per}")
if "one" in walls and "shard" in walls:
    print(f"sharded / one GPU: {walls['shard'][0] / walls['one'][0]:.2f} (target <= 0.55)")
PY
