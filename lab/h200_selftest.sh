#!/usr/bin/env bash
# attnbench selftest on one GPU (issue 42.1): every class on CUDA and the CPU subset at once (16 cores; the CPU
# run's workers do not share the GPU), then the GPU test of tests/test_selftest.py on the JSON just written;
# prints each class's verdict on both devices last. Uses only SDPA and flex_attention: FA4 and cudnn-fe, staged
# or not, play no part. Device call:  bash lab/h200_selftest.sh   (writes under $OUT/selftest; BUDGET s, 150)
set -u
export PYTHONUNBUFFERED=1 COLUMNS=160 PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}  # keeps the staged wheels (lab/h200_session.sh)
OUT=${OUT:-/tmp/out}; BUDGET=${BUDGET:-150}; S=$OUT/selftest; mkdir -p "$S"
T0=$SECONDS; left() { echo $((BUDGET - (SECONDS - T0) - 5)); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv,noheader 2>&1 | head -1
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name())"
# the CPU subset beside the GPU run, on cores of its own (8-15) so that its threads do not slow the GPU run's host
# (cores 0-7), whose eager timings the gates read
CPU_CORES=""; GPU_CORES=""
if command -v taskset > /dev/null && [ "$(nproc)" -ge 16 ]; then
  CPU_CORES="taskset -c 8-15"; GPU_CORES="taskset -c 0-7"
fi
echo "cores: cuda run ${GPU_CORES:-any}, cpu run ${CPU_CORES:-any}"
( OMP_NUM_THREADS=8 $CPU_CORES timeout $(( $(left) < 100 ? $(left) : 100 )) python3 -m attnbench selftest --device cpu \
    --json "$S/selftest_cpu.json" > "$S/cpu.txt" 2>&1; echo "cpu exit $?" >> "$S/cpu.txt" ) &
CPU_PID=$!
t=$SECONDS
$GPU_CORES timeout $(( $(left) < 130 ? $(left) : 130 )) python3 -m attnbench selftest --device cuda \
    --json "$S/selftest.json" --db "$S/selftest.sqlite" > "$S/cuda.txt" 2>&1
echo "cuda exit $? after $((SECONDS - t)) s" >> "$S/cuda.txt"
wait $CPU_PID
cat "$S/cuda.txt"; echo; cat "$S/cpu.txt"; echo
# the GPU test judges the JSON just written (running the command again would not fit the budget)
ATTNBENCH_SELFTEST_RESULT="$S/selftest.json" timeout $(( $(left) > 10 ? $(left) : 10 )) \
  python3 -m pytest -q -m gpu tests/test_selftest.py -p no:cacheprovider 2>&1 | tail -4 | tee "$S/pytest.txt"
python3 - "$S" <<'PY'
import json, sys, pathlib
d = pathlib.Path(sys.argv[1])
res = {k: json.loads((d / f).read_text()) if (d / f).exists() else None
       for k, f in (("cuda", "selftest.json"), ("cpu", "selftest_cpu.json"))}
names = [v["class"] for r in res.values() if r for v in r["verdicts"]]
names = list(dict.fromkeys(names + [g["class"] for r in res.values() if r for g in r["gpu_only"]]))
def cell(r, n):
    if r is None: return "no result"
    v = {x["class"]: x for x in r["verdicts"]}.get(n)
    return "GPU only" if v is None else ("caught " if v["caught"] else "") + v["verdict"]
print(f"{'class':<20} {'cuda':<28} {'cpu':<28}")
for n in names:
    print(f"{n:<20} {cell(res['cuda'], n):<28} {cell(res['cpu'], n):<28}")
for k, r in res.items():
    if r:
        print(f"{k}: {r['caught']}/{r['classes']} caught, control {r['control'][:60]}, "
              f"fresh inputs {r['fresh_inputs']}, {r['wall_s']} s, {r['device_name']}")
    else:
        print(f"{k}: no result (see {k}.txt)")
PY
