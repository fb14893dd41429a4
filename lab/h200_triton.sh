#!/usr/bin/env bash
# Issue 41 on one H200: the triton ladder's GPU tests, then the ladder grid (every rung beside sdpa-cudnn, sdpa-flash
# and fa4 when staged, in one store) and the Hopper ablation grid, then the ratio table against the targets.
# Run from the repository root:  BUDGET=240 bash lab/h200_triton.sh   (PYTHONPATH=src is set here). 240 s covers the
# tests, the prefill anchors and the ablation; BUDGET=480 also decode, fwd+bwd, fp8 and the model step (each step
# runs under its share of what is left, in this order; a rerun with the same $OUT resumes what a limit cut).
# FULL=1 adds quick's N >= 4k prefill rows of the ladder grid.
# Leaves in $OUT/triton/: ladder.sqlite (every run, one store), ladder.jsonl.gz (its export), tests.txt, run-*.txt,
# table.txt, model.sqlite and model.txt (the whole-workload step); prints last the model table and the ratio table
# (lab/triton_ladder_table.py).
set -u
export PYTHONUNBUFFERED=1 COLUMNS=120 PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}  # keeps the staged wheels (lab/h200_session.sh)
OUT=${OUT:-/tmp/out}; D=$OUT/triton; mkdir -p "$D"
BUDGET=${BUDGET:-240}; T0=$SECONDS
left() { echo $(( BUDGET - (SECONDS - T0) )); }
DB=$D/ladder.sqlite
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader
python3 -c "import triton, torch; print('triton', triton.__version__, 'torch', torch.__version__, 'cuda', torch.version.cuda)"
# Triton's compiled kernels kept for the whole recipe: a config compiled by the tests is loaded, not rebuilt, later
export TRITON_CACHE_DIR=/tmp/triton-ladder-cache
VENDORS=sdpa-cudnn,sdpa-flash
CUDNN_FE=""
for b in fa4 cudnn-fe; do  # staged wheels: used when the backend says it is available
  if python3 -c "import sys; from attnbench.backends.registry import builtin; b = {x.name: x for x in builtin()}['$b']; \
why = b.availability(); print('$b:', why or 'available'); sys.exit(1 if why else 0)" 2>/dev/null; then
    if [ $b = fa4 ]; then VENDORS=$VENDORS,fa4; else CUDNN_FE=1; fi
  else
    echo "$b: not importable here (skipped)"
  fi
done
ARGS="--repeats 1 --max-time 0.2 --timeout 120"
step() {  # step NAME SHARE_OF_WHAT_IS_LEFT(%) attnbench-run-args...: one run into the store, its own time limit
  local name=$1 share=$2; shift 2
  if [ $(left) -lt 40 ]; then echo "run $name: skipped ($(left) s left)"; return; fi
  local lim=$(( ($(left) - 15) * share / 100 )); [ $lim -lt 20 ] && lim=20  # 15 s kept for the figures
  local t=$SECONDS
  timeout $lim python3 -m attnbench run $ARGS --db $DB --tag ladder "$@" > $D/run-$name.txt 2>&1
  echo "run $name: exit $? after $((SECONDS - t)) s (limit $lim s); $(tail -1 $D/run-$name.txt)"
}
# 1. GPU tests (correctness through every gate; the first candidate config only: speed is the runs' business)
t=$SECONDS
ATTNBENCH_TRITON_TUNE=first timeout $(( $(left) * 25 / 100 )) python3 -m pytest -q -m gpu tests/test_triton_ladder.py \
  tests/test_triton_hopper_tuning.py tests/test_decode_launch.py -p no:cacheprovider -q > $D/tests.txt 2>&1
echo "gpu tests: exit $? after $((SECONDS - t)) s; $(tail -1 $D/tests.txt)"
grep -E "^(FAILED|ERROR)|Error|assert" $D/tests.txt | head -8
# 2. the ladder's anchor rows, most telling first: prefill B1 Hq64 Hkv8 N16k (each rung, the vendors), the Hopper
# ablation (FA3 Table 2 as one grid; its 16k rows are the anchors, already stored, so they are not run twice), decode
# B8 (eager and graph), fwd+bwd, fp8 codes. One tag: a step cut by its limit leaves the rest to a rerun (resume).
step prefill 35 --grid ladder --where batch=1 --where q_heads=64 --modes prefill --dtype bf16 \
  --backends $VENDORS,triton-fa2,triton-hopper,triton-fp8,triton-fa1,triton-fp8-incoherent
step ablation 35 --grid ablation --backends triton-hopper-base,triton-hopper-ws,triton-hopper-ws-pipe,triton-hopper-persistent,triton-hopper,$VENDORS
step decode 40 --grid ladder --modes decode --where batch=8 --backends $VENDORS,triton-decode${CUDNN_FE:+,cudnn-fe}
step fwdbwd 50 --grid ladder --modes train_fwd_bwd --backends $VENDORS,triton-fa2,triton-hopper
step fp8 40 --grid ladder --dtype fp8_e4m3 --backends triton-fp8${CUDNN_FE:+,cudnn-fe}
if [ "${FULL:-0}" = 1 ]; then
  step quick 90 --grid ladder --where q_heads=32 --modes prefill --backends $VENDORS,triton-fa2,triton-hopper
fi
# 3. the whole-workload figure: a Llama-3.1-8B-shaped step (4 layers, prefill and train at 8k) with the rungs'
# attention against sdpa-flash, Amdahl's prediction from the kernel rows above (MODEL=0 skips it; it needs ~90 s)
if [ "${MODEL:-1}" = 1 ] && [ $(left) -gt 110 ]; then
  t=$SECONDS
  timeout $(( $(left) - 25 )) python3 -m attnbench model --config llama3.1-8b --layers 4 --steps prefill,train \
    --seqlen 8k --batch 1 --backends sdpa-cudnn,triton-fa2,triton-hopper --db $D/model.sqlite --kernel-db $DB \
    --max-time 0.2 --timeout 90 > $D/run-model.txt 2>&1
  echo "model: exit $? after $((SECONDS - t)) s; $(tail -1 $D/run-model.txt)"
  python3 -m attnbench model --show --db $D/model.sqlite > $D/model.txt 2>&1
else
  echo "model: skipped ($(left) s left; it wants 110)"
fi
# 3b. the mechanism of the rungs (issue 39's counters on issue 41's kernels): FA1 -> FA2 DRAM bytes, the Hopper
# variants' tensor-pipe and SFU shares, on the anchor rows already timed (no re-timing; EXPLAIN=0 skips it)
if [ "${EXPLAIN:-1}" = 1 ] && [ $(left) -gt 45 ]; then
  t=$SECONDS
  timeout $(( $(left) - 20 )) python3 -m attnbench explain $DB --where batch=1 --where q_heads=64 --where mode=prefill \
    --where dtype=bf16 --backend triton-fa1,triton-fa2,triton-hopper-base,triton-hopper-ws-pipe,triton-hopper,sdpa-cudnn,fa4 \
    > $D/explain.txt 2>&1
  echo "explain: exit $? after $((SECONDS - t)) s; $(tail -1 $D/explain.txt)"
  python3 -m attnbench export --db $DB --table counters --out $D/counters.jsonl > /dev/null 2>&1 || echo "no counters"
fi
# 4. the figures
python3 -m attnbench export --db $DB --out $D/ladder.jsonl.gz > /dev/null 2>&1 || echo "export failed"
python3 -m attnbench show --db $DB --rank > $D/show.txt 2>&1
[ -f $D/model.txt ] && tail -12 $D/model.txt
python3 lab/triton_ladder_table.py $D/ladder.jsonl.gz | tee $D/table.txt
echo "total $((SECONDS - T0)) s of $BUDGET"
