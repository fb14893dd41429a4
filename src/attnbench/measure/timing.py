"""All timing: CUDA events (eager or graph replay, warm or flushed L2) and a host clock on CPU.

Raw per-call samples are returned; statistics beyond the stopping rule belong to analysis."""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable


MIN_SAMPLES_AT_CAP = 5  # samples kept even when the time cap is reached first


@dataclass(frozen=True)
class TimingConfig:
    warmup_s: float = 0.05  # warm-up by time budget (and at least 2 calls)
    min_samples: int = 10
    max_samples: int = 200
    max_time_s: float = 2.0  # per attempt, after warm-up
    target_rel_err: float = 0.01  # 95% half-width of the median over the median
    min_block_us: float = 100.0  # calls per event pair chosen so a block lasts at least this

    @classmethod
    def for_device(cls, device: str, max_time_s: float | None = None) -> "TimingConfig":
        """GPU: 0.5 s of samples at most; CPU (a laptop smoke test): 0.3 s, shorter warm-up."""
        if device.startswith("cuda"):
            base = cls(max_time_s=0.5)
        else:
            base = cls(warmup_s=0.02, max_time_s=0.3, min_block_us=200.0)
        return base if max_time_s is None else cls(**{**base.__dict__, "max_time_s": max_time_s})


@dataclass
class Timing:
    samples_us: list[float] = field(default_factory=list)  # per call
    calls_per_sample: int = 1
    timer: str = "host_clock"  # cuda_event | cuda_graph | host_clock
    warmup_calls: int = 0
    warmup_us: float = 0.0
    converged: bool = False
    rel_err: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def rel_halfwidth(samples: list[float]) -> float:
    """95% half-width of the median (normal approximation, 1.2533·σ/√n) relative to the median."""
    if len(samples) < 3:
        return math.inf
    med = statistics.median(samples)
    return 1.96 * 1.2533 * statistics.stdev(samples) / math.sqrt(len(samples)) / med if med > 0 else math.inf


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def cold_call(step: Callable[[], Any], device: str) -> tuple[Any, float]:
    """The first call, compile or autotune included, by host clock after a device sync."""
    _sync(device)
    t0 = time.perf_counter()
    out = step()
    _sync(device)
    return out, (time.perf_counter() - t0) * 1e6


def warmup(step: Callable[[], Any], device: str, budget_s: float) -> tuple[int, float]:
    t0 = time.perf_counter()
    n = 0
    while n < 2 or time.perf_counter() - t0 < budget_s:
        step()
        _sync(device)
        n += 1
    return n, (time.perf_counter() - t0) * 1e6


def _collect(sample: Callable[[], float], cfg: TimingConfig, t: Timing) -> Timing:
    t0 = time.perf_counter()
    while len(t.samples_us) < cfg.max_samples:
        batch = min(10, cfg.max_samples - len(t.samples_us))
        for _ in range(batch):
            t.samples_us.append(sample())
            if time.perf_counter() - t0 > cfg.max_time_s and len(t.samples_us) >= MIN_SAMPLES_AT_CAP:
                break
        t.rel_err = rel_halfwidth(t.samples_us)
        if len(t.samples_us) >= cfg.min_samples and t.rel_err <= cfg.target_rel_err:
            t.converged = True
            break
        if time.perf_counter() - t0 > cfg.max_time_s and len(t.samples_us) >= MIN_SAMPLES_AT_CAP:
            break  # slow calls: the time cap wins over min_samples; `converged` stays False
    if t.rel_err == math.inf:
        t.rel_err = None
    return t


def time_host(step: Callable[[], Any], cfg: TimingConfig) -> Timing:
    """CPU: perf_counter around blocks of k calls (the CPU kernels are synchronous)."""
    n, wus = warmup(step, "cpu", cfg.warmup_s)
    est = min(_host_once(step, 1) for _ in range(3))
    k = max(1, math.ceil(cfg.min_block_us / max(est, 1e-3)))
    t = Timing(calls_per_sample=k, timer="host_clock", warmup_calls=n, warmup_us=wus)
    return _collect(lambda: _host_once(step, k), cfg, t)


def _host_once(step, k: int) -> float:
    t0 = time.perf_counter_ns()
    for _ in range(k):
        step()
    return (time.perf_counter_ns() - t0) / 1e3 / k


class _L2Flusher:
    def __init__(self, device: str):
        import torch

        props = torch.cuda.get_device_properties(torch.device(device))
        self.buf = torch.empty(2 * max(props.L2_cache_size, 1 << 20), dtype=torch.uint8, device=device)

    def __call__(self) -> None:
        self.buf.zero_()


def time_cuda(step: Callable[[], Any], device: str, cfg: TimingConfig, launch: str = "eager",
              l2: str = "warm") -> Timing:
    """Device events around k calls (k=1 when L2 is flushed); graph launch replays k captured calls."""
    import torch

    n, wus = warmup(step, device, cfg.warmup_s)
    flush = _L2Flusher(device) if l2 == "cold" else None
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def events(fn: Callable[[], Any], k: int) -> float:
        if flush:
            flush()
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1e3 / k

    per_call = wus / max(n, 1)
    if flush or per_call > 10 * cfg.min_block_us:  # long calls: one per sample, no estimate needed
        k = 1
    else:
        est = sorted(events(step, 1) for _ in range(3))[1]
        k = max(1, math.ceil(cfg.min_block_us / max(est, 1e-3)))
    if launch == "graph":
        graph = capture_graph(step, k, device)
        t = Timing(calls_per_sample=k, timer="cuda_graph", warmup_calls=n, warmup_us=wus)
        graph.replay()
        torch.cuda.synchronize()
        return _collect(lambda: events(graph.replay, k), cfg, t)

    def block():
        for _ in range(k):
            step()

    t = Timing(calls_per_sample=k, timer="cuda_event", warmup_calls=n, warmup_us=wus)
    return _collect(lambda: events(block, k), cfg, t)


class GraphCaptureError(RuntimeError):
    pass


def capture_graph(step: Callable[[], Any], k: int, device: str):
    """Capture k calls in one CUDA graph after a side-stream warm-up (what capture requires)."""
    import torch

    side = torch.cuda.Stream(device=device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(2):
            step()
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            for _ in range(k):
                step()
    except Exception as e:
        raise GraphCaptureError(f"graph capture failed: {type(e).__name__}: {str(e).splitlines()[0]}") from None
    return graph


def event_overhead_us(device: str, n: int = 200) -> float:
    """Median time between two back-to-back events: the floor under any event-timed sample."""
    if not device.startswith("cuda"):
        t = []
        for _ in range(n):
            t0 = time.perf_counter_ns()
            t.append((time.perf_counter_ns() - t0) / 1e3)
        return statistics.median(t)
    import torch

    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for _ in range(n):
        a.record()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) * 1e3)
    return statistics.median(out)


def measure(step: Callable[[], Any], device: str, cfg: TimingConfig, launch: str, l2: str) -> Timing:
    if device.startswith("cuda"):
        return time_cuda(step, device, cfg, launch, l2)
    return time_host(step, cfg)
