"""Unrelated concurrent work (issue 39.5): other processes on the attempt's GPU, its utilisation and the host's
load before and after each attempt (measure/concurrency.py), the rows flagged, and `run --exclusive`, against a
fake pynvml module."""
from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import pandas as pd
import pytest

from attnbench import record
from attnbench.analysis.ceilings import flag_lines, row_flags
from attnbench.measure import concurrency, nvml

OTHER = 4_194_000  # a PID no process of this test has (PIDs stay below 2**22 on Linux)


class FakeNvml:
    """NVML of one GPU whose compute processes and utilisation the test sets."""

    def __init__(self, pids=(), util=0, fail=False):
        self.pids, self.util, self.fail = list(pids), util, fail

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        if self.fail:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        return [SimpleNamespace(pid=p, usedGpuMemory=1 << 30) for p in self.pids]

    def nvmlDeviceGetGraphicsRunningProcesses(self, h):
        return []

    def nvmlDeviceGetUtilizationRates(self, h):
        return SimpleNamespace(gpu=self.util, memory=0)


@pytest.fixture
def gpu(monkeypatch):
    fake = FakeNvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setattr(nvml, "handle_for", lambda device: "handle")
    return fake


def test_another_process_on_the_gpu_is_named_and_ours_are_not(gpu):
    gpu.pids, gpu.util = [os.getpid(), os.getppid(), OTHER], 87
    r = concurrency.read("cuda:0")
    assert r["pids"] == [OTHER] and r["util"] == 87.0 and "why" not in r
    assert isinstance(r["load"], float)
    assert concurrency.shared(r) is True


def test_a_gpu_with_only_our_processes_is_not_shared(gpu):
    gpu.pids, gpu.util = [os.getpid()], 40
    r = concurrency.read("cuda:0")
    assert r["pids"] == [] and concurrency.shared(r) is False


def test_the_runs_own_idle_workers_are_ours(gpu):
    """A sibling worker of the same run (a child of the supervisor) holds a context but runs nothing now."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        gpu.pids = [child.pid, OTHER]
        assert concurrency.read("cuda:0", roots={os.getpid()}, holds_context=False)["pids"] == [OTHER]
        assert concurrency.busy("cuda:0") == [OTHER]  # run --exclusive: its own children are not others
    finally:
        child.kill()
        child.wait()


def test_pids_of_another_namespace_are_reported_but_not_judged(gpu):
    """A container: NVML's PIDs are the host's, ours is not among them, nor can our idle workers be told apart."""
    gpu.pids = [12, 13]
    r = concurrency.read("cuda:0", holds_context=True)
    assert r["pids"] == [12, 13] and "another PID namespace" in r["why"]
    assert concurrency.shared(r) is None
    cols = concurrency.columns(r, r)
    assert cols["gpu_others_before"] == "12,13" and cols["gpu_shared"] is None and "namespace" in cols["gpu_others_why"]
    assert concurrency.busy("cuda:0") == [12, 13]  # before a run starts every listed process is another's


def test_cpu_and_nvml_errors_leave_the_fields_empty_and_say_why(gpu):
    r = concurrency.read("cpu")
    assert "pids" not in r and r["why"] == concurrency.NO_GPU
    cols = concurrency.columns(r, r)
    assert cols["gpu_others_before"] is None and cols["gpu_shared"] is None
    assert cols["gpu_others_why"] == concurrency.NO_GPU and cols["host_load_before"] is not None
    gpu.fail = True
    bad = concurrency.read("cuda:0")
    assert "pids" not in bad and "NVML_ERROR_NOT_SUPPORTED" in bad["why"]
    assert concurrency.columns(bad, bad)["gpu_shared"] is None


def test_the_row_columns_before_and_after(gpu):
    gpu.pids, gpu.util = [os.getpid(), OTHER], 90
    before = concurrency.read("cuda:0")
    gpu.pids, gpu.util = [os.getpid()], 0
    after = concurrency.read("cuda:0")
    cols = concurrency.columns(before, after)
    assert cols["gpu_others_before"] == str(OTHER) and cols["gpu_others_after"] == ""
    assert cols["gpu_util_before"] == 90.0 and cols["gpu_util_after"] == 0.0
    assert cols["gpu_shared"] is True and cols["gpu_others_why"] is None
    assert concurrency.columns(after, after)["gpu_shared"] is False
    assert set(cols) <= record.names_from(record.ATTEMPT)  # what a worker may report


def test_exclusive_refusal_names_the_pids(gpu):
    gpu.pids = [OTHER]
    line = concurrency.refusal(["cuda:0"])
    assert line and str(OTHER) in line and "\n" not in line
    gpu.pids = []
    assert concurrency.refusal(["cuda:0"]) is None
    assert concurrency.refusal(["cpu"]) is None  # no NVML: not refused


def test_run_exclusive_exits_2_with_one_line_and_writes_nothing(monkeypatch, tmp_path, capsys):
    from attnbench.cli.main import main

    monkeypatch.setattr(concurrency, "refusal", lambda devices: f"--exclusive: the GPU is busy ({devices[0]}: PID "
                                                                f"{OTHER} (python))")
    db = tmp_path / "s.sqlite"
    rc = main(["run", "--exclusive", "--device", "cpu", "--grid", "smoke", "--db", str(db)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and str(OTHER) in err[0] and "--exclusive" in err[0]
    assert not db.exists()


def test_show_names_rows_measured_beside_other_work():
    ok = pd.DataFrame({"gpu_shared": [1, 0, None], "gpu_others_before": [f"{OTHER},77", "", None],
                       "gpu_others_after": ["", "", None], "pct_read": [None, 104.0, None],
                       "pct_peak_clock": [50.0, None, None]})
    flags = row_flags(ok)
    assert flags["gpu_shared"] == {"rows": 1, "pids": ["77", str(OTHER)]}
    assert flags["over_ceiling"]["read"] == 1
    lines = flag_lines(flags)
    assert any("1 OK rows were measured while another process" in x and str(OTHER) in x for x in lines)
    assert any("read faster than the measured read ceiling" in x and "104%" in x for x in lines)
    assert flag_lines(row_flags(ok.iloc[[1]].assign(pct_read=[90.0]))) == []


def test_an_empty_process_list_while_we_hold_a_context_is_unknown_not_unshared(gpu):
    """This process holds a context: NVML listing nobody means it cannot see processes (a container, MIG, rights)."""
    gpu.pids = []
    r = concurrency.read("cuda:0", holds_context=True)
    assert "pids" not in r and "cannot see" in r["why"] and concurrency.shared(r) is None
