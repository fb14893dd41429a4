#!/usr/bin/env bash
# Multi-device runs on a two-H200 host (issue 13): the quick grid, 3 repeats, on one GPU, on both
# GPUs sharded (target: wall <= 0.55x one GPU), and on both with --replicate (every attempt once per
# GPU: their comparison is the method's noise floor). Stores go to $OUT; prints each phase's wall and
# wall / summed timed samples (how much of the wall was spent timing).
#   PHASES="one shard replicate"  which phases to run (each is about 9, 5 and 9 minutes on the full grid)
#   GRID_ARGS="--grid quick"       e.g. "--grid quick --modes decode" for a shorter comparison
#   PHASE_LIMIT=560                seconds per phase (a phase cut short resumes on the next call with
#                                  the same DB_DIR; its wall is then the sum over the calls, marked
#                                  "cut" while the latest call was cut)
#   REPEATS=3                      repeats of every phase (REPEATS_replicate=1 overrides one phase,
#                                  LIMIT_shard=300 the limit of one phase)
#   BACKENDS=sdpa-flash,...        the backends (default: the seven built-in torch backends of the
#                                  4.8x baseline; JAX on the image would otherwise join the grid)
#   DB_DIR=$OUT                    where the stores live (a folder that outlives the call resumes them)
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 COLUMNS=160
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DB_DIR=${DB_DIR:-$OUT}; mkdir -p "$DB_DIR"
BACKENDS=${BACKENDS:-sdpa-flash,sdpa-cudnn,sdpa-efficient,sdpa-math,flex,compile,reference}
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
  db=$DB_DIR/multi-$phase.sqlite
  rep_var=REPEATS_$phase; reps=${!rep_var:-${REPEATS:-3}}
  lim_var=LIMIT_$phase; limit=${!lim_var:-${PHASE_LIMIT:-560}}
  t0=$(date +%s.%N)
  timeout $limit python3 -m attnbench run $GRID_ARGS --repeats $reps --backends "$BACKENDS" $args \
    --db "$db" 2>&1 | tail -4
  rc=${PIPESTATUS[0]}
  t1=$(date +%s.%N)
  echo "$phase $(python3 -c "print(round($t1 - $t0, 1))") $rc" >> "$DB_DIR/walls.txt"
  echo "phase $phase: wall $(python3 -c "print(round($t1 - $t0, 1))") s, rc $rc"
done
python3 - "$DB_DIR" <<'PY'
import json, sqlite3, sys
out = sys.argv[1]
walls, calls = {}, {}
for line in open(f"{out}/walls.txt"):
    phase, wall, rc = line.split()
    # a phase resumed over several calls (each cut at its limit) took the sum of their walls
    walls[phase] = (walls.get(phase, (0.0, 0))[0] + float(wall), int(rc))
    calls[phase] = calls.get(phase, 0) + 1
for phase, (wall, rc) in walls.items():
    c = sqlite3.connect(f"{out}/multi-{phase}.sqlite")
    timed = sum(sum(json.loads(s)) * (k or 1) / 1e6 for s, k in
                c.execute("select samples_us, calls_per_sample from attempts where status='OK'"))
    n = c.execute("select count(*) from attempts").fetchone()[0]
    per = c.execute("select device_index, host_cores, count(*), round(sum(wall_s), 1) from attempts "
                    "where wall_s > 0 group by 1, 2").fetchall()
    print(f"{phase:9s} wall {wall:7.1f} s{' (cut)' if rc else ''}{f' ({calls[phase]} calls)' if calls[phase] > 1 else ''}  rows {n}  timed {timed:6.1f} s  "
          f"wall x devices / timed {wall * len(per) / timed if timed else float('nan'):5.1f}  "
          f"per device (index, cores, rows, wall_s) {per}")
    phases = {}
    for (p,) in c.execute("select phases_s from attempts where phases_s is not null"):
        for name, sec in json.loads(p).items():
            phases[name] = phases.get(name, 0.0) + sec
    print("  phases (s): " + ", ".join(f"{k} {v:.0f}" for k, v in sorted(phases.items(), key=lambda kv: -kv[1])))
if "one" in walls and "shard" in walls:
    if walls["one"][1] or walls["shard"][1]:  # cut at its limit or failed: the grid is not finished
        print(f"no sharded / one GPU ratio: a phase did not finish (exit status one {walls['one'][1]}, "
              f"shard {walls['shard'][1]}); call again to resume it")
    else:
        print(f"sharded / one GPU: {walls['shard'][0] / walls['one'][0]:.2f} (target <= 0.55)")
PY
