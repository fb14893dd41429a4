"""A run's start-up: from its command's start (the process's, when run as a program) to the run's."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attnbench import procinfo

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")

RUN = ["run", "--grid", "smoke", "--backends", "sdpa-math", "--where", "mode=prefill", "--where", "causal=false",
       "--repeats", "1", "--device", "cpu"]


def test_a_processs_age_is_read_from_proc():
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(1.0)
        age = procinfo.age_s(p.pid)
        assert age is not None and 0.9 <= age <= 5.0
    finally:
        p.kill()
        p.wait()
    assert procinfo.age_s(p.pid) is None and procinfo.start_ticks(p.pid) == "?"  # gone: unknown, not 0


def _startup(db) -> tuple[float, dict]:
    (prov,) = sqlite3.connect(db).execute("SELECT provenance FROM runs").fetchone()
    prov = json.loads(prov)
    return prov["startup_s"], prov["sweep_overhead_s"]


@pytest.mark.slow
def test_run_as_a_program_counts_its_start_up_from_the_process_start(tmp_path):
    """Everything the process did before main() (here a 1.5 s sleep standing in for imports) is the
    command's start-up, as are the workers' start and the provenance."""
    db = tmp_path / "s.sqlite"
    code = ("import time; time.sleep(1.5); import sys; from attnbench.cli.main import main; "
            f"sys.argv = ['attnbench'] + {RUN + ['--db', str(db)]!r}; raise SystemExit(main())")
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "COLUMNS": "80"})
    elapsed = time.monotonic() - t0
    assert p.returncode == 0, p.stderr
    startup, ledger = _startup(db)
    assert 1.5 + ledger["worker_start"] + ledger["provenance"] <= startup < elapsed
    assert f"start-up before the first attempt: {startup:.1f} s" in p.stderr + p.stdout


@pytest.mark.slow
def test_run_called_from_python_counts_from_the_call(tmp_path):
    """main(argv) in a long-lived process (a test, a notebook): the process's age is not the run's."""
    from attnbench.cli.main import main

    db = tmp_path / "s.sqlite"
    t0 = time.monotonic()
    assert main(RUN + ["--db", str(db)]) == 0
    startup, ledger = _startup(db)
    assert ledger["worker_start"] <= startup <= time.monotonic() - t0 < procinfo.age_s()
