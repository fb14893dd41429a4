"""All timing: CUDA events (eager or graph replay, warm or flushed L2) and a host clock on CPU.

Raw per-call samples are returned; statistics beyond the stopping rule belong to analysis."""
from __future__ import annotations

import collections
import math
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import numpy as np

from .device import sync
from .warmup import WARMUP_TOLERANCE, Warmup, warmup  # noqa: F401  (one door for timing)


MIN_SAMPLES_AT_CAP = 5  # samples kept even when the time cap is reached first
# Under a floor of sampled time (--min-time): batches of about BATCH_S, and at most this many samples
# (a cold-L2 sample is one call: a 10 µs kernel cannot fill 0.5 s below it, and the row stays small)
BATCH_S, MAX_SAMPLES_UNDER_FLOOR = 0.025, 5000
# |trend| above this is a drift, not noise: the medians of two thirds of a stable kernel's samples
# differ by √6 standard errors of the median, under 3% (95%) at the 1% half-width target (a row
# with rel_err ≥ 4% can cross it by noise alone); a power-capped clock (1980 -> 1680-1755 MHz)
# moves them 11-15%, a kernel still settling more.
TREND_LIMIT = 0.10


@dataclass(frozen=True)
class TimingConfig:
    warmup_s: float = 0.05  # the shortest warm-up, even when its rounds agree at once
    warmup_max_s: float = 2.0  # warm-up ends here even when its rounds still drift
    min_samples: int = 10
    max_samples: int = 200
    max_time_s: float = 2.0  # per attempt, after warm-up
    target_rel_err: float = 0.01  # 95% half-width of the median over the median
    min_block_us: float = 100.0  # calls per event pair chosen so a block lasts at least this (graph, CPU)
    eager_block_us: float = 1000.0  # eager CUDA blocks: the first launch's latency is amortised over k
    min_time_s: float = 0.0  # the least sampled time (samples x calls) before the rule may stop; 0: none

    @classmethod
    def for_device(cls, device: str, max_time_s: float | None = None, min_time_s: float | None = None) -> "TimingConfig":
        """GPU: 0.5 s of samples at most and 0.02 s of warm-up (the step has already run in the cold
        call, the correctness check, the dispatch probe and the memory measurement), 2 s while it
        still drifts (a JIT, an autotuner or clocks settling); CPU (a laptop smoke test): 0.3 s,
        same warm-up, 1 s while drifting."""
        if device.startswith("cuda"):
            base = cls(warmup_s=0.02, warmup_max_s=2.0, max_time_s=0.5)
        else:
            base = cls(warmup_s=0.02, warmup_max_s=1.0, max_time_s=0.3, min_block_us=200.0)
        if max_time_s is not None:
            base = cls(**{**base.__dict__, "max_time_s": max_time_s})
        if min_time_s:  # the time cap leaves room for the floor
            base = cls(**{**base.__dict__, "min_time_s": min_time_s,
                          "max_time_s": max(base.max_time_s, 2 * min_time_s)})
        return base


@dataclass
class Timing:
    samples_us: list[float] = field(default_factory=list)  # per call
    calls_per_sample: int = 1
    timer: str = "host_clock"  # cuda_event | cuda_graph | host_clock
    warmup_calls: int = 0
    warmup_us: float = 0.0
    warmup_settled: bool = False  # False: the cap ended warm-up before two rounds agreed
    converged: bool = False
    rel_err: float | None = None
    trend: float | None = None  # see trend(); None with fewer than 6 samples
    stationary: bool = False  # warm-up settled and |trend| <= TREND_LIMIT
    late_samples: int = 0  # graph samples dropped: the device reached their start before the host had queued them

    def to_dict(self) -> dict:
        return asdict(self)


def rel_halfwidth(samples: list[float]) -> float:
    """95% half-width of the median (normal approximation, 1.2533·σ/√n) relative to the median."""
    if len(samples) < 3:
        return math.inf
    a = np.asarray(samples, dtype=np.float64)  # numpy: statistics.stdev took 2 ms at 5000 samples
    med = float(np.median(a))
    return 1.96 * 1.2533 * float(a.std(ddof=1)) / math.sqrt(len(a)) / med if med > 0 else math.inf


def trend(samples: list[float]) -> float | None:
    """(median of the last third − median of the first third) / median of all, in sample order;
    None with fewer than 6 samples (two per third) or a zero median."""
    med = statistics.median(samples) if len(samples) >= 6 else 0.0
    if med <= 0:
        return None
    third = len(samples) // 3
    return (statistics.median(samples[-third:]) - statistics.median(samples[:third])) / med


def one_call(step: Callable[[], Any], device: str) -> tuple[Any, float]:
    """One call and its µs by host clock between device syncs: the first call (compile or autotune
    included), or a call on new input values (runner/attempt.py)."""
    sync(device)
    t0 = time.perf_counter()
    out = step()
    sync(device)
    return out, (time.perf_counter() - t0) * 1e6


def _collect(sample: Callable[[], float], cfg: TimingConfig, t: Timing,
             on_batch: Callable[[], None] | None = None) -> Timing:
    """Samples in batches under the stopping rule; on_batch() runs before the first sample,
    between batches and after the last, outside every sample (telemetry reads there).

    The rule stops at the first batch after which the samples are converged (min_samples, and the
    median's half-width within target_rel_err) and, when cfg.min_time_s is set, the sampled time
    (samples x calls) has reached it; max_time_s and the sample cap end it regardless. Batches hold
    10 samples; under a min_time_s they last about BATCH_S instead (more samples of the same block,
    never a longer block: what one sample measures does not depend on the floor)."""
    on_batch = on_batch or (lambda: None)
    plan = getattr(sample, "plan", None)  # a pipelined sampler queues the batch's samples together
    on_batch()
    t0 = time.perf_counter()
    floor = cfg.min_time_s
    cap = cfg.max_samples if floor <= 0 else max(cfg.max_samples, MAX_SAMPLES_UNDER_FLOOR)
    sampled = 0.0  # seconds of timed calls so far

    def capped() -> bool:  # slow calls: the time cap wins over min_samples (`converged` says whether they were)
        return time.perf_counter() - t0 > cfg.max_time_s and len(t.samples_us) >= MIN_SAMPLES_AT_CAP

    while len(t.samples_us) < cap:
        batch = 10
        if floor > 0 and t.samples_us:
            batch = max(batch, math.ceil(BATCH_S / max(sampled / len(t.samples_us), 1e-6)))
        batch = min(batch, cap - len(t.samples_us))
        if plan:
            plan(batch)
        for _ in range(batch):
            us = sample()
            t.samples_us.append(us)
            sampled += us * t.calls_per_sample / 1e6
            if capped():
                break
        on_batch()
        t.rel_err = rel_halfwidth(t.samples_us)
        t.converged = len(t.samples_us) >= cfg.min_samples and t.rel_err <= cfg.target_rel_err
        if (t.converged and sampled >= floor) or capped():
            break
    if t.rel_err == math.inf:
        t.rel_err = None
    t.late_samples = getattr(sample, "late", 0)
    t.trend = trend(t.samples_us)
    # with fewer than 6 samples there is no trend to test: the warm-up alone vouches for them
    t.stationary = t.warmup_settled and (t.trend is None or abs(t.trend) <= TREND_LIMIT)
    return t


def _timing(w: Warmup, k: int, timer: str) -> Timing:
    return Timing(calls_per_sample=k, timer=timer, warmup_calls=sum(c for c, _ in w.rounds),
                  warmup_us=sum(us for _, us in w.rounds), warmup_settled=w.settled)


def time_host(step: Callable[[], Any], cfg: TimingConfig, on_batch: Callable[[], None] | None = None) -> Timing:
    """CPU: perf_counter around blocks of k calls (the CPU kernels are synchronous)."""
    w = warmup(step, "cpu", cfg.warmup_s, cfg.warmup_max_s)
    est = min(_host_once(step, 1) for _ in range(3))
    k = max(1, math.ceil(cfg.min_block_us / max(est, 1e-3)))
    return _collect(lambda: _host_once(step, k), cfg, _timing(w, k, "host_clock"), on_batch)


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


DELAY_US = 200.0  # device-side delay queued before a graph sample's start event
_cycles_per_us: dict[str, float] = {}


def device_delay(device: str, us: float = DELAY_US) -> None:
    """Queue a kernel that only spins for `us` microseconds, so that the host has recorded the start
    event, launched the work and recorded the end event before the device reaches them: the events
    then bracket device time only, not the host's launch latency (or its jitter)."""
    import torch

    if device not in _cycles_per_us:  # calibrate once per process: spin cycles per microsecond
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(1000)
        rates = []
        for _ in range(3):
            a.record()
            torch.cuda._sleep(1_000_000)
            b.record()
            b.synchronize()
            rates.append(1_000_000 / (a.elapsed_time(b) * 1e3))
        _cycles_per_us[device] = statistics.median(rates)
    torch.cuda._sleep(max(1, int(us * _cycles_per_us[device])))


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
        t = _collect(sampler, cfg, _timing(w, k, "cuda_graph"), on_batch)
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

    return _collect(lambda: events(block, k), cfg, _timing(w, k, "cuda_event"), on_batch)


MAX_CHUNK = 1024  # graph samples queued behind one lead delay, at most
# a chunk lasts at most this long on the device (or one sample, where that is longer): a batch under a
# floor (about BATCH_S) fits in one, and a slow sample is queued alone as before chunks
CHUNK_S = 2 * BATCH_S
MAX_LEAD_US = 10_000.0  # the lead delay doubles after a late sample, up to this


class GraphSampler:
    """Graph samples queued in chunks: one device-side delay (the lead), then for each sample the
    start event, the replay and the end event, back to back, and one sync for the chunk. _collect's
    plan(n) sizes the next chunk to the samples its batch asks for, and no longer than CHUNK_S of
    samples (their length from the last chunk, or `sample_s` before the first): a chunk the rule's
    time cap will not read is not queued. With cold L2 (flush) a chunk is one sample, its flush
    before the lead: on the H200, decode samples right behind a flush read 2-10% longer than samples
    200 µs after it (lab/graph_chunks.py --l2 cold), so cold samples stay as they were measured
    before chunks.

    A sample is kept only if the device had not reached its start event when the host had queued its
    end event (start.query() is still False then): the events then bracket the replay's device time
    and none of the host's. A sample the host was late for is dropped and counted (`late`), and the
    lead doubles for the next chunk (up to MAX_LEAD_US): a host slower than the device's samples
    still gets the first samples of every chunk in. A chunk at that lead that keeps no sample raises
    GraphTimingError (the attempt is UNSUPPORTED): the host takes longer to queue one replay than any
    lead covers, so no sample is device time. Samples left when the caller stops are dropped; the
    chunk's sync has already run them."""

    def __init__(self, replay: Callable[[], Any], k: int, device: str, flush: Callable[[], None] | None = None,
                 most: int = MAX_CHUNK, sample_s: float | None = None):
        """most: the longest chunk (1: one sample a lead and a sync, how graph samples were taken
        before chunks, kept for comparisons); sample_s: the device seconds of one sample (a replay
        of k calls), if known before the first chunk."""
        self.replay, self.k, self.device, self.flush, self.most = replay, k, device, flush, most
        self.sample_s = sample_s
        self.lead, self.late, self.want = DELAY_US, 0, 1
        self.ready: collections.deque[float] = collections.deque()
        self.pairs: list = []

    def plan(self, n: int) -> None:
        self.want = max(1, n)
        self.ready.clear()  # a new batch starts from fresh samples

    def __call__(self) -> float:
        while not self.ready:
            n = 1 if self.flush else min(self.want, self.most)  # cold L2: one sample a chunk
            if self.sample_s:
                n = min(n, max(1, int(CHUNK_S / self.sample_s)))
            self._chunk(n)
        self.want = max(1, self.want - 1)
        return self.ready.popleft()

    def _chunk(self, n: int) -> None:
        import torch

        while len(self.pairs) < n:
            self.pairs.append((torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)))
        pairs, late = self.pairs[:n], []
        if self.flush:  # before the lead, as before chunks existed
            self.flush()
        device_delay(self.device, self.lead)
        for start, end in pairs:
            start.record()
            self.replay()
            end.record()
            late.append(start.query())
        pairs[-1][1].synchronize()
        kept = [start.elapsed_time(end) * 1e3 for (start, end), was_late in zip(pairs, late) if not was_late]
        if kept:
            self.sample_s = max(kept) / 1e6
        elif self.lead >= MAX_LEAD_US:
            raise GraphTimingError(f"graph samples cannot be timed as device time: the host took longer than "
                                   f"{MAX_LEAD_US / 1e3:.0f} ms to queue one replay of {self.k} call(s)")
        self.ready.extend(us / self.k for us in kept)
        if any(late):
            self.late += sum(late)
            self.lead = min(2 * self.lead, MAX_LEAD_US)


class GraphCaptureError(RuntimeError):
    pass


class GraphTimingError(GraphCaptureError):
    """The captured graph cannot be timed as device time (an UNSUPPORTED attempt, as a failed capture)."""


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
                out = step()
    except Exception as e:
        raise GraphCaptureError(f"graph capture failed: {type(e).__name__}: {str(e).splitlines()[0]}") from None
    graph.last_output = out  # the captured buffers a replay writes: what the post-timing check reads
    return graph


def event_overhead_us(device: str, n: int = 200, ahead: bool = False) -> float:
    """Median time between two back-to-back events: the floor under an eager sample; with
    ahead=True (a device_delay first), the floor under a graph sample."""
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
        if ahead:
            device_delay(device, 50.0)
        a.record()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) * 1e3)
    return statistics.median(out)


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
