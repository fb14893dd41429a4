"""The CUDA timing logic (measure/timing.py: time_cuda, prefill, capture_graph) against a simulated
device: a host clock and a device queue. Each host call costs host time; a kernel starts when the
device is free and the host has launched it; an event is reached when the device has done what
was queued before it and the host has recorded it. What the real H200 showed (tests/test_gpu.py)
is checked here on CPU: graph samples are device time, eager samples carry the host's cost."""
from __future__ import annotations

import contextlib
import statistics

import pytest
import torch

from attnbench.measure import graph, timing
from attnbench.measure.timing import TimingConfig

CYCLES_PER_US = 1980.0  # the simulated spin kernel's clock


class Device:
    def __init__(self, record_us=2.0, replay_us=40.0):
        self.host = self.dev = 0.0  # µs
        self.record_us, self.replay_us = record_us, replay_us
        self.capture: list[float] | None = None
        self.sleeps: list[float] = []

    def kernel(self, us: float) -> None:
        if self.capture is not None:
            self.capture.append(us)
            return
        self.dev = max(self.dev, self.host) + us

    def mark(self) -> float:
        self.host += self.record_us
        self.dev = max(self.dev, self.host)
        return self.dev

    def sync(self) -> None:
        self.host = max(self.host, self.dev)


@pytest.fixture
def sim(monkeypatch):
    d = Device()

    class Event:
        def __init__(self, enable_timing=True):
            self.t = None

        def record(self, stream=None):
            self.t = d.mark()

        def synchronize(self):
            d.host = max(d.host, self.t)

        def query(self):  # reached by now, as the host sees it
            return self.t <= d.host

        def elapsed_time(self, end):
            return (end.t - self.t) / 1e3  # ms, like CUDA

    class Graph:
        def __init__(self):
            self.ops: list[float] = []

        def replay(self):
            d.host += d.replay_us
            d.dev = max(d.dev, d.host) + sum(self.ops)

    @contextlib.contextmanager
    def capture(g):
        d.capture = g.ops
        try:
            yield
        finally:
            d.capture = None

    def sleep(cycles):
        d.host += 1.0
        d.sleeps.append(cycles / CYCLES_PER_US)
        d.kernel(cycles / CYCLES_PER_US)

    class Stream:
        def __init__(self, device=None):
            pass

        def wait_stream(self, other):
            pass

    for name, value in {"Event": Event, "CUDAGraph": Graph, "graph": capture, "_sleep": sleep, "Stream": Stream,
                        "synchronize": lambda device=None: d.sync(), "stream": lambda s: contextlib.nullcontext(),
                        "current_stream": lambda device=None: Stream()}.items():
        monkeypatch.setattr(torch.cuda, name, value, raising=False)
    monkeypatch.setattr(graph, "_cycles_per_us", {})
    monkeypatch.setattr(timing.time, "perf_counter", lambda: d.host / 1e6)  # warm-up budgets in simulated time
    return d


def leads(d: Device) -> list[float]:
    """The delays queued after the calibration (its 1000 cycles, then three of 1e6)."""
    assert d.sleeps[1:4] == [pytest.approx(1e6 / CYCLES_PER_US)] * 3
    return d.sleeps[4:]


def step_of(d: Device, host_us: float, device_us: float):
    def step():
        d.host += host_us
        d.kernel(device_us)

    return step


CFG = TimingConfig(warmup_s=0.001, min_samples=10, max_samples=50, max_time_s=0.05, target_rel_err=0.0)


def test_prefill_calibrates_the_spin_and_queues_the_asked_delay(sim):
    timing.device_delay("cuda", 200.0)
    assert graph._cycles_per_us["cuda"] == pytest.approx(CYCLES_PER_US, rel=0.01)
    assert sim.sleeps[-1] == pytest.approx(200.0, rel=0.01)


def test_graph_samples_are_device_time_although_the_replay_launch_is_slow(sim):
    # a 5 µs kernel whose replay costs the host 40 µs: without the prefill a 20-call block would read
    # (40 + 100) / 20 = 7 µs a call
    t = timing.time_cuda(step_of(sim, host_us=300.0, device_us=5.0), "cuda", CFG, launch="graph")
    assert t.timer == "cuda_graph" and t.calls_per_sample == 20  # blocks of >= 100 µs of device time
    assert statistics.median(t.samples_us) == pytest.approx(5.0, abs=0.01)
    assert max(t.samples_us) == pytest.approx(5.0, abs=0.01) and t.late_samples == 0
    # three estimates behind one lead delay, then one per batch of 10 queued samples
    assert len(leads(sim)) == 1 + -(-len(t.samples_us) // 10)


def test_a_host_slower_than_its_graph_samples_gets_them_dropped_not_timed(sim):
    # 100 µs blocks whose replay costs the host 300 µs: the 200 µs lead covers the first sample of a
    # chunk only; the device reaches the later ones' start before their replay is queued (each would
    # read the host's 300 + 4 µs). They are dropped and counted, and the lead doubles.
    sim.replay_us = 300.0
    t = timing.time_cuda(step_of(sim, host_us=10.0, device_us=5.0), "cuda", CFG, launch="graph")
    assert t.calls_per_sample == 20 and t.late_samples > 0  # the estimate too was of device time only
    assert max(t.samples_us) == pytest.approx(5.0, abs=0.01) and len(t.samples_us) >= CFG.min_samples
    assert leads(sim)[0] == pytest.approx(timing.DELAY_US, rel=0.01) and max(leads(sim)) >= 4 * timing.DELAY_US


def test_the_graph_chunk_is_the_batch_the_stopping_rule_asks_for(sim):
    # under a floor the batches are about 25 ms of samples: 250 of 100 µs, queued behind one lead each
    cfg = TimingConfig(warmup_s=0.001, min_samples=10, max_samples=200, max_time_s=1.0, target_rel_err=0.0,
                       min_time_s=0.05)
    t = timing.time_cuda(step_of(sim, host_us=10.0, device_us=100.0), "cuda", cfg, launch="graph")
    assert t.calls_per_sample == 1 and t.late_samples == 0
    assert statistics.median(t.samples_us) == pytest.approx(100.0, abs=0.01)
    # one lead for the estimates, one for the first 10, then about 250 samples a lead
    assert sum(t.samples_us) / 1e6 >= 0.05 and len(leads(sim)) == 2 + round((len(t.samples_us) - 10) / 250)


def test_graph_block_for_a_long_kernel_is_one_call(sim):
    t = timing.time_cuda(step_of(sim, host_us=10.0, device_us=250.0), "cuda", CFG, launch="graph")
    assert t.calls_per_sample == 1 and statistics.median(t.samples_us) == pytest.approx(250.0, abs=0.01)


def test_eager_host_bound_samples_are_the_hosts_rate(sim):
    t = timing.time_cuda(step_of(sim, host_us=50.0, device_us=5.0), "cuda", CFG, launch="eager")
    assert t.timer == "cuda_event" and t.calls_per_sample * 50 >= 900  # a block of about 1 ms
    assert statistics.median(t.samples_us) == pytest.approx(50.0, rel=0.02)
    assert sim.sleeps == []  # eager samples are never prefilled


def test_eager_device_bound_samples_amortise_the_first_launch(sim):
    # one call: 5 µs of launch + 50 µs of kernel = 55 µs; a 1 ms block brings that within 1%
    t = timing.time_cuda(step_of(sim, host_us=5.0, device_us=50.0), "cuda", CFG, launch="eager")
    assert t.calls_per_sample == 19
    assert statistics.median(t.samples_us) == pytest.approx(50.0, rel=0.01)


def test_event_overhead_plain_and_prefilled(sim):
    plain = timing.event_overhead_us("cuda", n=10)
    ahead = timing.event_overhead_us("cuda", n=10, ahead=True)
    assert plain == pytest.approx(sim.record_us) and ahead == pytest.approx(0.0)


def test_warmup_rounds_time_back_to_back_calls_as_eager_samples_do(sim):
    # 5 µs of launch + 50 µs of kernel: back-to-back the device sets the pace (50 µs a call); a sync
    # after every call would add the launch to each (55 µs)
    w = timing.warmup(step_of(sim, host_us=5.0, device_us=50.0), "cuda", 0.02, 2.0)
    assert w.settled and len(w.rounds) <= 3
    assert w.per_call_us() == pytest.approx(50.0, rel=0.001)
    assert sum(us for _, us in w.rounds) >= 0.02e6


def test_a_settling_device_kernel_is_timed_once_settled(sim):
    # device time 20 ms falling towards 500 µs over about a second (e.g. clocks or an autotuner settling)
    import math

    def step():
        sim.host += 5.0
        sim.kernel(500.0 + 19_500.0 * math.exp(-sim.host / 100_000.0))

    cfg = TimingConfig(warmup_s=0.02, warmup_max_s=2.0, min_samples=10, max_samples=50, max_time_s=0.05,
                       target_rel_err=0.0)
    calls = []
    t = timing.time_cuda(step, "cuda", cfg, launch="eager", on_batch=lambda: calls.append(sim.host))
    assert t.warmup_settled and t.warmup_us > 0.5e6
    assert statistics.median(t.samples_us) == pytest.approx(500.0, rel=0.01)
    assert abs(t.trend) < 0.01 and t.stationary
    assert len(calls) == -(-len(t.samples_us) // 10) + 1  # before, between and after the batches


def test_cold_graph_samples_stay_one_a_lead_with_the_flush_before_it(sim):
    log = []  # (what, delays queued so far)
    replay = lambda: (log.append(("replay", len(sim.sleeps))), sim.kernel(30.0))
    flush = lambda: (log.append(("flush", len(sim.sleeps))), sim.kernel(40.0))
    sampler = timing.GraphSampler(replay, 1, "cuda", flush=flush)
    sampler.plan(5)
    got = [sampler() for _ in range(5)]
    assert got == [pytest.approx(30.0)] * 5 and sampler.late == 0
    # each sample: its flush, then a lead of its own (the first after the 4 calibration delays), then the replay
    assert log == [x for i in range(5) for x in (("flush", i + (4 if i else 0)), ("replay", i + 5))]


def test_a_graph_sample_longer_than_a_chunk_is_queued_alone_and_the_time_cap_wastes_none(sim):
    # 30 ms blocks: the first batch asks for 10, but a chunk holds at most CHUNK_S of samples, so each
    # is queued behind a lead of its own; the cap (0.05 s) stops at 5 samples, none queued unread
    def step():
        sim.host += 10.0
        sim.kernel(30_000.0)

    t = timing.time_cuda(step, "cuda", CFG, launch="graph")
    assert t.calls_per_sample == 1 and len(t.samples_us) == timing.MIN_SAMPLES_AT_CAP
    assert statistics.median(t.samples_us) == pytest.approx(30_000.0)
    assert len(leads(sim)) == 1 + len(t.samples_us)  # the estimates' chunk, then one a sample


def test_a_replay_the_host_cannot_queue_within_the_longest_lead_is_not_timed(sim):
    # 20 ms of host time per replay: every lead up to MAX_LEAD_US (10 ms) runs out before the end event
    # is queued, so no sample is device time; the attempt is refused instead of sampling forever
    sim.replay_us = 20_000.0
    with pytest.raises(timing.GraphTimingError, match="longer than 10 ms to queue one replay"):
        timing.time_cuda(step_of(sim, host_us=10.0, device_us=50.0), "cuda", CFG, launch="graph")
    assert max(leads(sim)) == pytest.approx(timing.MAX_LEAD_US, rel=0.01) and isinstance(timing.GraphTimingError("x"), timing.GraphCaptureError)
