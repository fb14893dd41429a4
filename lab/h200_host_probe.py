"""Device-side probe for two open questions of the quick grid (run on the H200, prints a table).

1. Host cost of eager calls moved by up to 2x between worker processes. Each of several fresh
   processes times eager launches of a tiny kernel and of an SDPA decode call, and reports the CPU
   it ran on and whether that CPU is in the GPU's NVML CPU-affinity set; then the same with each
   process pinned to one GPU-local core.
2. The bandwidth ceilings (copy, float32 sum) sit under what decode kernels reach. A Triton
   read-only kernel is timed next to them at several sizes.

Run from the repository root with PYTHONPATH=src.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

CHILD = r"""
import json, os, time, torch
import torch.nn.functional as F
def cpu():
    return int(open('/proc/self/stat').read().rsplit(')', 1)[1].split()[36])
c0 = cpu()
x = torch.ones(16, device='cuda'); y = torch.ones(16, device='cuda')
q = torch.randn(1, 32, 1, 128, device='cuda', dtype=torch.bfloat16)
k = torch.randn(1, 8, 4096, 128, device='cuda', dtype=torch.bfloat16); v = torch.randn_like(k)
def sdpa():
    from torch.nn.attention import sdpa_kernel, SDPBackend
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
res = {}
for name, fn, n in (("add", lambda: torch.add(x, y), 4000), ("sdpa_cudnn_decode", sdpa, 2000)):
    for _ in range(200): fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n): fn()
        torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) / n * 1e6)
    res[name] = min(ts)
res["cpu_start"] = c0; res["cpu_end"] = cpu(); res["affinity"] = len(os.sched_getaffinity(0))
print(json.dumps(res))
"""


def gpu_cpus() -> list[int]:
    try:
        from attnbench.measure import nvml

        nv, h = nvml.handle(0)
        words = nv.nvmlDeviceGetCpuAffinity(h, 4)
        return [w * 64 + b for w, word in enumerate(words) for b in range(64) if (word >> b) & 1]
    except Exception as e:  # noqa: BLE001
        print("nvml affinity unavailable:", e)
        return []


def host_cost(n: int, local: list[int]) -> None:
    print(f"visible cpus {len(os.sched_getaffinity(0))}, GPU-local per NVML {len(local)}: {local[:8]}...")
    for pin in (False, True):
        rows = []
        for i in range(n):
            cmd = [sys.executable, "-c", CHILD]
            if pin and local:
                core = local[(2 * i) % len(local)]
                cmd = ["taskset", "-c", str(core)] + cmd
            r = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1])
            r["local"] = r["cpu_end"] in local
            rows.append(r)
            print(("pinned " if pin else "free   ") + json.dumps(r))
        for key in ("add", "sdpa_cudnn_decode"):
            v = sorted(r[key] for r in rows)
            print(f"{'pinned' if pin else 'free':6s} {key:18s} us/call min {v[0]:.1f} median {v[len(v)//2]:.1f} max {v[-1]:.1f}")


def bandwidth() -> None:
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def read_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, ITERS: tl.constexpr):
        pid = tl.program_id(0)
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        base = pid * BLOCK * ITERS
        for i in range(ITERS):
            offs = base + i * BLOCK + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
        tl.store(out_ptr + pid, tl.sum(acc, 0))

    from attnbench.measure.ceilings import median_seconds

    def timed(fn):
        return median_seconds(fn, "cuda", 20)

    for mib in (512, 2048):
        nbytes = mib << 20
        src = torch.empty(nbytes, dtype=torch.uint8, device="cuda").random_()
        dst = torch.empty_like(src)
        print(f"{mib} MiB copy_ uint8      {2 * nbytes / timed(lambda: dst.copy_(src)) / 1e9:7.0f} GB/s")
        del src, dst
        f = torch.rand(nbytes // 4, device="cuda")
        print(f"{mib} MiB sum fp32         {nbytes / timed(lambda: f.sum()) / 1e9:7.0f} GB/s")
        del f
        x = torch.rand(nbytes // 2, device="cuda").to(torch.bfloat16)
        n = x.numel()
        for block, iters, warps in ((4096, 8, 8), (8192, 4, 8), (2048, 16, 4), (4096, 32, 8)):
            grid = (triton.cdiv(n, block * iters),)
            out = torch.empty(grid[0], device="cuda")
            t = timed(lambda: read_kernel[grid](x, out, n, BLOCK=block, ITERS=iters, num_warps=warps))
            ok = torch.allclose(out.sum(), x.float().sum(), rtol=1e-3)
            print(f"{mib} MiB triton read b{block} i{iters} w{warps} {nbytes / t / 1e9:7.0f} GB/s  sum ok {ok}")
        del x


if __name__ == "__main__":
    host_cost(int(os.environ.get("N_PROC", "8")), gpu_cpus())
    bandwidth()
