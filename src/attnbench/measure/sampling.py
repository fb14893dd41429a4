"""The stopping rule of timing: samples in batches until the median is tight (or a cap), and what it records."""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

import numpy as np

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


def collect(sample: Callable[[], float], cfg: TimingConfig, t: Timing,
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
