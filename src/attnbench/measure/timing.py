"""All timing: CUDA events (eager or graph replay, warm or flushed L2) and a host clock on CPU.

Raw per-call samples are returned; statistics beyond the stopping rule belong to analysis. The stopping
rule is measure/sampling.py, graph samples measure/graph.py; this module is the one door to both."""
from __future__ import annotations

import math
import time
from typing import Any, Callable

from .device import sync
from .graph import (DELAY_US, MAX_LEAD_US, GraphCaptureError, GraphSampler, GraphTimingError,  # noqa: F401
                    capture_graph, device_delay, event_overhead_us)
from .sampling import (BATCH_S, MAX_SAMPLES_UNDER_FLOOR, MIN_SAMPLES_AT_CAP, TREND_LIMIT, Timing,  # noqa: F401
                       TimingConfig, collect, rel_halfwidth, trend)
from .warmup import WARMUP_TOLERANCE, Warmup, warmup  # noqa: F401  (one door for timing)


def one_call(step: Callable[[], Any], device: str) -> tuple[Any, float]:
    """One call and its µs by host clock between device syncs: the first call (compile or autotune
    included), or a call on new input values (runner/attempt.py)."""
    sync(device)
    t0 = time.perf_counter()
    out = step()
    sync(device)
    return out, (time.perf_counter() - t0) * 1e6


def _timing(w: Warmup, k: int, timer: str) -> Timing:
    return Timing(calls_per_sample=k, timer=timer, warmup_calls=sum(c for c, _ in w.rounds),
                  warmup_us=sum(us for _, us in w.rounds), warmup_settled=w.settled)


def time_host(step: Callable[[], Any], cfg: TimingConfig, on_batch: Callable[[], None] | None = None) -> Timing:
    """CPU: perf_counter around blocks of k calls (the CPU kernels are synchronous)."""
    w = warmup(step, "cpu", cfg.warmup_s, cfg.warmup_max_s)
    est = min(_host_once(step, 1) for _ in range(3))
    k = max(1, math.ceil(cfg.min_block_us / max(est, 1e-3)))
    return collect(lambda: _host_once(step, k), cfg, _timing(w, k, "host_clock"), on_batch)


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
              l2: str = "warm", on_batch: Callable[[], None] | None = None) -> Timing:
    """Device events around k calls (k=1 when L2 is flushed).

    eager: k back-to-back calls from the host, as an eager model issues them; when the host is
    slower than the kernel, its launch cost is in the sample (that is what eager costs). k makes
    the block last ≥ eager_block_us so the first launch's latency is amortised.
    graph: k calls captured in one CUDA graph, replays queued in chunks behind a device-side delay
    (GraphSampler) so each sample is device time only; k makes the block last ≥ min_block_us."""
    import torch

    w = warmup(step, device, cfg.warmup_s, cfg.warmup_max_s)
    flush = _L2Flusher(device) if l2 == "cold" else None
    if launch == "graph":
        k = 1
        graph = capture_graph(step, 1, device)
        first = GraphSampler(graph.replay, 1, device, flush)
        first.plan(3)
        est = sorted(first() for _ in range(3))[1]
        if not flush and est < cfg.min_block_us:
            k = max(1, math.ceil(cfg.min_block_us / max(est, 1e-3)))
            del graph
            graph = capture_graph(step, k, device)
        graph.replay()
        torch.cuda.synchronize()
        sampler = GraphSampler(graph.replay, k, device, flush, sample_s=est * k / 1e6)
        t = collect(sampler, cfg, _timing(w, k, "cuda_graph"), on_batch)
        t.replay = lambda: (graph.replay(), graph.last_output)[1]
        return t

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def events(fn: Callable[[], Any], k: int) -> float:
        if flush:
            flush()
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1e3 / k

    if flush or w.per_call_us() > cfg.eager_block_us:  # a call this long amortises its own launch
        k = 1
    else:
        est = sorted(events(step, 1) for _ in range(3))[1]
        k = max(1, math.ceil(cfg.eager_block_us / max(est, 1e-3)))

    def block():
        for _ in range(k):
            step()

    return collect(lambda: events(block, k), cfg, _timing(w, k, "cuda_event"), on_batch)


def measure(step: Callable[[], Any], device: str, cfg: TimingConfig, launch: str, l2: str,
            on_batch: Callable[[], None] | None = None) -> Timing:
    """Warm-up, then samples; on_batch (e.g. Telemetry.read) runs before, between and after the
    sample batches, never inside a sample. The result's `replay()` (not stored) runs the timed path
    once more exactly as it was timed (the same graph for graph launch) and returns its output."""
    t = time_cuda(step, device, cfg, launch, l2, on_batch) if device.startswith("cuda") else \
        time_host(step, cfg, on_batch)
    if not hasattr(t, "replay"):  # eager and CPU: the timed path is the step itself
        t.replay = step
    return t
