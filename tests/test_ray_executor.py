"""The Ray executor (runner/executors/ray.py) on CPU: a local Ray instance with fake CPU devices (the
custom resource attnbench_cpu_device), real attempts through actors that own warm workers.

(a) a small grid over two actors: one row per attempt, the local executor's statuses;
(b) an actor killed mid-attempt: its attempts run again, none lost or written twice;
(c) the driver killed mid-run (the CLI in a subprocess): the same command resumes to one row per attempt;
(d) --executor ray without Ray importable: one line, exit 2, nothing written."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from attnbench.backends.registry import load_plugin_file
from attnbench.measure.timing import TimingConfig
from attnbench.runner.conduct import RunRequest, conduct
from attnbench.runner.executors.local import LocalConfig, LocalExecutor
from attnbench.runner.executors.devices import DeviceSpec
from attnbench.store.db import Store
from attnbench.workloads.grids import load_yaml_grid
from conftest import FAKES, HERE, TINY_GRID, rows_of

SRC = str(Path(__file__).resolve().parents[1] / "src")
RAY_FAKES = str(HERE / "plugins" / "ray_fakes.py")
CPU2 = [DeviceSpec("cpu:0", "cpu", 0), DeviceSpec("cpu:1", "cpu", 1)]


def _env_with_src() -> dict:
    """Actors and their workers import attnbench and the test plugins from this checkout."""
    path = os.pathsep.join([SRC, str(HERE)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    return {**os.environ, "PYTHONPATH": path}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A local Ray instance for this module (two fake CPU devices); the path of the flag file that
    makes fake-kills-host kill its actor. Shut down after the module: nothing outlives the tests."""
    ray = pytest.importorskip("ray")
    from attnbench.runner.executors.ray import CPU_RESOURCE

    flag = tmp_path_factory.mktemp("ray") / "kill-host"
    saved = dict(os.environ)
    os.environ.update({**_env_with_src(), "ATTNBENCH_FAKE_KILL_HOST": str(flag)})
    ray.init(address="local", num_cpus=2, resources={CPU_RESOURCE: 2}, include_dashboard=False,
             log_to_driver=False)
    try:
        yield flag
    finally:
        ray.shutdown()
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture
def tiny(tmp_path):
    grid = tmp_path / "tiny.yaml"
    grid.write_text(TINY_GRID)
    return grid


def backends(*names):
    by = {b.name: b for b in load_plugin_file(FAKES) + load_plugin_file(RAY_FAKES)}
    return [by[n] for n in names]


def config(tmp_path, **kw) -> LocalConfig:
    return LocalConfig(plugins=[FAKES, RAY_FAKES], timeout_s=30, timing=TimingConfig.for_device("cpu", 0.05),
                       log_path=str(tmp_path / "workers.log"), **kw)


def request(grid, names, repeats=1, device="cpu:0,cpu:1") -> RunRequest:
    _, ws = load_yaml_grid(grid)
    return RunRequest(device, ws, backends(*names), repeats, "t", grid="tiny")


@pytest.mark.slow
def test_two_actors_run_a_grid_with_the_local_executors_statuses(cluster, tmp_path, tiny):
    from attnbench.runner.executors.ray import RayExecutor

    names = ("fake-good", "fake-crash", "fake-wrong", "fake-refuses", "fake-mutates")
    local_db, ray_db = tmp_path / "local.sqlite", tmp_path / "ray.sqlite"
    store = Store(local_db)
    conduct(LocalExecutor(config(tmp_path)), store, request(tiny, names, device="cpu"))
    store.close()
    store = Store(ray_db)
    report = conduct(RayExecutor(config(tmp_path), CPU2), store, request(tiny, names))
    prov = store.runs()[0]["provenance"]
    store.close()
    rows = rows_of(ray_db)
    assert len(rows) == len(report.attempts) == 2 * 5 and len({r["attempt_key"] for r in rows}) == len(rows)
    # sharded keys are the one-device keys, and every attempt ends as it does on the local executor
    assert {(r["attempt_key"], r["status"]) for r in rows} == {(r["attempt_key"], r["status"])
                                                               for r in rows_of(local_db)}
    assert Counter(r["status"] for r in rows) == {"OK": 2, "CRASH": 2, "INCORRECT": 3, "UNSUPPORTED": 3}
    ran = [r for r in rows if r["device_index"] is not None]
    by_workload = {}
    for r in ran:
        by_workload.setdefault(r["workload_key"], set()).add(r["device_index"])
    assert all(len(v) == 1 for v in by_workload.values())  # a workload's backends share one actor
    assert {r["device_index"] for r in ran} == {0, 1}  # both actors got a group
    assert prov["executor"] == "ray" and [d["label"] for d in prov["devices"]] == ["cpu:0", "cpu:1"]
    assert all(d["host_cpu"] for d in prov["devices"])  # each node's CPU, beside its ceilings
    assert set(prov["models"]) == {rows[0]["device_name"]}
    assert report.overhead_s["worker_start"] > 0  # the actors' ledgers reach the run's record


@pytest.mark.slow
@pytest.mark.parametrize("restarts", [0, 1], ids=["other-actor", "replacement"])
def test_an_actor_killed_mid_attempt_has_its_attempts_run_again(cluster, tmp_path, tiny, restarts):
    """fake-kills-host SIGKILLs its actor on its first call: that attempt (and the rest of its group)
    has no row yet; it runs again on the other actor (no restarts left) or on a replacement."""
    from attnbench.runner.executors.ray import RayExecutor

    cluster.write_text("")
    ex = RayExecutor(config(tmp_path), CPU2, max_restarts=restarts)
    store = Store(tmp_path / "s.sqlite")
    report = conduct(ex, store, request(tiny, ("fake-good", "fake-kills-host"), repeats=2))
    store.close()
    rows = rows_of(tmp_path / "s.sqlite")
    assert not cluster.exists()  # an actor was killed
    assert len(ex.replaced) == restarts
    assert len(rows) == len(report.attempts) == 2 * 2 * 2
    assert sorted(r["attempt_key"] for r in rows) == sorted(a.key for a in report.attempts)  # none lost, none twice
    assert {r["status"] for r in rows} == {"OK"}  # the killed attempt's rerun measured it
    if restarts == 0:  # every group holds fake-kills-host, so the actor killed in its first group wrote at
        # most the one row before it, and the other actor ran everything else, the put-back group included
        per_device = Counter(r["device_index"] for r in rows)
        assert min(per_device.get(0, 0), per_device.get(1, 0)) <= 1


@pytest.mark.slow
def test_a_killed_driver_resumes_to_one_row_per_attempt(cluster, tmp_path, tiny):
    """The CLI (its own local Ray instance) is SIGKILLed once rows are written; the same command
    run again writes exactly the missing rows."""
    db = tmp_path / "s.sqlite"
    argv = [sys.executable, "-m", "attnbench", "run", "--executor", "ray", "--devices", "cpu:0,cpu:1",
            "--config", str(tiny), "--plugin", FAKES, "--backends", "fake-good,fake-raises", "--repeats", "4",
            "--max-time", "0.05", "--db", str(db)]
    env = {k: v for k, v in _env_with_src().items() if k not in ("RAY_ADDRESS", "ATTNBENCH_FAKE_KILL_HOST")}
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if db.exists() and len(rows_of(db)) >= 3:
                break
            time.sleep(0.2)
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        proc.send_signal(signal.SIGKILL)  # the driver only: its Ray instance and actors go with it
        proc.wait(30)
    finally:
        time.sleep(1)
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # whatever of this session survived the driver
        except ProcessLookupError:
            pass
    first = rows_of(db)
    assert 3 <= len(first) < 2 * 2 * 4
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = rows_of(db)
    keys = [r["attempt_key"] for r in rows]
    assert len(rows) == 2 * 2 * 4 and len(set(keys)) == len(keys)
    assert keys[:len(first)] == [r["attempt_key"] for r in first]  # the first run's rows are kept as written
    assert Counter(r["status"] for r in rows) == {"OK": 8, "ERROR": 8}
    assert f"{len(first)} already in the store" in " ".join(done.stderr.split())  # the summary: resumed


def test_executor_ray_without_ray_is_one_line_and_exit_2(cli, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    res = cli("run", "--executor", "ray", "--devices", "cpu:0,cpu:1", "--db", tmp_path / "s.sqlite")
    assert res.rc == 2 and len(res.err.strip().splitlines()) == 1
    assert "pip install 'attnbench[ray]'" in res.err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("argv,text", [
    (["--address", "auto"], "--address needs --executor ray"),
    (["--executor", "ray", "--devices", "0,1"], "--devices is all"),
    (["--executor", "ray", "--device", "cpu"], "exclude each other"),
    (["--executor", "ray", "--devices", "cpu:0,cpu:0"], "twice"),
    (["--executor", "dask"], "invalid choice"),
])
def test_bad_ray_options_exit_2_and_write_nothing(cli, tmp_path, argv, text):
    if "ray" in argv:
        pytest.importorskip("ray")
    res = cli("run", *argv, "--db", tmp_path / "s.sqlite")
    assert res.rc == 2 and text in res.err and len(res.err.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("address", ["localhost", "ray://head", "head:port", "head:0"])
def test_an_address_that_names_no_head_is_refused_before_anything(cli, tmp_path, address):
    pytest.importorskip("ray")
    res = cli("run", "--executor", "ray", "--address", address, "--db", tmp_path / "s.sqlite")
    assert res.rc == 2 and "expected auto, HOST:PORT" in res.err and len(res.err.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir())


def test_a_cluster_that_does_not_answer_is_one_line_at_once(cli, tmp_path, tiny):
    """Nothing listens at the head named: exit 2 within seconds (Ray's own retries take minutes), no
    store, no log."""
    import socket
    import time

    pytest.importorskip("ray")
    with socket.socket() as s:  # a port nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.perf_counter()
    res = cli("run", "--executor", "ray", "--address", f"127.0.0.1:{port}", "--config", tiny, "--plugin", FAKES,
              "--backends", "fake-good", "--db", tmp_path / "s.sqlite")
    assert time.perf_counter() - t0 < 30
    assert res.rc == 2 and f"could not reach the Ray cluster at 127.0.0.1:{port}" in res.err
    assert len(res.err.strip().splitlines()) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["tiny.yaml"]


def test_a_cluster_without_the_devices_is_a_usage_error(cluster, cli, tmp_path, tiny):
    """Three fake devices asked of an instance that has two: one line, exit 2, no row."""
    res = cli("run", "--executor", "ray", "--devices", "cpu:0,cpu:1,cpu:2", "--config", tiny, "--plugin", FAKES,
              "--backends", "fake-good", "--db", tmp_path / "s.sqlite")
    assert res.rc == 2 and "attnbench_cpu_device" in res.err and len(res.err.strip().splitlines()) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["tiny.yaml"]  # the grid it read: neither a store nor a log


def test_run_help_explains_the_executors(cli):
    res = cli("run", "--help")
    text = " ".join(res.out.split())
    assert res.rc == 0
    for words in ("--executor {local,ray}", "one Ray actor per GPU", "--address ADDR", "start a local Ray instance",
                  "pip install 'attnbench[ray]'"):
        assert words in text
