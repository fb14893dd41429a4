#!/usr/bin/env bash
# Issue 15 on one H200: attention inside Llama-3.1-8B-shaped decoder steps (LAYERS layers, default 4).
#   1. the GPU tests of attnbench model (SKIP_TESTS=1 skips them);
#   2. kernel-level rows of exactly the attention workloads those steps call (attnbench run on the
#      grid that `attnbench model --kernel-grid` writes), into $OUT/kernels.sqlite;
#   3. the model steps with --kernel-db: prefill 8k and 32k (B=1), decode B=32 against an 8k cache
#      (eager and CUDA graph), training at 4k (B=TRAIN_BATCH, default 4), into $OUT/model.sqlite;
#   4. the table (attnbench model --show) and $OUT/model_rows.jsonl.
# Both commands share one compiler cache ($CACHE, under /tmp): flex's cold starts in step 3 are cache
# hits of step 2's compilation (COLD=1 gives the model its own empty cache: slower, cold starts whole).
# About 6-8 minutes; every command is resumable: run the script again to finish what a timeout cut.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 COLUMNS=${COLUMNS:-100}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LAYERS=${LAYERS:-4} CONFIG=${CONFIG:-llama3.1-8b} DEVICE=${DEVICE:-cuda}
BK=${BACKENDS:-sdpa-flash,sdpa-cudnn,sdpa-efficient,flex}
CACHE=${MODEL_CACHE:-/tmp/attnbench-model-cache}  # outside $OUT (thousands of files); not named CC: the C compiler Triton calls
KDB=$OUT/kernels.sqlite
MDB=$OUT/model.sqlite
MODEL="python3 -m attnbench model --config $CONFIG --layers $LAYERS --device $DEVICE --backends $BK"
STEP_ARGS=("--steps prefill --batch 1 --seqlen ${PREFILL_N:-8k,32k}"
           "--steps decode --batch ${DECODE_B:-32} --seqlen ${DECODE_N:-8k} --launch ${DECODE_LAUNCH:-eager,graph}"
           "--steps train --batch ${TRAIN_BATCH:-4} --seqlen ${TRAIN_N:-4k}")
start=$(date +%s)
stamp() { echo "== $1 ($(( $(date +%s) - start )) s)"; }

if [ "${SKIP_TESTS:-0}" != 1 ]; then
  stamp "GPU tests of attnbench model"
  timeout 180 python3 -m pytest -q -m gpu tests/test_model.py -p no:cacheprovider 2>&1 | tail -6
fi

stamp "kernel-level rows of the model's attention workloads"
for i in "${!STEP_ARGS[@]}"; do
  $MODEL ${STEP_ARGS[$i]} --kernel-grid "$OUT/kernel-grid-$i.yaml" || exit 2
done
python3 - "$OUT" <<'PY'
import sys, yaml, glob
out = sys.argv[1]
ws = [w for f in sorted(glob.glob(f"{out}/kernel-grid-*.yaml")) for w in yaml.safe_load(open(f))["workloads"]]
yaml.safe_dump({"name": "model-kernels", "workloads": ws}, open(f"{out}/kernel-grid.yaml", "w"), sort_keys=False)
print(len(ws), "workloads")
PY
timeout ${KERNEL_LIMIT:-240} python3 -m attnbench run --config "$OUT/kernel-grid.yaml" --backends "$BK" \
  --repeats ${REPEATS:-2} --device $DEVICE --db "$KDB" --compile-cache "$CACHE" 2>&1 | tail -4

for i in "${!STEP_ARGS[@]}"; do
  stamp "model: ${STEP_ARGS[$i]}"
  if [ "${COLD:-0}" = 1 ]; then
    timeout ${MODEL_LIMIT:-200} $MODEL ${STEP_ARGS[$i]} --db "$MDB" --kernel-db "$KDB" 2>&1 | grep -v '^ *$' | tail -40
  else
    timeout ${MODEL_LIMIT:-200} $MODEL ${STEP_ARGS[$i]} --db "$MDB" --kernel-db "$KDB" --compile-cache "$CACHE" 2>&1 \
      | grep -v '^ *$' | tail -40
  fi
done

stamp "results"
python3 - "$MDB" "$OUT/model_rows.jsonl" <<'PY'
import json, sqlite3, sys
con = sqlite3.connect(sys.argv[1]); con.row_factory = sqlite3.Row
rows = [dict(r) for r in con.execute("SELECT * FROM model_rows ORDER BY rowid")]
with open(sys.argv[2], "w") as f:
    for r in rows:
        f.write(json.dumps(r) + "\n")
print(f"{len(rows)} model rows -> {sys.argv[2]}")
g = lambda v, f=".3f": "-" if v is None else format(v, f)
for r in rows:
    if r["status"] == "OK" and r["backend"] != r["baseline"]:
        ex = json.loads(r["explain"] or "{}")
        print(f"{r['step']:7s} B{r['batch']} N{r['seqlen']} {r['launch']:5s} {r['backend']:15s} f={g(r['f_used'])}"
              f" ({r['f_source']}; prof {g(r['share_profiler'])} diff {g(r['share_diff'])}) s={g(r['kernel_speedup'])}"
              f" pred={g(r['predicted_speedup'])} meas={g(r['measured_speedup'])} gap={g(r['gap'], '+.1%')}"
              f" | {ex.get('why')}")
    elif r["status"] != "OK":
        print(f"{r['step']:7s} B{r['batch']} N{r['seqlen']} {r['launch']:5s} {r['backend']:15s} {r['status']}: {r['reason']}")
PY
python3 -m attnbench model --db "$MDB" --show
stamp "done"
