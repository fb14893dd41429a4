"""Resume after kill -9: no duplicate, no missing attempt, earlier rows untouched, no orphaned workers."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ATTNBENCH, FAKES, TINY_GRID, needs_console_script, rows_of

GRID = """\
name: resume
workloads:
  - {mode: prefill, batch: 1, q_heads: 2, kv_heads: 1, head_dim: 16, seqlen: [32, 64], dtype: fp32}
"""
# a plugin and a built-in backend, two workloads, two repeats: 8 attempts, killed after 3, a repeat's
# workers still to start
BACKENDS = "fake-good,sdpa-math"
REPEATS = 2


def count(db: Path, table: str = "attempts") -> int:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return con.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:  # not created yet
        return 0


def kill_9_when(proc, ready, settle: float = 0.0) -> set[int]:
    """Wait (at most 180 s) until ready(), then SIGKILL the supervisor; returns the worker pids seen."""
    workers: set[int] = set()
    try:
        deadline = time.monotonic() + 180
        while not ready():
            workers.update(children_of(proc.pid))
            assert proc.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline, "the run never got there"
            time.sleep(0.05)
        time.sleep(settle)
        workers.update(children_of(proc.pid))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return workers


def children_of(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.append(int(d.name))
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie waiting for its new parent to reap it is gone


def assert_workers_leave(workers: set[int], within_s: float = 10.0) -> None:
    """Workers notice that their supervisor is gone and exit; any left are killed (they are ours)."""
    deadline = time.monotonic() + within_s
    while any(alive(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    lingering = [p for p in workers if alive(p)]
    for p in lingering:  # clean up what this test started before failing
        try:
            if b"multiprocessing" in Path(f"/proc/{p}/cmdline").read_bytes():
                os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    assert not lingering, f"workers outlived the killed supervisor: {lingering}"


def expected_keys(grid: Path, plugin: str) -> set[str]:
    from attnbench.backends.base import DeviceInfo
    from attnbench.backends.registry import select
    from attnbench.measure.provenance import device_info
    from attnbench.runner.planner import plan
    from attnbench.workloads.grids import load_yaml_grid

    _, ws = load_yaml_grid(grid)
    bs = select(BACKENDS.split(","), [plugin])
    return {a.key for a in plan(ws, bs, DeviceInfo.from_dict(device_info("cpu")), REPEATS, "default", 0)}


def run_command(tmp_path, db_name: str, *extra: str):
    """(grid, store, argv) of an `attnbench run` over GRID with the fake backends on CPU."""
    grid = tmp_path / "grid.yaml"
    grid.write_text(GRID)
    db = tmp_path / db_name
    cmd = [sys.executable, "-m", "attnbench", "run", "--repeats", "1", "--config", str(grid), "--plugin", FAKES, "--db", str(db),
           "--device", "cpu", *extra]
    return grid, db, cmd


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc to find the workers")
def test_kill_9_then_resume(tmp_path):
    grid, db, cmd = run_command(tmp_path, "r.sqlite", "--backends", BACKENDS, "--repeats", str(REPEATS),
                                "--max-time", "0.05", "--timeout", "120")
    total = 2 * len(BACKENDS.split(",")) * REPEATS

    log = open(tmp_path / "first.out", "w")
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)
    try:
        workers = kill_9_when(proc, lambda: count(db) >= 3)
    finally:
        log.close()
    assert proc.returncode == -signal.SIGKILL
    assert workers, "no worker process was seen"

    assert_workers_leave(workers)

    before = {r["attempt_key"]: r for r in rows_of(db)}
    assert 3 <= len(before) < total
    (first_run,) = {r["run_id"] for r in before.values()}

    # the same command again finishes the sweep
    second = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr[-2000:]
    after = rows_of(db)
    keys = [r["attempt_key"] for r in after]
    assert len(keys) == len(set(keys)), "duplicate attempt"
    assert len(after) == total
    assert set(keys) == expected_keys(grid, FAKES), "missing or unexpected attempt"
    by_key = {r["attempt_key"]: r for r in after}
    for k, r in before.items():
        assert by_key[k] == r, "a row written before the kill changed"
    new_runs = {r["run_id"] for r in after if r["attempt_key"] not in before}
    assert len(new_runs) == 1 and first_run not in new_runs
    assert all(r["status"] == "OK" for r in after), [(r["backend"], r["reason"]) for r in after if r["reason"]]
    assert f"{len(before)} already in the store" in " ".join(second.stderr.split())

    con = sqlite3.connect(db)
    runs = dict(con.execute("SELECT run_id, finished_at FROM runs").fetchall())
    con.close()
    assert runs[first_run] is None  # the killed run never finished
    assert runs[new_runs.pop()] is not None

    # a finished sweep: running it again writes no attempt
    third = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert third.returncode == 0, third.stderr[-2000:]
    assert rows_of(db) == after
    text = " ".join(third.stderr.split())
    assert "done: 0 attempts this run (nothing new)" in text and f"{total} already in the store" in text


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc to find the workers")
def test_kill_9_during_a_busy_attempt_leaves_no_worker(tmp_path):
    """A worker stuck inside a kernel never reads its pipe again: it must watch its parent itself."""
    _, db, cmd = run_command(tmp_path, "h.sqlite", "--backends", "fake-hang", "--timeout", "300")
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # the run row is written just before the first attempt is sent; 1.5 s later the worker is
    # inside the hanging call
    workers = kill_9_when(proc, lambda: count(db, "runs") >= 1, settle=1.5)
    assert workers
    assert count(db) == 0  # the hanging attempt never produced a row
    assert_workers_leave(workers)


@pytest.mark.slow
def test_retry_failed_replaces_only_timeout_crash_and_error_rows(tmp_path):
    from attnbench.cli.main import main

    (tmp_path / "tiny.yaml").write_text(TINY_GRID)
    # one workload (prefill) is enough: each status once, each crash a worker started again
    argv = ["run", "--repeats", "1", "--config", str(tmp_path / "tiny.yaml"), "--modes", "prefill", "--plugin", FAKES,
            "--backends", "fake-good,fake-crash,fake-raises,fake-refuses", "--db", str(tmp_path / "t.sqlite"),
            "--device", "cpu", "--max-time", "0.05"]
    assert main(argv) == 0
    first = {r["attempt_key"]: r for r in rows_of(tmp_path / "t.sqlite")}
    assert len(first) == 4
    assert sorted(r["status"] for r in first.values()) == ["CRASH", "ERROR", "OK", "UNSUPPORTED"]

    assert main(argv + ["--retry-failed"]) == 0
    second = {r["attempt_key"]: r for r in rows_of(tmp_path / "t.sqlite")}
    assert set(second) == set(first)  # the same attempts, one row each
    for k, r in first.items():
        if r["status"] in ("CRASH", "ERROR"):
            assert second[k]["run_id"] != r["run_id"] and second[k]["status"] == r["status"]
        else:
            assert second[k] == r  # OK and UNSUPPORTED rows are kept as they were

    assert main(argv) == 0  # without the flag a finished sweep stays as it is
    assert {r["attempt_key"]: r for r in rows_of(tmp_path / "t.sqlite")} == second


COUNTING = """
import os
from attnbench.backends.base import Backend
from attnbench.backends.layout import from_bhnd, to_bhnd
from attnbench.backends.reference import attention_math


class Counting(Backend):
    # every measurement of it leaves a line: two runs sharing a store must not both measure one attempt
    def prepare(self, w, inputs):
        with open(os.environ["COUNT_FILE"], "a") as f:
            f.write(w.key() + "\\n")
        q, k, v = (to_bhnd(t, w.layout) for t in (inputs.q, inputs.k, inputs.v))
        return lambda: from_bhnd(attention_math(q, k, v, w.causal, w.causal_align, inputs.scale), w.layout)


BACKENDS = [Counting(name="counting", family="plugin", kernel_families={"cpu": frozenset({"unfused-gemm"})})]
"""


@pytest.mark.slow
@needs_console_script
def test_two_runs_sharing_a_store_measure_each_attempt_once(tmp_path):
    import os
    import re

    plugin = tmp_path / "counting.py"
    plugin.write_text(COUNTING)
    grid = tmp_path / "tiny.yaml"
    grid.write_text(TINY_GRID)
    env = {**os.environ, "COUNT_FILE": str(tmp_path / "count.txt")}
    argv = [ATTNBENCH, "run", "--config", str(grid), "--plugin", str(plugin), "--backends", "counting",
            "--repeats", "3", "--max-time", "0.2", "--db", str(tmp_path / "shared.sqlite"), "--device", "cpu"]
    procs = [subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    done = [int(re.search(r"done: (\d+) attempts this run", " ".join(err.split())).group(1)) for _, err in outs]
    rows = rows_of(tmp_path / "shared.sqlite")
    print("done per run", done)
    assert len(rows) == 6 and sum(done) == 6, (done, len(rows))  # each summary counts what it ran
    measured = (tmp_path / "count.txt").read_text().split()
    assert len(measured) == 6, measured  # no attempt measured by both runs
