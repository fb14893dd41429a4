#!/usr/bin/env bash
# First look on a CUDA host: environment, smoke grid on the GPU, a slice of the quick grid.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv
python3 -c "import torch,triton;print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version(), triton.__version__)"
python3 -m attnbench backends
time python3 -m attnbench run --grid smoke --device cuda --db $OUT/smoke.sqlite 2>&1 | tail -4
time python3 -m attnbench run --grid quick --seqlen 4k --device cuda --db $OUT/q4k.sqlite 2>&1 | tail -4
python3 - <<'PY'
import sqlite3, json, os
for db in ("smoke", "q4k"):
    c = sqlite3.connect(f"{os.environ['OUT']}/{db}.sqlite")
    print("==", db)
    for r in c.execute("select backend, mode, batch, kv_len, causal, causal_align, launch, status, substr(reason,1,160), "
                       "round(median_us,1), round(cold_start_us/1e3), round(err_ratio,2), dispatch_families, "
                       "substr(dispatch_kernels,1,200), peak_mem_bytes, sm_clock_mhz, calls_per_sample, converged, json_array_length(samples_us) from attempts"):
        print(r)
    prov = json.loads(c.execute("select provenance from runs").fetchone()[0])
    print(json.dumps({k: prov[k] for k in ("device", "ceilings", "event_overhead_us", "cudnn", "cuda_runtime")}))
PY
python3 -m attnbench show --db $OUT/q4k.sqlite --status
tail -30 $OUT/q4k.sqlite.log
