"""Timing (measure/timing.py) on the host clock: stopping rule, block size, convergence. Each test < 5 s."""
from __future__ import annotations

import math
import statistics
import time

import pytest

from attnbench.measure import timing
from attnbench.measure.timing import Timing, TimingConfig, rel_halfwidth, time_host


def test_rel_halfwidth_known_values():
    assert rel_halfwidth([]) == math.inf
    assert rel_halfwidth([5.0, 6.0]) == math.inf  # fewer than 3 samples: no estimate
    assert rel_halfwidth([3.0, 3.0, 3.0, 3.0]) == 0.0
    xs = [1.0, 2.0, 3.0]
    assert rel_halfwidth(xs) == pytest.approx(1.96 * 1.2533 * 1.0 / math.sqrt(3) / 2.0)
    ys = [10.0, 11.0, 9.0, 10.5, 9.5, 10.0]
    want = 1.96 * 1.2533 * statistics.stdev(ys) / math.sqrt(len(ys)) / statistics.median(ys)
    assert rel_halfwidth(ys) == pytest.approx(want)
    assert rel_halfwidth([0.0, 0.0, 0.0]) == math.inf  # zero median: undefined
    # more samples with the same spread: narrower
    assert rel_halfwidth(ys * 4) < rel_halfwidth(ys)
    # scale-free
    assert rel_halfwidth([x * 1000 for x in ys]) == pytest.approx(rel_halfwidth(ys))


def sleeper(seconds: float):
    calls = []

    def step():
        calls.append(1)
        time.sleep(seconds)

    return step, calls


def test_time_host_stops_at_max_samples_when_it_cannot_converge():
    step, calls = sleeper(0.001)
    cfg = TimingConfig(warmup_s=0.0, min_samples=5, max_samples=30, max_time_s=10.0, target_rel_err=0.0,
                       min_block_us=100.0)
    t0 = time.perf_counter()
    t = time_host(step, cfg)
    assert time.perf_counter() - t0 < 5
    assert len(t.samples_us) == 30
    assert not t.converged
    assert t.calls_per_sample == 1  # one call already lasts longer than a block
    assert t.timer == "host_clock"
    assert t.warmup_calls >= 2 and t.warmup_us > 0
    assert all(900 <= s <= 1_000_000 for s in t.samples_us), t.samples_us  # >= 1 ms each, in microseconds
    assert t.rel_err is not None and t.rel_err > 0
    # warm-up (>=2) + block-size estimate (3) + samples
    assert len(calls) == t.warmup_calls + 3 + 30


def test_time_host_converges_on_a_constant_time_step():
    step, _ = sleeper(0.001)
    cfg = TimingConfig(warmup_s=0.0, min_samples=10, max_samples=200, max_time_s=10.0, target_rel_err=0.5)
    t = time_host(step, cfg)
    assert t.converged
    assert 10 <= len(t.samples_us) < 200 and len(t.samples_us) % 10 == 0  # stopped early, at a check
    assert t.rel_err <= 0.5
    assert t.rel_err == pytest.approx(rel_halfwidth(t.samples_us))
    assert statistics.median(t.samples_us) == pytest.approx(1000, rel=0.8)


def test_time_host_stops_on_the_time_budget():
    step, _ = sleeper(0.002)
    cfg = TimingConfig(warmup_s=0.0, min_samples=10, max_samples=10_000, max_time_s=0.2, target_rel_err=0.0)
    t0 = time.perf_counter()
    t = time_host(step, cfg)
    elapsed = time.perf_counter() - t0
    assert not t.converged
    assert 10 <= len(t.samples_us) <= 0.2 / 0.002 + 1  # no sample is taken once the budget is spent
    assert elapsed < 2.0


def test_time_cap_wins_over_min_samples_but_keeps_a_floor():
    # slow calls: the cap stops sampling before min_samples, but never below MIN_SAMPLES_AT_CAP
    step, _ = sleeper(0.001)
    cfg = TimingConfig(warmup_s=0.0, min_samples=20, max_samples=100, max_time_s=0.0, target_rel_err=0.0)
    t = time_host(step, cfg)
    assert len(t.samples_us) == timing.MIN_SAMPLES_AT_CAP
    assert not t.converged and t.rel_err is not None


def test_converged_needs_min_samples():
    # constant-looking samples but a budget spent at once: not converged with fewer than min_samples
    step, _ = sleeper(0.001)
    cfg = TimingConfig(warmup_s=0.0, min_samples=50, max_samples=100, max_time_s=0.0, target_rel_err=10.0)
    t = time_host(step, cfg)
    assert len(t.samples_us) < 50 and not t.converged


def test_fast_steps_are_timed_in_blocks_and_reported_per_call():
    n = []

    def step():
        n.append(1)

    cfg = TimingConfig(warmup_s=0.0, min_samples=10, max_samples=20, max_time_s=1.0, target_rel_err=0.0,
                       min_block_us=200.0)
    t = time_host(step, cfg)
    assert t.calls_per_sample > 1
    assert len(t.samples_us) == 20
    assert all(s < 50 for s in t.samples_us)  # per call, not per block
    # block size chosen so one sample lasts about min_block_us
    assert statistics.median(t.samples_us) * t.calls_per_sample > 20


def test_warmup_runs_at_least_twice_and_for_its_budget():
    step, calls = sleeper(0.0)
    n, us = timing.warmup(step, "cpu", 0.0)
    assert n == 2 and len(calls) == 2
    step, calls = sleeper(0.005)
    n, us = timing.warmup(step, "cpu", 0.05)
    assert n >= 2 and us >= 50_000 and len(calls) == n


def test_cold_call_returns_output_and_time():
    out, us = timing.cold_call(lambda: (time.sleep(0.01), 42)[1], "cpu")
    assert out == 42 and us >= 10_000


def test_for_device_defaults():
    cpu, gpu = TimingConfig.for_device("cpu"), TimingConfig.for_device("cuda:0")
    assert cpu.max_time_s == 0.3 and 0 < gpu.max_time_s <= 2.0
    assert TimingConfig.for_device("cuda") == gpu
    assert 0 < cpu.warmup_s <= gpu.warmup_s
    assert gpu.eager_block_us >= 10 * gpu.min_block_us  # eager blocks amortise the first launch
    over = TimingConfig.for_device("cpu", 0.05)
    assert over.max_time_s == 0.05 and over == TimingConfig(**{**cpu.__dict__, "max_time_s": 0.05})
    assert TimingConfig.for_device("cuda", 3.0).max_time_s == 3.0


def test_measure_on_cpu_uses_the_host_clock():
    step, _ = sleeper(0.0005)
    cfg = TimingConfig(warmup_s=0.0, min_samples=10, max_samples=10, max_time_s=1.0)
    t = timing.measure(step, "cpu", cfg, "eager", "warm")
    assert isinstance(t, Timing) and t.timer == "host_clock" and len(t.samples_us) == 10
    d = t.to_dict()
    assert set(d) == {"samples_us", "calls_per_sample", "timer", "warmup_calls", "warmup_us", "converged", "rel_err"}


def test_event_overhead_on_cpu_is_small_and_positive():
    assert 0 <= timing.event_overhead_us("cpu", n=50) < 1000
