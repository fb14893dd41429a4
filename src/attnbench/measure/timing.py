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


def time_host(step: Callable[[], Any], cfg: TimingConfig, on_batch: Callable[[], None] | None = None,
              fresh: Callable[[], None] | None = None) -> Timing:
    """CPU: perf_counter around blocks of k calls (the CPU kernels are synchronous). With `fresh` (new
    input values, measure/inputs.py Refresher), each call of a block is timed alone after its refill and a
    sample is the mean of the k calls' own intervals: the refills are outside the clock."""
    w = warmup(step, "cpu", cfg.warmup_s, cfg.warmup_max_s)
    est = min(_host_once(step, 1) for _ in range(3))
    k = max(1, math.ceil(cfg.min_block_us / max(est, 1e-3)))
    t = collect(lambda: _host_once(step, k, fresh), cfg, _timing(w, k, "host_clock"), on_batch)
    if fresh:
        again = getattr(fresh, "again", None)
        t.repeat = lambda: repeat_check(lambda: _host_once(step, k, fresh),
                                        again and (lambda: _host_once(step, k, again)), lambda: _host_once(step, k))
    return t


def _host_once(step, k: int, fresh: Callable[[], None] | None = None) -> float:
    if fresh is None:
        t0 = time.perf_counter_ns()
        for _ in range(k):
            step()
        return (time.perf_counter_ns() - t0) / 1e3 / k
    total = 0
    for _ in range(k):
        fresh()
        t0 = time.perf_counter_ns()
        step()
        total += time.perf_counter_ns() - t0
    return total / 1e3 / k


# The same-values comparison after fresh-input timing (one pass; runner/steps.py runs a second and a third
# when the first says cache, runner/gates.py judges them): REPEAT_PAIRS pairs, each the fastest of REPEAT_OF
# samples on new values beside the fastest of REPEAT_OF on the last values written again, taken in turn (new,
# again, new, again, ...; every other pair again first), so that a neighbour's burst or a drift weighs on both
# kinds alike, and a preempted sample must be joined by its REPEAT_OF - 1 siblings to move its pair.
REPEAT_PAIRS = 25
REPEAT_OF = 3


def repeat_check(fresh_sample: Callable[[], float], again_sample: Callable[[], float] | None,
                 same_sample: Callable[[], float], plan: Callable[[int], None] | None = None) -> dict:
    """One pass of the comparison after fresh-input timing, samples taken exactly as the timed ones: per pair
    the fastest of REPEAT_OF samples on new values (`new_us`) and of REPEAT_OF on the last values written again
    (`again_us`, Refresher.again: the same writes, versions set back), interleaved one by one, and one sample on
    the last values with no write (`same_us`, evidence only). An honest kernel takes about the same time each
    way; one that answers from a cache of its inputs is faster on values it has seen in every pair (runner/
    gates.py repeat_pass reads the lists). Without `again_sample` only `new_us` and `same_us` are taken."""
    out: dict[str, list[float]] = {"new_us": [], "again_us": [], "same_us": []} if again_sample else \
        {"new_us": [], "same_us": []}

    def one(f: Callable[[], float]) -> float:
        if plan:
            plan(1)
        return f()

    for i in range(REPEAT_PAIRS):
        kinds = [("new_us", fresh_sample)] + ([("again_us", again_sample)] if again_sample else [])
        if i % 2:  # every other pair the rewritten values first: an order effect falls on both kinds alike
            kinds.reverse()
        seen: dict[str, list[float]] = {name: [] for name, _ in kinds}
        for _ in range(REPEAT_OF):
            for name, f in kinds:
                seen[name].append(one(f))
        for name, values in seen.items():
            out[name].append(min(values))
        out["same_us"].append(one(same_sample))
    return {k: [round(x, 3) for x in v] for k, v in out.items()}


class _L2Flusher:
    def __init__(self, device: str):
        import torch

        props = torch.cuda.get_device_properties(torch.device(device))
        self.buf = torch.empty(2 * max(props.L2_cache_size, 1 << 20), dtype=torch.uint8, device=device)

    def __call__(self) -> None:
        self.buf.zero_()


def time_cuda(step: Callable[[], Any], device: str, cfg: TimingConfig, launch: str = "eager",
              l2: str = "warm", on_batch: Callable[[], None] | None = None,
              fresh: Callable[[], None] | None = None) -> Timing:
    """Device events around k calls (k=1 when L2 is flushed).

    eager: k back-to-back calls from the host, as an eager model issues them; when the host is
    slower than the kernel, its launch cost is in the sample (that is what eager costs). k makes
    the block last ≥ eager_block_us so the first launch's latency is amortised.
    graph: k calls captured in one CUDA graph, replays queued in chunks behind a device-side delay
    (GraphSampler) so each sample is device time only; k makes the block last ≥ min_block_us.
    fresh (new input values before every call, measure/inputs.py Refresher): eager, each call of a
    block between its own pair of events, its refill queued before the pair, a sample the mean of the k
    intervals; graph, one call captured (k = 1), the refill written into the captured buffers between
    replays, outside each replay's events; cold L2, the refill before the flush (docs/method/fresh-inputs.md)."""
    import torch

    w = warmup(step, device, cfg.warmup_s, cfg.warmup_max_s)
    flush = _L2Flusher(device) if l2 == "cold" else None
    if launch == "graph":
        k = 1
        graph = capture_graph(step, 1, device)
        first = GraphSampler(graph.replay, 1, device, flush, between=fresh)
        first.plan(3)
        est = sorted(first() for _ in range(3))[1]
        if not flush and not fresh and est < cfg.min_block_us:  # fresh: one call a replay, refilled between
            k = max(1, math.ceil(cfg.min_block_us / max(est, 1e-3)))
            del graph
            graph = capture_graph(step, k, device)
        graph.replay()
        torch.cuda.synchronize()
        sampler = GraphSampler(graph.replay, k, device, flush, sample_s=est * k / 1e6, between=fresh)
        t = collect(sampler, cfg, _timing(w, k, "cuda_graph"), on_batch)
        if fresh:
            again = getattr(fresh, "again", None)
            t.repeat = lambda: repeat_check(_with(sampler, fresh), again and _with(sampler, again),
                                            _with(sampler, None), sampler.plan)
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

    if not fresh:
        return collect(lambda: events(block, k), cfg, _timing(w, k, "cuda_event"), on_batch)
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(k)]

    def fresh_block(between: Callable[[], None] = fresh) -> float:
        # each call between its own events, its refill queued before them: the refill's device work is
        # outside every interval; a device idle at a start event waits there for the host's launch, as an
        # eager call does
        for a, b in pairs:
            between()
            if flush:
                flush()
            a.record()
            step()
            b.record()
        pairs[-1][1].synchronize()
        return sum(a.elapsed_time(b) for a, b in pairs) * 1e3 / k

    t = collect(fresh_block, cfg, _timing(w, k, "cuda_event"), on_batch)
    again = getattr(fresh, "again", None)
    t.repeat = lambda: repeat_check(fresh_block, again and (lambda: fresh_block(again)), lambda: events(block, k))
    return t


def _with(sampler: GraphSampler, between: Callable[[], None] | None) -> Callable[[], float]:
    """One graph sample with `between` (a refill, or None: the same values again) before each replay."""
    def sample() -> float:
        sampler.between = between
        return sampler()
    return sample


def measure(step: Callable[[], Any], device: str, cfg: TimingConfig, launch: str, l2: str,
            on_batch: Callable[[], None] | None = None, fresh: Callable[[], None] | None = None) -> Timing:
    """Warm-up, then samples; on_batch (e.g. Telemetry.read) runs before, between and after the
    sample batches, never inside a sample. The result's `replay()` (not stored) runs the timed path
    once more exactly as it was timed (the same graph for graph launch) and returns its output.
    fresh: new input values before every timed call (outside the timer); the result's `repeat()` (not stored)
    then takes one pass of the same-values comparison (repeat_check) with the timed path as it was timed."""
    t = time_cuda(step, device, cfg, launch, l2, on_batch, fresh) if device.startswith("cuda") else \
        time_host(step, cfg, on_batch, fresh)
    if not hasattr(t, "replay"):  # eager and CPU: the timed path is the step itself
        t.replay = step
    return t
