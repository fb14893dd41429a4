"""Measured ceilings of a device: copy and read-only bandwidth, matmul rate per dtype (the denominators
of "% of ceiling"), and the host's pace at issuing eager ops."""
from __future__ import annotations

import time


def median_seconds(fn, device: str, reps: int) -> float:
    """Median seconds of fn over reps, after one warm-up call."""
    import statistics

    import torch

    fn()
    ts = []
    for _ in range(reps):
        if device.startswith("cuda"):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            ts.append(a.elapsed_time(b) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def host_op_us(device: str, calls: int = 200, reps: int = 11) -> float:
    """Host microseconds to issue one small eager op (a one-element add into a given output), the
    median of `reps` blocks of `calls` with the device synchronized between blocks: the pace a
    host-bound eager row runs at. Hosts of one GPU model differ in it (host-bound eager rows took a
    median 1.07-1.43x as long in one part of a sweep as in another, each on another lent H200 host;
    docs/methodology.md §8), so a run records it."""
    import statistics

    import torch

    x = torch.zeros(1, device=device)
    y = torch.empty_like(x)
    cuda = device.startswith("cuda")

    def sync():
        if cuda:
            torch.cuda.synchronize(device)

    torch.add(x, 1, out=y)
    sync()
    blocks = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(calls):
            torch.add(x, 1, out=y)
        blocks.append(time.perf_counter() - t0)
        sync()
    return statistics.median(blocks) / calls * 1e6


# Reductions of the same buffer in three shapes: which of torch's reduction kernels streams fastest differs by
# GPU and size (one 2 GiB sum read 4.3 TB/s on the H200 while cuDNN's decode read its KV cache at 4.44), and each
# is a real read-only stream, so the fastest is the read ceiling (a lower bound of what the DRAM can do).
READ_ROW = 1 << 16  # floats per row of the row-wise sums (256 KiB: long contiguous reads per output)


def read_probes(vals) -> dict:
    """Read-only passes over `vals` (a flat float32 tensor whose size is a multiple of READ_ROW): a sum to one
    value, sums per contiguous row, sums per column (rows read side by side) and, on CUDA with Triton, a
    streaming kernel of wide loads (measure/read_stream.py)."""
    from .read_stream import stream_probe

    rows = vals.view(-1, READ_ROW)
    probes = {"sum": lambda: vals.sum(), "rows": lambda: rows.sum(dim=1), "columns": lambda: rows.sum(dim=0)}
    stream = stream_probe(vals)
    if stream is not None:
        probes["stream"] = stream
    return probes


def ceilings(device: str) -> dict:
    """Measured copy bandwidth (512 MiB device-to-device, read + written counted: the seed's convention),
    read bandwidth (the fastest of read_probes, each variant's figure kept in read_gbps_by), matmul rate per
    dtype on random data, and what the clock peaks need (measure/peaks.py: SMs, compute capability, datasheet
    clock, DRAM's theoretical bandwidth)."""
    import torch

    from .peaks import device_peaks, dram_peak

    cuda = device.startswith("cuda")
    nbytes = (512 << 20) if cuda else (64 << 20)
    src = torch.empty(nbytes, dtype=torch.uint8, device=device).random_()
    dst = torch.empty_like(src)
    t = median_seconds(lambda: dst.copy_(src), device, 10)
    out = {"copy_gbps": 2 * nbytes / t / 1e9}
    del src, dst
    # Read-only traffic (what decode does) runs above copy bandwidth: a reduction reads once. On the
    # H200 a 512 MiB reduction read 3.4-3.8 TB/s and a 2 GiB one 4.3 TB/s in the same process
    # (lab/h200_host_probe.py), so the read buffer is 2 GiB where a quarter of free memory allows.
    rbytes = nbytes
    if cuda and torch.cuda.mem_get_info(torch.device(device))[0] >= 4 * (2048 << 20):
        rbytes = 2048 << 20
    vals = torch.rand(rbytes // 4, device=device)
    out["read_gbps_by"] = {name: round(rbytes / median_seconds(fn, device, 10) / 1e9, 1)
                           for name, fn in read_probes(vals).items()}
    out["read_gbps"] = max(out["read_gbps_by"].values())
    out["read_bytes"] = rbytes
    del vals
    n = 8192 if cuda else 512
    for name, dt in (("bf16", torch.bfloat16), ("fp16", torch.float16), ("fp32", torch.float32)):
        a = torch.randn(n, n, device=device, dtype=dt)
        b = torch.randn(n, n, device=device, dtype=dt)
        t = median_seconds(lambda: torch.matmul(a, b), device, 10 if cuda else 3)
        out[f"matmul_tflops_{name}"] = 2 * n**3 / t / 1e12
    out["matmul_n"] = n
    out["host_op_us"] = host_op_us(device)
    out.update(device_peaks(device))
    if out.get("dram_peak_gbps") and dram_peak(out) is None:  # misread (peaks.dram_peak): not a ceiling
        out["peaks_error"] = f"NVML's DRAM bandwidth {out.pop('dram_peak_gbps')} GB/s is below the measured read"
    return out
