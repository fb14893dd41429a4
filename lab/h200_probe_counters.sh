#!/usr/bin/env bash
# Probe for issues 39/40/41 on one H200 (no attnbench code): what Nsight Compute prints for the metrics the
# counters phase reads (CSV, raw page), eager and CUDA-graph launches; which metric names this ncu knows;
# what triton 3.6's language offers for the Hopper rungs; NVML's view of other processes; FP8 matmul.
# Leaves in $OUT: ncu-*.csv, ncu-metrics.txt, triton-api.txt, nvml.txt, probe.txt.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
NCU=/usr/local/cuda/bin/ncu
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__throughput.avg.pct_of_peak_sustained_elapsed,gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread,launch__shared_mem_per_block,launch__grid_size,launch__block_size,sm__cycles_elapsed.avg.per_second,dram__throughput.avg.pct_of_peak_sustained_elapsed
cat > /tmp/k.py <<'PY'
import sys, torch
from torch.nn.attention import sdpa_kernel, SDPBackend
B,H,N,D = 4,32,4096,128
q,k,v = (torch.randn(B,H,N,D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
mode = sys.argv[1]
be = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}
for name in ("cudnn", "flash"):
    with sdpa_kernel(be[name]):
        f = lambda: torch.nn.functional.scaled_dot_product_attention(q,k,v)
        f(); torch.cuda.synchronize()
        if mode == "graph":
            g = torch.cuda.CUDAGraph()
            s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s): f()
            torch.cuda.current_stream().wait_stream(s)
            with torch.cuda.graph(g): out = f()
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_push("timed-"+name); g.replay(); torch.cuda.nvtx.range_pop()
        else:
            torch.cuda.nvtx.range_push("timed-"+name); f(); torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
# decode: large KV, memory-bound
qd = torch.randn(8,32,1,128, device="cuda", dtype=torch.bfloat16)
kd,vd = (torch.randn(8,32,16384,128, device="cuda", dtype=torch.bfloat16) for _ in range(2))
with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
    torch.nn.functional.scaled_dot_product_attention(qd,kd,vd); torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("timed-decode"); torch.nn.functional.scaled_dot_product_attention(qd,kd,vd); torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
print("kv bytes", 2*kd.numel()*2)
PY
{
$NCU --version
for mode in eager graph; do
  t0=$(date +%s.%N)
  $NCU --csv --page raw --print-units base --nvtx --nvtx-include "regex:timed-.*/" --metrics $M python3 /tmp/k.py $mode > "$OUT/ncu-$mode.csv" 2> "$OUT/ncu-$mode.err"
  echo "ncu $mode rc=$? wall=$(python3 -c "print($(date +%s.%N) - $t0)")"
done
t0=$(date +%s.%N); python3 /tmp/k.py eager; echo "plain wall=$(python3 -c "print($(date +%s.%N) - $t0)")"
$NCU --query-metrics --chip gh100 2>&1 | grep -E "^(sm__pipe|sm__inst_executed_pipe|dram__bytes|lts__t_bytes|l1tex__data_pipe_lsu_wavefronts_mem_shared|sm__warps_active|smsp__inst_executed_pipe_xu|sm__pipe_shared)" > "$OUT/ncu-metrics.txt"
wc -l "$OUT/ncu-metrics.txt"
} > "$OUT/probe.txt" 2>&1
python3 - > "$OUT/triton-api.txt" 2>&1 <<'PY'
import inspect, triton, triton.language as tl, torch
print("triton", triton.__version__, "torch", torch.__version__)
for n in ("make_tensor_descriptor", "range", "static_range", "dot", "dot_scaled", "fp8e4nv", "fp8e5"):
    print(n, hasattr(tl, n))
print("tl.range sig", inspect.signature(tl.range))
try:
    from triton.tools.tensor_descriptor import TensorDescriptor; print("host TensorDescriptor ok")
except Exception as e: print("host TensorDescriptor", e)
print("set_allocator", hasattr(triton, "set_allocator"))
print("Config sig", inspect.signature(triton.Config))
a = torch.randn(256,256, device="cuda").to(torch.float8_e4m3fn); b = torch.randn(256,256, device="cuda").to(torch.float8_e4m3fn)
one = torch.tensor(1.0, device="cuda")
print("scaled_mm", torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16).shape)
PY
python3 - > "$OUT/nvml.txt" 2>&1 <<'PY'
import pynvml as n, os
n.nvmlInit(); h = n.nvmlDeviceGetHandleByIndex(0)
print("procs", [(p.pid, p.usedGpuMemory) for p in n.nvmlDeviceGetComputeRunningProcesses(h)])
print("util", n.nvmlDeviceGetUtilizationRates(h).gpu, "load", os.getloadavg())
print("clocks sm max", n.nvmlDeviceGetMaxClockInfo(h, n.NVML_CLOCK_SM), "mem", n.nvmlDeviceGetMaxClockInfo(h, n.NVML_CLOCK_MEM))
PY
cat "$OUT/probe.txt" "$OUT/triton-api.txt" "$OUT/nvml.txt"; head -c 1500 "$OUT/ncu-eager.csv"; echo; tail -c 600 "$OUT/ncu-graph.err"
