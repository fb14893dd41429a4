"""The multi-device executor (runner/executors/multi.py) on fake CPU devices: sharding whole (repeat, workload)
groups, --replicate, one writer, interrupt and resume, core pinning, and run --dry-run's ETA.

In-process: each device's workers are simulated (a LocalExecutor whose attempts return at once).
Spawned (slow): two CPU worker sets through the CLI, with fakes that crash and hang."""
from __future__ import annotations

import json
import threading
import time
from collections import Counter

import pytest

from attnbench.backends.registry import load_plugin_file
from attnbench.measure.timing import TimingConfig
from attnbench.runner import planner
from attnbench.runner.conduct import Observer, RunRequest, conduct
from attnbench.runner.eta import DEFAULT_ATTEMPT_S, estimate, typical_sampled, typical_wall
from attnbench.runner.executors.base import Placement, Started
from attnbench.runner.executors.local import LocalConfig, LocalExecutor
from attnbench.runner.executors.devices import DeviceSpec, parse_devices
from attnbench.runner.executors.multi import MultiExecutor, core_sets, format_cores
from attnbench.backends.base import DeviceInfo
from attnbench.store.db import Store
from attnbench.workloads import Workload
from conftest import FAKES, TINY_GRID, rows_of

OK = {"status": "OK", "reason": None, "samples_us": [2.0, 1.0, 3.0], "calls_per_sample": 1, "timer": "host_clock",
      "converged": True, "warmup_calls": 2, "warmup_us": 1.0, "cold_start_us": 5.0, "max_abs_err": 0.0, "rmse": 0.0,
      "cosine": 1.0, "err_ratio": 1.0, "ref_err": 0.0, "check_detail": {}, "dispatch_status": "probed"}
W = [Workload(mode="prefill", batch=1, q_len=32 * (i + 1), kv_len=32 * (i + 1), q_heads=2, kv_heads=1, head_dim=16,
              head_dim_v=16, dtype="fp32") for i in range(4)]
CPU2 = [DeviceSpec("cpu:0", "cpu", 0), DeviceSpec("cpu:1", "cpu", 1)]


def backends(*names):
    by = {b.name: b for b in load_plugin_file(FAKES)}
    return [by[n] for n in names]


class SimulatedDevice(LocalExecutor):
    """A LocalExecutor whose workers are simulated: the repeat and workload bookkeeping is the real
    one; every attempt answers OK (CRASH for fake-crash) after a few milliseconds, on this thread."""

    def start(self, device, backends):
        prov = {"torch": "9.9", "device": {"type": "cpu", "name": "CPU fake", "total_memory": 1 << 40}}
        self.started = Started(prov, DeviceInfo.from_dict(prov["device"]), Placement("CPU fake"))
        self.ran, self.repeats_entered = [], []
        return self.started

    def _prestart(self, slots):
        self.repeats_entered.append(sorted(map(str, slots)))

    def _execute(self, a):
        time.sleep(0.005)
        self.ran.append((a.repeat, a.workload.key(), threading.current_thread().name))
        if a.backend.name == "fake-crash":
            return {"status": "CRASH", "reason": "worker killed by SIGABRT (exit -6)"}
        return dict(OK)


def multi(replicate=False, cores=True):
    ex = MultiExecutor(LocalConfig(), CPU2, replicate, make=SimulatedDevice)
    if cores:  # the test host may have a single core: give each fake device one of its own
        ex.cores = core_sets(2, [0, 1, 2, 3])
    return ex


def request(**kw) -> RunRequest:
    base = dict(device="cpu:0,cpu:1", workloads=W, backends=backends("fake-good", "fake-crash", "fake-mutates"),
                repeats=2, tag="t", grid="tiny", argv="attnbench run --devices cpu:0,cpu:1")
    return RunRequest(**{**base, **kw})


class StopAfter(Observer):
    """Ctrl-C after n rows (raised inside the sink, on the writing thread)."""

    def __init__(self, n):
        self.n, self.rows = n, 0

    def row(self, row):
        self.rows += 1
        if self.rows == self.n:
            raise KeyboardInterrupt


# ---- parsing, cores, keys, ETA ------------------------------------------------------------------

def test_parse_devices():
    none, two = (lambda: 0), (lambda: 2)
    assert parse_devices("cpu:0,cpu:1", none) == CPU2
    assert [d.torch_device for d in parse_devices("all", two)] == ["cuda:0", "cuda:1"]
    assert parse_devices("1", two) == [DeviceSpec("cuda:1", "cuda:1", 1)]
    assert parse_devices("cuda:0, 1", two)[1].label == "cuda:1"
    for bad, text in [("", "bad --devices"), ("0,,1", "bad --devices"), ("gpu:0", "bad device"),
                      ("cpu:x", "bad device"), ("cpu:0,0", "mixes"), ("1,cuda:1", "twice"),
                      ("2", "does not exist"), ("all", None)]:
        with pytest.raises(ValueError, match=text or "no CUDA device"):
            parse_devices(bad, two if bad != "all" else none)


def test_core_sets_are_disjoint_and_recorded_as_ranges():
    sets = core_sets(2, list(range(16)))
    assert sets == [list(range(8)), list(range(8, 16))]
    assert core_sets(3, [0, 1]) == [None] * 3  # fewer cores than devices: not pinned
    assert format_cores([0, 1, 2, 3, 8, 10, 11]) == "0-3,8,10-11" and format_cores(None) is None


def test_a_device_identity_changes_the_key_only_when_given():
    w, args = W[0], ("t", "NVIDIA H200", W[0], "sdpa-flash", 0, 0)
    base = planner.attempt_key(*args)
    assert planner.attempt_key(*args, device_id=None) == base  # stores from before keep their keys
    keyed = {planner.attempt_key(*args, device_id=u) for u in ("GPU-a", "GPU-b")}
    assert len(keyed | {base}) == 3
    plain = planner.plan([w], backends("fake-good"), DeviceInfo("cpu"), 1, "t", 0)
    mine = planner.plan([w], backends("fake-good"), DeviceInfo("cpu"), 1, "t", 0, device_id="GPU-a")
    assert plain[0].key == planner.attempt_key("t", "cpu", w, "fake-good", 0, 0)
    assert mine[0].key == planner.attempt_key("t", "cpu", w, "fake-good", 0, 0, device_id="GPU-a") != plain[0].key


def test_eta_uses_the_median_of_earlier_ok_rows_else_the_default():
    ex = multi()
    ex.start("", [])
    attempts = ex.plan(W[:1], backends("fake-good", "fake-crash", "fake-mutates"), 1, "t", 0)
    rows = [{"status": "OK", "backend": "fake-good", "mode": "prefill", "wall_s": s} for s in (1.0, 2.0, 9.0)]
    rows += [{"status": "CRASH", "backend": "fake-crash", "mode": "prefill", "wall_s": 100.0}]
    typical = typical_wall(rows)
    assert typical == {("fake-good", "prefill"): 2.0}
    est = estimate(attempts, typical, devices=2)  # fake-mutates' prefill is planned out: no time
    assert (est.from_store, est.by_default) == (1, 1) and est.seconds == pytest.approx((2.0 + DEFAULT_ATTEMPT_S) / 2)
    # --min-time 0.5: fake-good's rows sampled 0.1 s (median), so its attempt takes 0.4 s longer
    for r, n in zip(rows, (1, 2, 3)):
        r.update(samples_us=json.dumps([25_000.0] * n), calls_per_sample=2)  # 0.05, 0.1, 0.15 s
    est = estimate(attempts, typical, devices=2, min_time_s=0.5, sampled=typical_sampled(rows))
    assert est.seconds == pytest.approx((2.0 + 0.4 + DEFAULT_ATTEMPT_S) / 2)


def test_a_later_repeat_is_estimated_from_the_later_repeats_of_earlier_runs():
    ex = multi()
    ex.start("", [])
    attempts = ex.plan(W[:1], backends("fake-good", "fake-crash"), 3, "t", 0)  # repeats 0, 1, 2
    # fake-good's first repeats compiled from an empty cache (9 s); its later one from the run's (3 s)
    rows = [{"status": "OK", "backend": "fake-good", "mode": "prefill", "wall_s": 9.0, "repeat": 0}] * 3
    rows += [{"status": "OK", "backend": "fake-good", "mode": "prefill", "wall_s": 3.0, "repeat": 1},
             {"status": "OK", "backend": "fake-crash", "mode": "prefill", "wall_s": 5.0, "repeat": 0}]
    typical = typical_wall(rows)
    assert typical[("fake-good", "prefill")] == 9.0 and typical[("fake-good", "prefill", "later")] == 3.0
    est = estimate(attempts, typical)
    # fake-good: 9 s for repeat 0, 3 s for each later one; fake-crash has no later rows: 5 s each
    assert (est.from_store, est.by_default) == (6, 0) and est.seconds == pytest.approx(9 + 3 + 3 + 3 * 5.0)


def test_a_running_sweeps_eta_counts_what_is_left_at_this_runs_typical_walls():
    """Remaining: each attempt left at the median wall of this run's OK rows of its key, else the store's
    earlier rows, else (a later repeat) the first repeat's, else the default; over the devices."""
    from attnbench.runner.eta import Remaining

    ex = multi()
    ex.start("", [])
    attempts = [a for a in ex.plan(W[:2], backends("fake-good", "fake-crash"), 2, "t", 0) if not a.planned]
    good = [a for a in attempts if a.backend.name == "fake-good"]
    crash = [a for a in attempts if a.backend.name == "fake-crash"]
    assert len(good) == len(crash) == 4  # 2 workloads x 2 repeats
    mode = good[0].workload.mode
    r = Remaining(attempts, {("fake-good", mode): 4.0}, devices=2)
    # fake-good from the store (4 s a repeat-0 attempt, the same for its later ones); fake-crash unknown
    assert r.seconds() == pytest.approx((4 * 4.0 + 4 * DEFAULT_ATTEMPT_S) / 2)
    first = [a for a in good if a.repeat == 0]
    r.row({"attempt_key": first[0].key, "status": "OK", "wall_s": 1.0})  # this run's rows win
    assert r.seconds() == pytest.approx((3 * 1.0 + 4 * DEFAULT_ATTEMPT_S) / 2)
    later = [a for a in good if a.repeat == 1]
    r.row({"attempt_key": later[0].key, "status": "OK", "wall_s": 0.2})  # a later repeat: its own median
    assert r.seconds() == pytest.approx((1.0 + 0.2 + 4 * DEFAULT_ATTEMPT_S) / 2)
    r.row({"attempt_key": crash[0].key, "status": "CRASH", "wall_s": 100.0})  # done, but no typical wall
    r.row({"attempt_key": "not-in-the-plan", "status": "OK", "wall_s": 1e6})  # another run's row
    r.row({"attempt_key": first[0].key, "status": "OK", "wall_s": 1e6})  # a row twice counts once
    assert r.seconds() == pytest.approx((1.0 + 0.2 + 3 * DEFAULT_ATTEMPT_S) / 2)
    for a in attempts:
        r.row({"attempt_key": a.key, "status": "OK", "wall_s": 1.0})
    assert r.seconds() == 0.0


def test_the_eta_reads_as_seconds_minutes_or_hours():
    from attnbench.runner.eta import duration

    assert [duration(s) for s in (0.4, 42.0, 89.4, 90.0, 210.0, 5399.0, 5400.0, 7560.0)] == \
        ["0 s", "42 s", "89 s", "1.5 min", "3.5 min", "90.0 min", "1.5 h", "2.1 h"]


# ---- the executor, with simulated workers --------------------------------------------------------

def test_sharding_keeps_whole_groups_on_one_device_and_writes_every_attempt_once(tmp_path):
    store, ex = Store(tmp_path / "s.sqlite"), multi()
    report = conduct(ex, store, request())
    rows = rows_of(tmp_path / "s.sqlite")
    assert len(rows) == len(report.attempts) == 4 * 3 * 2 and len({r["attempt_key"] for r in rows}) == len(rows)
    assert dict(report.counts) == {"OK": 8, "CRASH": 8, "UNSUPPORTED": 8}  # a crash stops nothing
    ran = [r for r in rows if r["status"] != "UNSUPPORTED"]
    by_group = {}
    for r in ran:
        by_group.setdefault((r["repeat"], r["workload_key"]), set()).add((r["device_index"], r["host_cores"]))
    assert all(len(v) == 1 for v in by_group.values())  # a workload's backends share a device and its drift
    assert {r["device_index"] for r in ran} == {0, 1}  # both devices got work
    assert {(r["device_index"], r["host_cores"]) for r in ran} == {(0, "0-1"), (1, "2-3")}
    assert all(r["device_index"] is None for r in rows if r["status"] == "UNSUPPORTED")  # ran nowhere
    # sharded keys are the one-device keys: a sharded run resumes a single-device one and back
    assert {a.key for a in report.attempts} == {a.key for a in planner.plan(
        W, request().backends, DeviceInfo.from_dict(ex.started.provenance["device"]), 2, "t", 0)}
    # each device's repeats only move forward, and a repeat's worker set is started once per device
    for dev in ex.execs:
        reps = [r for r, _, _ in dev.ran]
        assert reps == sorted(reps) and len({t for _, _, t in dev.ran}) == 1
    prov = store.runs()[0]["provenance"]
    assert [d["label"] for d in prov["devices"]] == ["cpu:0", "cpu:1"] and prov["replicate"] is False
    store.close()


def test_replicate_runs_every_attempt_once_per_device(tmp_path):
    store, ex = Store(tmp_path / "s.sqlite"), multi(replicate=True)
    report = conduct(ex, store, request(repeats=1))
    rows = rows_of(tmp_path / "s.sqlite")
    assert len(rows) == len(report.attempts) == 2 * 4 * 3 and len({r["attempt_key"] for r in rows}) == len(rows)
    per = Counter((r["workload_key"], r["backend"], r["repeat"]) for r in rows)
    assert set(per.values()) == {2}
    for i in (0, 1):  # every device measured the whole grid, its planned-out rows included
        mine = [r for r in rows if r["device_index"] == i]
        assert len(mine) == 12 and {r["host_cores"] for r in mine} == {("0-1", "2-3")[i]}
    assert {len(dev.ran) for dev in ex.execs} == {8}
    store.close()


def test_sharding_refuses_devices_of_two_models():
    class Other(SimulatedDevice):
        def start(self, device, backends):
            st = super().start(device, backends)
            st.placement = Placement("CPU other")
            return st

    made = iter([SimulatedDevice, Other])
    ex = MultiExecutor(LocalConfig(), CPU2, make=lambda *a: next(made)(*a))
    with pytest.raises(RuntimeError, match="--replicate"):
        ex.start("", [])


@pytest.mark.parametrize("replicate", [False, True], ids=["shard", "replicate"])
def test_interrupt_then_resume_loses_and_duplicates_nothing(tmp_path, replicate):
    store = Store(tmp_path / "s.sqlite")
    with pytest.raises(KeyboardInterrupt):
        conduct(multi(replicate), store, request(), StopAfter(13))
    first = rows_of(tmp_path / "s.sqlite")
    assert len(first) == 13 and not store.con.execute("SELECT * FROM claims").fetchall()  # claims released
    report = conduct(multi(replicate), store, request())
    rows = rows_of(tmp_path / "s.sqlite")
    assert report.resumed == 13 and sum(report.counts.values()) == len(report.attempts) - 13
    assert sorted(r["attempt_key"] for r in rows) == sorted(a.key for a in report.attempts)
    store.close()


def test_the_sink_is_called_on_one_thread_only_and_told_where_each_attempt_runs(tmp_path):
    threads, where = set(), {}

    class Watch(Observer):
        def attempt(self, a, on=None):
            threads.add(threading.current_thread().name)
            where[a.key] = on

        def row(self, row):
            threads.add(threading.current_thread().name)
            if row["status"] != "UNSUPPORTED":  # planned rows never run anywhere
                assert where[row["attempt_key"]] == f"cpu:{row['device_index']}"

    store = Store(tmp_path / "s.sqlite")
    conduct(multi(), store, request(repeats=1), Watch())
    assert threads == {threading.current_thread().name}
    assert set(where.values()) == {"cpu:0", "cpu:1"}
    store.close()


# ---- the CLI ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv,text", [
    (["--devices", "cpu:0,0"], "mixes CPU and CUDA"),
    (["--devices", "cpu:0,cpu:0"], "twice"),
    (["--devices", "all"], "no CUDA device"),
    (["--replicate"], "--replicate needs --devices"),
    (["--devices", "cpu:0", "--device", "cpu"], "exclude each other"),
])
def test_bad_devices_exit_2_and_write_nothing(cli, tmp_path, monkeypatch, argv, text):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    res = cli("run", *argv, "--db", tmp_path / "s.sqlite")
    assert res.rc == 2 and text in res.err and len(res.err.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir())


# ---- spawned workers: two CPU worker sets -----------------------------------------------------------

def _cli_run(db, grid, *extra):
    from attnbench.cli.main import main

    return main(["run", "--config", str(grid), "--plugin", FAKES, "--max-time", "0.05", "--db", str(db),
                 "--devices", "cpu:0,cpu:1", *extra])


@pytest.mark.slow
def test_two_cpu_devices_shard_a_grid_with_a_crash_and_a_hang(tmp_path, cli):
    grid = tmp_path / "tiny.yaml"
    grid.write_text(TINY_GRID)
    db = tmp_path / "s.sqlite"
    assert _cli_run(db, grid, "--backends", "fake-good,fake-crash,fake-hang", "--timeout", "2", "--repeats", "1") == 0
    rows = rows_of(db)
    assert len(rows) == 2 * 3 and len({r["attempt_key"] for r in rows}) == 6
    assert Counter(r["status"] for r in rows) == {"OK": 2, "CRASH": 2, "TIMEOUT": 2}
    groups = {}
    for r in rows:
        groups.setdefault(r["workload_key"], set()).add(r["device_index"])
    assert all(len(v) == 1 for v in groups.values())
    cores = {r["device_index"]: r["host_cores"] for r in rows}
    if all(cores.values()):  # pinned (a host with at least two cores): disjoint sets
        sets = [set(c.replace("-", ",").split(",")) for c in cores.values()]
        assert len(sets) == 2 and not sets[0] & sets[1]
    # dry-run: the plan is stored already; the ETA of a new tag comes from these rows
    res = cli("run", "--config", grid, "--plugin", FAKES, "--db", db, "--devices", "cpu:0,cpu:1",
              "--backends", "fake-good,fake-crash", "--repeats", "1", "--tag", "other", "--dry-run")
    assert res.rc == 0 and "already stored: 0" in res.out and "2 attempts at the median wall_s" in res.out
    assert f"2 at {DEFAULT_ATTEMPT_S:g} s" in res.out and "cpu:1" in res.out
    assert len(rows_of(db)) == 6


@pytest.mark.slow
def test_two_cpu_devices_replicate(tmp_path):
    grid = tmp_path / "tiny.yaml"
    grid.write_text(TINY_GRID)
    db = tmp_path / "r.sqlite"
    assert _cli_run(db, grid, "--backends", "fake-good", "--repeats", "1", "--replicate") == 0
    rows = rows_of(db)
    assert len(rows) == 4 and len({r["attempt_key"] for r in rows}) == 4
    assert Counter(r["device_index"] for r in rows) == {0: 2, 1: 2} and {r["status"] for r in rows} == {"OK"}


@pytest.mark.slow
def test_an_interrupt_kills_a_busy_device_and_resume_completes_the_plan(tmp_path):
    """Ctrl-C while one device waits on a hung worker: the run ends at once (the worker is killed,
    not waited for); the next run measures exactly what is missing."""
    from attnbench.workloads.grids import load_yaml_grid

    grid = tmp_path / "tiny.yaml"
    grid.write_text(TINY_GRID)
    _, ws = load_yaml_grid(grid)
    bs = backends("fake-good", "fake-hang")

    def firsts(seed):  # the backend each workload's group starts with
        attempts = planner.plan(ws, bs, DeviceInfo("cpu"), 1, "t", seed)
        return {attempts[0].backend.name, attempts[2].backend.name}

    seed = next(s for s in range(100) if firsts(s) == {"fake-good", "fake-hang"})  # one device hangs at once
    req = request(workloads=ws, backends=bs, repeats=1, seed=seed)
    store = Store(tmp_path / "s.sqlite")
    # a short stopping rule: fake-good ends well inside the resumed run's timeout, which ends the hangs
    fast = dict(plugins=[FAKES], seed=seed, log_path=str(tmp_path / "log"), timing=TimingConfig.for_device("cpu", 0.05))
    t0 = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        conduct(MultiExecutor(LocalConfig(timeout_s=120, **fast), CPU2), store, req, StopAfter(1))
    assert time.perf_counter() - t0 < 60  # not the hang's 120 s
    assert len(rows_of(tmp_path / "s.sqlite")) == 1
    report = conduct(MultiExecutor(LocalConfig(timeout_s=4, **fast), CPU2), store, req)
    rows = rows_of(tmp_path / "s.sqlite")
    assert report.resumed == 1 and sorted(r["attempt_key"] for r in rows) == sorted(a.key for a in report.attempts)
    assert Counter(r["status"] for r in rows) == {"OK": 2, "TIMEOUT": 2}
    # each run's devices shared a cache of its own, removed at its end: nothing a later run can load
    assert [r["provenance"]["compile_cache"]["kept"] for r in store.runs()] == [False, False]
    store.close()


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(__import__("os"), "sched_getaffinity"), reason="no CPU affinity on this platform")
def test_a_worker_pins_itself_to_the_cores_it_is_given():
    import os

    from attnbench.runner.supervisor import Worker

    core = min(os.sched_getaffinity(0))
    w = Worker([], warm={"device": "cpu", "cores": [core]})
    try:
        assert os.sched_getaffinity(w.proc.pid) == {core}
    finally:
        w.close()
