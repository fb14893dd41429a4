"""The executor seam (runner/executors/base.py) and the run conductor (runner/conduct.py), with a fake
executor that runs nothing: what any executor (local workers, every GPU of a host, Ray) gets and
must give back."""
from __future__ import annotations

import pytest

from attnbench.backends.base import DeviceInfo
from attnbench.backends.registry import load_plugin_file
from attnbench.runner.conduct import Observer, RunRequest, conduct, pending, plan_only
from attnbench.runner.executors.base import Executor, Outcome, Placement, Started
from attnbench.store.db import Store
from attnbench.workloads import Workload
from conftest import FAKES, rows_of

W = [Workload(mode="prefill", batch=1, q_len=32, kv_len=32, q_heads=2, kv_heads=1, head_dim=16, head_dim_v=16,
              dtype="fp32"),
     Workload(mode="decode", batch=1, q_len=1, kv_len=64, q_heads=2, kv_heads=1, head_dim=16, head_dim_v=16,
              dtype="fp32")]
PROV = {"torch": "9.9", "git_sha": "a" * 40, "device": {"type": "cpu", "name": "CPU fake", "total_memory": 1 << 40}}
OK = {"status": "OK", "reason": None, "samples_us": [2.0, 1.0, 3.0], "calls_per_sample": 1, "timer": "host_clock",
      "converged": True, "warmup_calls": 2, "warmup_us": 1.0, "cold_start_us": 5.0, "max_abs_err": 0.0, "rmse": 0.0,
      "cosine": 1.0, "err_ratio": 1.0, "ref_err": 0.0, "check_detail": {}, "dispatch_status": "probed"}


class FakeExecutor(Executor):
    """Answers every attempt from a script; records what it was given."""

    def __init__(self, answer=lambda a: dict(OK), fail_after: int | None = None):
        super().__init__(overhead_s={"worker_start": 1.5})
        self.answer, self.fail_after = answer, fail_after
        self.received, self.closed, self.started_with = [], 0, None

    def start(self, device, backends):
        self.started_with = (device, [b.name for b in backends])
        self.started = Started(PROV, DeviceInfo.from_dict(PROV["device"]), Placement("CPU fake", None, "uuid-0"))
        return self.started

    def run(self, attempts, sink, claim=lambda a: True):
        for a in attempts:
            if not claim(a):
                continue
            if self.fail_after is not None and len(self.received) == self.fail_after:
                raise KeyboardInterrupt
            self.received.append(a)
            sink(Outcome(a, self.answer(a), 0.25, self.started.placement))

    def close(self):
        self.closed += 1


def backends(*names):
    by = {b.name: b for b in load_plugin_file(FAKES)}
    return [by[n] for n in names]


def request(**kw) -> RunRequest:
    base = dict(device="cpu", workloads=W, backends=backends("fake-good", "fake-mutates"), repeats=2, tag="t",
                grid="tiny", argv="attnbench run")
    return RunRequest(**{**base, **kw})


class Recorder(Observer):
    def __init__(self):
        self.events = []

    def starting(self, device):
        self.events.append(("starting", device))

    def begin(self, total, resumed, retried):
        self.events.append(("begin", total, resumed, retried))

    def attempt(self, a, where=None):
        self.events.append(("attempt", a.key))
        assert where is None  # one device: nothing to tell apart

    def row(self, row):
        self.events.append(("row", row["backend"], row["status"]))

    def forecast(self, remaining):
        self.remaining = remaining
        self.events.append(("forecast", sum(remaining.left.values())))


def test_one_row_per_attempt_and_planned_rows_never_reach_the_executor(tmp_path):
    store = Store(tmp_path / "s.sqlite")
    ex, obs = FakeExecutor(), Recorder()
    report = conduct(ex, store, request(), obs)
    # fake-mutates offers decode only: its prefill attempts are UNSUPPORTED without running
    assert len(report.attempts) == 8 and dict(report.counts) == {"OK": 6, "UNSUPPORTED": 2}
    assert all(not a.planned for a in ex.received) and len(ex.received) == 6
    rows = rows_of(tmp_path / "s.sqlite")
    assert sorted(r["attempt_key"] for r in rows) == sorted(a.key for a in report.attempts)
    ok = [r for r in rows if r["status"] == "OK"]
    assert all(r["device_uuid"] == "uuid-0" and r["device_name"] == "CPU fake" and r["wall_s"] == 0.25 for r in ok)
    assert all(r["torch_version"] == "9.9" and r["attnbench_sha"] == "a" * 40 and r["median_us"] == 2.0 for r in ok)
    assert ex.started_with == ("cpu", ["fake-good", "fake-mutates"]) and ex.closed == 1
    assert obs.events[0] == ("starting", "cpu") and obs.events[1] == ("begin", 8, 0, 0)
    assert obs.events[2] == ("forecast", 6)  # the ETA counts the attempts to run, not the planned-out ones
    # the two planned rows, then each run attempt announced as it starts, before its row
    assert [e[0] for e in obs.events[3:]] == ["row"] * 2 + ["attempt", "row"] * 6
    assert obs.remaining.seconds() == 0.0 and sum(obs.remaining.left.values()) == 0  # fed by every row
    (run,) = store.runs()
    assert run["finished_at"] and run["provenance"]["sweep_overhead_s"]["worker_start"] == 1.5
    assert "store" in run["provenance"]["sweep_overhead_s"] and run["device_name"] == "CPU fake"
    store.close()


def test_resume_is_a_filter_on_the_plan(tmp_path):
    store = Store(tmp_path / "s.sqlite")
    ex = FakeExecutor(fail_after=3)
    with pytest.raises(KeyboardInterrupt):
        conduct(ex, store, request())
    assert ex.closed == 1  # closed on the way out
    (cut,) = store.runs()  # not finished, but its start-up is on record for the sweep's wall
    assert cut["finished_at"] is None and cut["provenance"]["startup_s"] >= 0
    first = {r["attempt_key"] for r in rows_of(tmp_path / "s.sqlite")}
    assert len(first) == 2 + 3  # the planned rows, then three runs
    ex2, obs = FakeExecutor(), Recorder()
    report = conduct(ex2, store, request(), obs)
    assert report.resumed == 5 and obs.events[1] == ("begin", 8, 5, 0)
    # three left, each at the median wall of the interrupted run's OK rows (0.25 s)
    assert obs.events[2] == ("forecast", 3) and obs.remaining.earlier
    assert [e[0] for e in obs.events[3:]] == ["attempt", "row"] * 3
    assert {a.key for a in ex2.received}.isdisjoint(first) and len(ex2.received) == 3
    assert len(rows_of(tmp_path / "s.sqlite")) == 8
    assert pending(report.attempts, first | {a.key for a in ex2.received}) == []
    store.close()


def test_retry_failed_runs_failed_rows_again(tmp_path):
    store = Store(tmp_path / "s.sqlite")
    crash = {"status": "CRASH", "reason": "worker killed by SIGSEGV"}
    conduct(FakeExecutor(answer=lambda a: dict(crash) if a.repeat == 1 else dict(OK)), store, request())
    assert sum(r["status"] == "CRASH" for r in rows_of(tmp_path / "s.sqlite")) == 3
    ex, obs = FakeExecutor(), Recorder()
    report = conduct(ex, store, request(retry_failed=True), obs)
    assert report.retried == 3 and len(ex.received) == 3 and all(a.repeat == 1 for a in ex.received)
    assert obs.events[1] == ("begin", 8, 5, 3)
    assert {r["status"] for r in rows_of(tmp_path / "s.sqlite")} == {"OK", "UNSUPPORTED"}
    store.close()


def test_an_executor_reporting_an_undeclared_value_stops_the_run_loudly(tmp_path):
    from attnbench.record import RecordError

    store = Store(tmp_path / "s.sqlite")
    ex = FakeExecutor(answer=lambda a: {**OK, "new_measurement": 1.0})
    with pytest.raises(RecordError, match="new_measurement"):
        conduct(ex, store, request())
    assert ex.closed == 1
    assert all(r["status"] == "UNSUPPORTED" for r in rows_of(tmp_path / "s.sqlite"))  # only planned rows
    store.close()


def test_plan_only_writes_nothing(tmp_path):
    ex = FakeExecutor()
    attempts = plan_only(ex, request())
    assert len(attempts) == 8 and ex.received == [] and ex.started_with == ("cpu", [])
    assert not list(tmp_path.iterdir())


def test_the_planner_sees_the_started_device():
    ex = FakeExecutor()
    with pytest.raises(RuntimeError, match="before start"):
        ex.plan(W, backends("fake-good"), 1, "t", 0)
    ex.start("cpu", [])
    big = Workload(mode="prefill", batch=64, q_len=65536, kv_len=65536, q_heads=64, kv_heads=64, head_dim=128,
                   head_dim_v=128, dtype="fp32")
    (a,) = ex.plan([big], backends("fake-good"), 1, "t", 0)
    assert a.planned is None  # 1 TiB of fake device memory fits it
