"""Host cost of one triton-decode step (issue 41's eager KV4k row): Triton's JIT launch against the bound launch (backends/triton_kernels/launch.py).

  python3 lab/bench_decode_host.py [--calls 2000] [--kv 4096] [--batch 8]     (TRITON_INTERPRET must not be set)

Without a GPU (this is what it is for): Triton's driver is replaced by one whose launcher is CudaLauncher with its C
launch swapped for a function that does nothing, and the two kernels are compiled for sm_90 by the JIT itself
(its own specialisation of these arguments), so every line of Python a launch runs is timed, and no launch.
Three ways of making the step's two launches, per call on B8 Hq32 Hkv8 D128 bf16 tensors (CPU memory, never read):
  v1      the step as it was: strides and options computed, then kernel[grid](...) twice (the JIT binds,
          specialises, keys its cache, builds launch metadata, calls the launcher's Python) inside named.run;
  jit     the same launches with every argument computed once (only the JIT's own cost left);
  direct  the bound launches (Launch with fast=True): the current stream read, the C launch called.
The C launch itself (argument parsing, cuPointerGetAttribute per tensor on the JIT path, cuLaunchKernelEx) is not
in these figures: on a GPU it adds a few microseconds per launch to each way (a little more to v1 and jit, whose
launcher reads each tensor's address and checks it).
With a GPU: the real launcher; host microseconds to issue one step (200 steps back to back from an idle device,
under the launch queue's depth), and device-event microseconds per step of v1 and direct issued back to back as
the runner's eager timing issues them (host-bound when the host's time per step exceeds the kernels')."""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from types import SimpleNamespace

import torch
import triton

from attnbench.backends.triton_kernels import decode, decode_step, named
from attnbench.backends.triton_kernels.common import LOG2E, launch_options, upcast

CFG = {"BLOCK_N": 64, "num_warps": 4, "num_stages": 3}
CALLS: list = []


def v1_forward(q, k, v, o, table, page, n_vis, scale, nsplit, bufs, cfg) -> None:
    """decode.forward as of commit a5013bc (the step's per-call work then), contiguous cache only."""
    B, HQ, _, D = q.shape
    HKV = k.shape[1]
    DV = v.shape[3]
    group = HQ // HKV
    bn = cfg["BLOCK_N"]
    chunk = -(-(-(-n_vis // nsplit)) // bn) * bn
    part_o, part_l = bufs
    ks, vs, ts = k.stride(), v.stride(), (0, 0)
    qs = (q.stride(0), q.stride(1), q.stride(3))
    decode.tri_dec_split[(nsplit, B * HKV)](q, k, v, q, part_o, part_l, scale * LOG2E, *qs, *ks, *vs, *ts, HQ, HKV,
                                            group, n_vis, chunk, nsplit, page, PAGED=False,
                                            BLOCK_H=max(16, triton.next_power_of_2(group)), BLOCK_N=bn, HEAD_D=D,
                                            HEAD_DV=DV, UPCAST=upcast(q), **launch_options(cfg))
    decode.tri_dec_reduce[(B * HQ,)](part_o, part_l, o, o.stride(0), o.stride(1), o.stride(3), HQ, nsplit,
                                     BLOCK_S=max(2, triton.next_power_of_2(nsplit)), HEAD_DV=DV, num_warps=4)


def fake_driver():
    """Triton's active driver for an sm_90 target without a GPU: kernels compile, launches do nothing."""
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.driver import CudaLauncher

    def launch(*args):  # stands for the launcher's C function
        CALLS.append(args) if RECORD else None

    class NoLaunch(CudaLauncher):
        def __init__(self, src, metadata):  # CudaLauncher's attributes without compiling its C module
            self.num_ctas = getattr(metadata, "num_ctas", 1)
            self.launch = launch
            self.global_scratch_size = metadata.global_scratch_size
            self.global_scratch_align = metadata.global_scratch_align
            self.profile_scratch_size = metadata.profile_scratch_size
            self.profile_scratch_align = metadata.profile_scratch_align
            self.launch_cooperative_grid = metadata.launch_cooperative_grid
            self.launch_pdl = metadata.launch_pdl

    return SimpleNamespace(
        utils=SimpleNamespace(load_binary=lambda name, kernel, shared, device: (1, 2, 64, 0, 1024),
                              get_device_properties=lambda device: {"max_shared_mem": 232448}),
        launcher_cls=NoLaunch, get_current_device=lambda: 0, get_current_stream=lambda index: 7,
        get_current_target=lambda: GPUTarget("cuda", 90, 32), get_active_torch_device=lambda: torch.device("cpu"))


RECORD = False


class _OnCuda:
    """What named.run reads of `like` on CUDA (its device), for the v1 path on CPU tensors."""

    device = torch.device("cuda", 0)


def tensors(batch: int, kv: int, device: str):
    hq, hkv, d = 32, 8, 128
    q = torch.randn(batch, hq, 1, d, device=device, dtype=torch.bfloat16)
    k = torch.randn(batch, hkv, kv, d, device=device, dtype=torch.bfloat16)
    v = torch.randn_like(k)
    return q, k, v, torch.empty_like(q)


def per_call_us(fn, calls: int, sync=None) -> float:
    """Host time to issue one call, the best of 5 runs of `calls` calls. On a GPU the device is idle at each
    run's start (sync before, not timed) and a run stays under the launch queue's depth (~1024 launches: 200
    steps), so the host never waits for the device: the time is the host's."""
    best = []
    for _ in range(5):
        if sync:
            sync()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best.append((time.perf_counter() - t0) / calls * 1e6)
    if sync:
        sync()
    return min(best)


def candidates(q, k, v, o, args, sms: int, dev: str) -> None:
    """Each of triton-decode's CUDA candidates at this shape, compiled by the JIT as a step compiles it (its own
    specialisation: unit strides constant, 16-byte alignment): splits, programs per SM, shared memory per program,
    how many programs fit an SM by shared memory (227 KiB), whether loads are pipelined (cp.async)."""
    print(f"candidates at B{args.batch} KV{args.kv} on {sms} SMs (the split kernel as compiled for sm_90):")
    for cfg in decode_step.CUDA:
        ns = decode.splits_for(args.batch, 8, args.kv, cfg["BLOCK_N"], sms, cfg["per_sm"], cfg["fill"])
        split, reduce = decode.plan(q, k, v, o, None, 0, args.kv, 128 ** -0.5, ns,
                                    decode.buffers(args.batch, 32, ns, 128, dev), cfg, fast=True)
        split()
        reduce()
        kern = split.kernel
        ptx = kern.asm.get("ptx", "")
        smem = kern.metadata.shared
        progs = ns * args.batch * 8
        print(f"  {str(cfg):80s} splits {ns:2d} programs {progs:4d} (at most {-(-progs // sms)} per SM) "
              f"smem {smem / 1024:5.1f} KiB ({232448 // max(smem, 1)} fit an SM) "
              f"{'cp.async' if 'cp.async' in ptx else 'no cp.async'} "
              f"{'mma.sync' if 'mma.sync' in ptx else 'wgmma' if 'wgmma' in ptx else 'no mma'}"
              + (f" regs {kern.n_regs}" if gpu_regs(kern) else ""))


def gpu_regs(kern) -> bool:
    return torch.cuda.is_available() and getattr(kern, "n_regs", None) is not None


def main() -> int:
    global RECORD
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--kv", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=8)
    args = ap.parse_args()
    gpu = torch.cuda.is_available()
    if not gpu:
        from triton.runtime import driver

        driver.set_active(fake_driver())
    dev = "cuda" if gpu else "cpu"
    q, k, v, o = tensors(args.batch, args.kv, dev)
    sms = torch.cuda.get_device_properties(0).multi_processor_count if gpu else 132
    ns = decode.splits_for(args.batch, 8, args.kv, CFG["BLOCK_N"], sms, 2, "under")
    bufs = decode.buffers(args.batch, 32, ns, 128, dev)
    scale = 128 ** -0.5
    like = q if gpu else _OnCuda()

    def v1():
        named.run("tri_dec_fwd", lambda: v1_forward(q, k, v, o, None, 0, args.kv, scale, ns, bufs, CFG), like)

    jit = decode.plan(q, k, v, o, None, 0, args.kv, scale, ns, bufs, CFG, fast=False)
    direct = decode.plan(q, k, v, o, None, 0, args.kv, scale, ns, bufs, CFG, fast=True)
    ways = {"v1": v1, "jit": lambda: (jit[0](), jit[1]()), "direct": lambda: (direct[0](), direct[1]())}
    for f in ways.values():  # compile, load, bind
        f()
        f()
    assert all(x.direct for x in direct) and not any(x.direct for x in jit), "the direct path was not taken"
    if not gpu:  # the direct launches hand the launcher what the JIT hands it
        RECORD = True
        CALLS.clear()
        ways["jit"]()
        ways["direct"]()
        RECORD = False
        addr = lambda a: a.data_ptr() if hasattr(a, "data_ptr") else a  # noqa: E731
        for j, d in ((CALLS[0], CALLS[2]), (CALLS[1], CALLS[3])):
            same = [addr(x) for x in j[:9] + j[13:]] == [addr(x) for x in d[:9] + d[13:]] and j[9] == d[9]
            assert same, "direct launch arguments differ from the JIT's"
        print("direct launches pass the launcher the JIT's arguments (grid, stream, function, metadata, every "
              "kernel argument)")
    candidates(q, k, v, o, args, sms, dev)
    sync = torch.cuda.synchronize if gpu else None
    where = "H200" if gpu else "CPU host, launcher's C call replaced by a no-op"
    print(f"B{args.batch} Hq32 Hkv8 KV{args.kv} D128 bf16, {ns} splits; host us per step (two launches), {where}:")
    for name, f in ways.items():
        print(f"  {name:7s} {per_call_us(f, min(args.calls, 200) if gpu else args.calls, sync):8.2f}")
    if gpu:
        for name in ("v1", "direct"):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            out = []
            for _ in range(20):
                a.record()
                for _ in range(50):
                    ways[name]()
                b.record()
                b.synchronize()
                out.append(a.elapsed_time(b) * 1e3 / 50)
            kv_bytes = 2 * k.numel() * k.element_size()
            us = statistics.median(out)
            print(f"  eager events {name:7s} {us:8.2f} us per step, {kv_bytes / us / 1e6:.2f} TB/s of K+V")
    return 0


if __name__ == "__main__":
    sys.exit(main())
