"""Timing (measure/timing.py) on the host clock: stopping rule, block size, convergence. Each test < 5 s."""
from __future__ import annotations

import math
import statistics
import time

import pytest

from attnbench.measure import sampling, timing
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
    def step():  # a call of about 5 us whatever the machine's load: an empty call's cost swings 10x on a busy host
        end = time.perf_counter() + 5e-6
        while time.perf_counter() < end:
            pass

    cfg = TimingConfig(warmup_s=0.0, min_samples=10, max_samples=20, max_time_s=1.0, target_rel_err=0.0,
                       min_block_us=200.0)
    t = time_host(step, cfg)
    assert t.calls_per_sample > 1
    assert len(t.samples_us) == 20
    assert statistics.median(t.samples_us) < 50  # per call (~5 us), not per block (~200 us)
    # block size chosen so one sample lasts about min_block_us
    assert statistics.median(t.samples_us) * t.calls_per_sample > 20


def test_warmup_runs_rounds_of_at_least_three_calls_for_at_least_its_budget():
    step, calls = sleeper(0.0)
    w = timing.warmup(step, "cpu", 0.0, 1.0)
    assert len(w.rounds) >= 2 and all(c >= 3 for c, _ in w.rounds)
    assert len(calls) == sum(c for c, _ in w.rounds)
    step, calls = sleeper(0.005)
    w = timing.warmup(step, "cpu", 0.05, 1.0)
    assert sum(us for _, us in w.rounds) >= 50_000 and len(calls) == sum(c for c, _ in w.rounds)
    assert all(us >= 5000 * c for c, us in w.rounds)  # a round's µs cover its calls


def test_cold_call_returns_output_and_time():
    out, us = timing.one_call(lambda: (time.sleep(0.01), 42)[1], "cpu")
    assert out == 42 and us >= 10_000


def test_for_device_defaults():
    cpu, gpu = TimingConfig.for_device("cpu"), TimingConfig.for_device("cuda:0")
    assert cpu.max_time_s == 0.3 and 0 < gpu.max_time_s <= 2.0
    assert TimingConfig.for_device("cuda") == gpu
    assert 0 < cpu.warmup_s <= gpu.warmup_s
    assert cpu.warmup_max_s == 1.0 and gpu.warmup_max_s == 2.0
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
    assert set(d) == {"samples_us", "calls_per_sample", "timer", "warmup_calls", "warmup_us", "warmup_settled",
                      "converged", "rel_err", "trend", "stationary", "late_samples"}
    assert d["late_samples"] == 0 and d["trend"] == timing.trend(d["samples_us"])


def test_event_overhead_on_cpu_is_small_and_positive():
    assert 0 <= timing.event_overhead_us("cpu", n=50) < 1000


# --- warm-up until stationary, and the samples' trend (simulated host clock: exact and instant) ---

@pytest.fixture
def clock(monkeypatch):
    """A simulated host clock in seconds; steps advance it instead of sleeping."""
    now = [0.0]
    monkeypatch.setattr(timing.time, "perf_counter", lambda: now[0])
    monkeypatch.setattr(timing.time, "perf_counter_ns", lambda: int(now[0] * 1e9))
    return now


def costing(now, cost_s):
    """A step whose call costs cost_s(t) of simulated time, t being the time of the call."""
    def step():
        now[0] += cost_s(now[0])

    return step


def settling(floor_s, excess_s, tau_s):
    """A JIT or autotuner settling: floor + excess·exp(−t/τ)."""
    return lambda t: floor_s + excess_s * math.exp(-t / tau_s)


SIM = TimingConfig(warmup_s=0.02, warmup_max_s=2.0, min_samples=10, max_samples=200, max_time_s=0.3,
                   target_rel_err=0.0)


def test_warmup_waits_for_a_settling_kernel(clock):
    # 20 ms a call falling towards 0.5 ms over about a second: the old fixed warm-up (0.02 s, 2 calls)
    # ended at 14 ms a call, and its samples fell from 14 ms to 1.2 ms (trend -1.55)
    t = time_host(costing(clock, settling(0.5e-3, 19.5e-3, 0.1)), SIM)
    assert t.warmup_settled and t.warmup_us > 0.5e6  # far past the 0.02 s minimum
    assert statistics.median(t.samples_us) == pytest.approx(500, rel=0.01)
    assert abs(t.trend) < 0.01 and t.stationary


def test_warmup_rounds_agree_within_the_tolerance_when_settled(clock):
    w = timing.warmup(costing(clock, settling(0.5e-3, 19.5e-3, 0.1)), "cpu", 0.02, 2.0)
    assert w.settled and len(w.rounds) > 3
    assert abs(w.per_call_us() / w.per_call_us(-2) - 1) <= timing.WARMUP_TOLERANCE
    # every earlier round that met the minimum time disagreed with the one before it
    ends = [sum(us for _, us in w.rounds[:i + 1]) for i in range(len(w.rounds))]
    for i in range(1, len(w.rounds) - 1):
        if ends[i] >= 0.02e6:
            assert abs(w.per_call_us(i) / w.per_call_us(i - 1) - 1) > timing.WARMUP_TOLERANCE
    assert w.per_call_us() == pytest.approx(500, rel=0.02)


def test_a_kernel_drifting_until_the_cap_is_neither_settled_nor_stationary(clock):
    # cost falling as 1/t keeps halving each time the elapsed time doubles: no two rounds ever agree
    cfg = TimingConfig(**{**SIM.__dict__, "warmup_max_s": 1.0})
    t = time_host(costing(clock, lambda t: 2e-3 / (1 + t / 0.01)), cfg)
    assert not t.warmup_settled and not t.stationary
    assert 1.0e6 * 2 / 3 <= t.warmup_us <= 1.0e6  # stopped where its next round (half as long) no longer fit
    assert t.trend < 0  # still falling while sampled


NEVER = -1.0  # a target no rel_err meets: sampling runs to its time budget


def test_a_drift_too_slow_for_warmup_is_caught_by_the_trend(clock):
    # +200% a second: two warm-up rounds 10 ms apart differ by 2% and pass, the 0.3 s of samples do not
    cfg = TimingConfig(**{**SIM.__dict__, "target_rel_err": NEVER})
    t = time_host(costing(clock, lambda t: 1e-3 * (1 + 2 * t)), cfg)
    assert t.warmup_settled and t.trend > timing.TREND_LIMIT and not t.stationary


def test_a_drift_after_a_settled_warmup_shows_in_the_trend(clock):
    # stable through warm-up, then 50% slower (a clock drop) halfway through the samples
    cfg = TimingConfig(**{**SIM.__dict__, "target_rel_err": NEVER})
    t = time_host(costing(clock, lambda t: 1e-3 if t < 0.17 else 1.5e-3), cfg)
    third = len(t.samples_us) // 3
    assert statistics.median(t.samples_us[:third]) == pytest.approx(1000)
    assert statistics.median(t.samples_us[-third:]) == pytest.approx(1500)
    assert t.warmup_settled and t.trend == pytest.approx(500 / statistics.median(t.samples_us))
    assert t.trend > timing.TREND_LIMIT and not t.stationary


@pytest.mark.parametrize("cost_s", [10e-6, 0.5e-3, 0.1])
def test_a_stable_kernel_settles_within_three_rounds(clock, cost_s):
    w = timing.warmup(costing(clock, lambda t: cost_s), "cpu", 0.02, 2.0)
    spent_us = sum(us for _, us in w.rounds)
    assert w.settled and len(w.rounds) <= 3
    # about the minimum (the round sizes aim at it), or two rounds of 3 calls when calls are long
    assert spent_us <= max(0.02e6 * 1.1 + 3 * cost_s * 1e6, 6 * cost_s * 1e6 * 1.001)
    t = time_host(costing(clock, lambda t: cost_s), SIM)
    assert t.warmup_settled and t.stationary and t.trend in (0.0, None)  # None: 5 samples of a 0.1 s call


def test_a_call_too_long_for_two_rounds_under_the_cap_is_not_settled(clock):
    # 0.5 s a call, 2 s cap: round one (3 calls) takes 1.5 s and no second round fits to compare it with
    w = timing.warmup(costing(clock, lambda t: 0.5), "cpu", 0.02, 2.0)
    assert not w.settled and w.rounds == [(3, pytest.approx(1.5e6))]


def test_warmup_never_settles_before_its_minimum(clock):
    w = timing.warmup(costing(clock, lambda t: 1e-3), "cpu", 0.2, 2.0)
    assert w.settled and sum(us for _, us in w.rounds) >= 0.2e6


def test_trend_on_constructed_samples():
    assert timing.trend([]) is None and timing.trend([1.0] * 5) is None  # fewer than 6: two per third
    assert timing.trend([3.0] * 6) == 0.0
    assert timing.trend([1, 1, 1, 2, 2, 2]) == pytest.approx((2 - 1) / 1.5)
    assert timing.trend([2, 2, 2, 1, 1, 1]) == pytest.approx(-(2 - 1) / 1.5)  # sample order, not sorted
    # n = 7: thirds of 2; first [10, 12] -> 11, last [13, 14] -> 13.5, median 12; the middle is unused
    assert timing.trend([10, 12, 50, 11, 11, 13, 14]) == pytest.approx(2.5 / 12)
    assert timing.trend([0.0] * 9) is None  # zero median: undefined


def test_collect_keeps_every_sample_in_order_and_calls_on_batch_around_batches():
    values = iter(float(v) for v in range(100, 0, -1))  # strictly falling: nothing may reorder them
    log = []

    def sample():
        log.append("s")
        return next(values)

    cfg = TimingConfig(min_samples=10, max_samples=25, max_time_s=10.0, target_rel_err=0.0)
    t = sampling.collect(sample, cfg, Timing(warmup_settled=True), lambda: log.append("b"))
    assert t.samples_us == [float(v) for v in range(100, 75, -1)]
    assert "".join(log) == "b" + "s" * 10 + "b" + "s" * 10 + "b" + "s" * 5 + "b"
    assert t.trend == timing.trend(t.samples_us) < -timing.TREND_LIMIT and not t.stationary


def test_on_batch_runs_at_least_twice_on_a_five_sample_row(clock):
    log = []
    step = costing(clock, lambda t: 1e-3)
    cfg = TimingConfig(warmup_s=0.0, min_samples=20, max_samples=100, max_time_s=0.0, target_rel_err=0.0)
    t = timing.measure(lambda: (log.append("s"), step()), "cpu", cfg, "eager", "warm", on_batch=lambda: log.append("b"))
    assert len(t.samples_us) == timing.MIN_SAMPLES_AT_CAP and t.calls_per_sample == 1
    assert "".join(log).endswith("b" + "s" * 5 + "b")  # before the first sample and after the last
    assert log.count("b") == 2


def test_stationary_needs_a_settled_warmup_even_without_a_trend():
    few = dict(min_samples=3, max_samples=5, max_time_s=10.0, target_rel_err=0.0)
    for settled in (True, False):
        t = sampling.collect(lambda: 1.0, TimingConfig(**few), Timing(warmup_settled=settled))
        assert t.trend is None and t.stationary is settled  # 5 samples: the warm-up alone vouches


def test_a_floor_of_sampled_time_keeps_sampling_a_converged_median(monkeypatch):
    """--min-time: 2 ms samples (1 ms x 2 calls) converge at 10 (rel_err 0); a 0.1 s floor keeps
    going in batches of ~25 ms (13 samples) until the batch that passes 0.1 s: 10 + 4 x 13 = 62."""
    def run(**kw):
        cfg = TimingConfig(min_samples=10, max_samples=200, max_time_s=10.0, target_rel_err=0.01, **kw)
        return sampling.collect(lambda: 1000.0, cfg, Timing(calls_per_sample=2, warmup_settled=True))

    assert len(run().samples_us) == 10
    t = run(min_time_s=0.1)
    assert len(t.samples_us) == 62 and t.converged
    assert sum(t.samples_us) * 2 / 1e6 >= 0.1 > sum(t.samples_us[:49]) * 2 / 1e6
    monkeypatch.setattr(sampling, "MAX_SAMPLES_UNDER_FLOOR", 0)  # the sample cap wins: converged, floor not reached
    cfg = TimingConfig(min_samples=10, max_samples=30, max_time_s=10.0, target_rel_err=0.01, min_time_s=0.1)
    t = sampling.collect(lambda: 1000.0, cfg, Timing(calls_per_sample=2, warmup_settled=True))
    assert len(t.samples_us) == 30 and t.converged


def test_the_floor_widens_the_time_cap_and_is_none_by_default():
    assert TimingConfig.for_device("cuda").min_time_s == 0.0
    cfg = TimingConfig.for_device("cuda", min_time_s=0.4)
    assert cfg.min_time_s == 0.4 and cfg.max_time_s == 0.8
    cfg = TimingConfig.for_device("cpu", max_time_s=3.0, min_time_s=0.4)
    assert cfg.max_time_s == 3.0 and cfg.min_time_s == 0.4
