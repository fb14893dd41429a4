"""Runs sharing a store share its sweep's compiler cache, and a backend is never charged for the harness's
housekeeping: a run removes the cache only when no other live run holds it (runner/compile_cache.py
CacheLease), and an attempt whose compiler cache vanished under it runs again (runner/executors/local.py)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from attnbench.runner.compile_cache import CompileCache
from conftest import ATTNBENCH, needs_console_script, rows_of


def compiled(cache: CompileCache):
    f = cache.sweep / "inductor" / "ab" / "kernel.so"
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_bytes(b"\0" * 64)
    return f


def test_a_run_that_ends_beside_a_live_one_leaves_their_cache_to_the_last(tmp_path):
    cache = CompileCache.of(tmp_path / "s.sqlite", None, sweep=True)
    longer, shorter = cache.enter(), cache.enter()  # two runs on one store (each its own lock)
    f = compiled(cache)
    cache.after_run(0, shorter)  # its plan is done: it would remove the sweep's cache...
    assert f.exists()  # ... but the longer run is still compiling into it (was removed: CppCompileError)
    cache.after_run(0, longer)
    assert not cache.sweep.exists()  # the last one out removes it


def test_a_failed_run_beside_a_live_one_keeps_the_cache_even_when_its_store_goes(tmp_path):
    cache = CompileCache.of(tmp_path / "s.sqlite", None, sweep=True)
    live, failed = cache.enter(), cache.enter()
    f = compiled(cache)
    assert cache.after_failure(True, failed) is None and f.exists()
    assert cache.after_failure(False, live) > 0 and f.exists()  # interrupted: kept for the resume


def test_the_lease_of_a_killed_run_ends_with_it(tmp_path):
    """kill -9 takes no clean-up: the kernel drops a dead process's lock, so the next run that finishes the
    sweep removes the cache; the lock file does not count as compiled code."""
    cache = CompileCache.of(tmp_path / "s.sqlite", None, sweep=True)
    code = ("import sys, time; from pathlib import Path; from attnbench.runner.compile_cache import CompileCache; "
            "lease = CompileCache.of(Path(sys.argv[1]), None, sweep=True).enter(); print('held', flush=True); "
            "time.sleep(60)")
    child = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "s.sqlite")], stdout=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout.readline().strip() == "held"
        assert cache.worker_config()["run_cache_resumed"] is False  # the lock file alone: nothing compiled
        mine = cache.enter()
        compiled(cache)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
        cache.after_run(0, mine)
        assert not cache.sweep.exists()
    finally:
        child.kill()
        child.stdout.close()


def test_a_lease_taken_on_a_cache_being_removed_is_taken_again_on_the_new_one(tmp_path):
    from attnbench.runner.compile_cache import LEASE_FILE

    cache = CompileCache.of(tmp_path / "s.sqlite", None, sweep=True)
    old = cache.enter()
    stale = os.open(cache.sweep / LEASE_FILE, os.O_RDWR)  # a run that opened the lock file just before ...
    cache.after_run(0, old)  # ... the last run removed the cache
    os.close(stale)
    new = cache.enter()
    assert (cache.sweep / LEASE_FILE).exists() and new.fd is not None
    assert os.fstat(new.fd).st_ino == os.stat(cache.sweep / LEASE_FILE).st_ino
    new.end(remove=True)


VANISHING = '''
import os, shutil
from pathlib import Path
from attnbench.backends.base import Backend
from attnbench.backends.layout import from_bhnd, to_bhnd
from attnbench.backends.reference import attention_math


class Vanishing(Backend):
    """Compiles into the run's compiler cache; on its first attempt a neighbour removes that cache mid-compile
    and the compiler fails (as Inductor's CppCompileError did when a shorter run sharing the store ended)."""

    def prepare(self, w, inputs):
        root = Path(os.environ["TORCHINDUCTOR_CACHE_DIR"]).parent
        marker = Path(os.environ["VANISH_MARKER"])
        if not marker.exists():
            marker.write_text("removed")
            shutil.rmtree(root)
            raise RuntimeError("CppCompileError: C++ compile error: kernel.cpp: No such file or directory")
        return lambda: from_bhnd(attention_math(*(to_bhnd(t, w.layout) for t in (inputs.q, inputs.k, inputs.v)),
                                                w.causal, w.causal_align, inputs.scale), w.layout)


BACKENDS = [Vanishing(name="fake-vanishing-cache", family="plugin", isolation="backend",
                      kernel_families={"cpu": frozenset({"unfused-gemm"})}, modes=("prefill",))]
'''

ONE_PREFILL = ("workloads:\n"
               "  - {mode: prefill, batch: 1, q_heads: 2, kv_heads: 1, head_dim: 16, seqlen: 32, dtype: fp32}\n")


@pytest.mark.slow
def test_an_attempt_whose_compiler_cache_vanished_runs_again_instead_of_being_charged(cli, tmp_path, monkeypatch,
                                                                                     caplog):
    plugin, grid, db = tmp_path / "vanishing.py", tmp_path / "g.yaml", tmp_path / "s.sqlite"
    plugin.write_text(VANISHING)
    grid.write_text(ONE_PREFILL)
    monkeypatch.setenv("VANISH_MARKER", str(tmp_path / "vanished"))
    res = cli("run", "--config", grid, "--plugin", plugin, "--backends", "fake-vanishing-cache", "--repeats", "1",
              "--max-time", "0.05", "--db", db, "--device", "cpu")
    assert res.rc == 0, res.err
    assert (tmp_path / "vanished").exists()  # the cache did vanish under the first try
    (row,) = rows_of(db)
    assert row["status"] == "OK", row["reason"]  # was ERROR "CppCompileError": the harness's housekeeping
    assert "was removed during the attempt" in caplog.text


TINY = ("workloads:\n"
        "  - {mode: prefill, batch: 1, q_heads: 2, kv_heads: 1, head_dim: 16, seqlen: 32, dtype: fp32}\n"
        "  - {mode: prefill, batch: 1, q_heads: 2, kv_heads: 1, head_dim: 16, seqlen: 64, dtype: fp32, causal: true}\n")


@needs_console_script
@pytest.mark.slow
@pytest.mark.parametrize("trial", [0, 1])
@pytest.mark.parametrize("runs", [2, 4])
def test_concurrent_runs_with_compilers_store_no_error_a_solo_run_has_not(tmp_path, runs, trial):
    """One run compiles (compile, flex on CPU) while `runs - 1` others on the same store run eager backends
    and end, again and again, each end a chance to remove the shared cache under the compiler: solo, these
    attempts are all OK. Before runs held a lease on the cache, 3 of the 8 compile/flex rows were ERROR
    (InductorError: CppCompileError) beside 1 other run, 7 of 8 beside 3. Every attempt is OK here too, and the
    last run out removes the cache."""
    grid, db = tmp_path / "tiny.yaml", tmp_path / "shared.sqlite"
    grid.write_text(TINY)
    common = ["--config", str(grid), "--max-time", "0.05", "--db", str(db), "--device", "cpu"]
    compiling = subprocess.Popen([ATTNBENCH, "run", "--backends", "compile,flex", "--repeats", "2", *common],
                                 cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    eager = ["reference", "sdpa-math", "sdpa-flash"]
    ends, failed = 0, []
    others: list[subprocess.Popen | None] = [None] * (runs - 1)
    try:
        while compiling.poll() is None:  # each short run ends (and may clean up) while the compiles go on
            for i, p in enumerate(others):
                if p is not None and p.poll() is None:
                    continue
                if p is not None:
                    ends += 1
                    if p.returncode != 0:
                        failed.append(p.stderr.read())
                    p.stderr.close()
                others[i] = subprocess.Popen([ATTNBENCH, "run", "--backends", eager[i % 3], "--tag", f"eager{i % 2}",
                                              "--repeats", "1", *common], cwd=tmp_path, stdout=subprocess.DEVNULL,
                                             stderr=subprocess.PIPE, text=True)
            time.sleep(0.2)
        for p in others:
            if p is not None:
                p.wait(300)
                failed += [p.stderr.read()] if p.returncode else []
                ends += 1
        err = compiling.stderr.read()
    finally:
        for p in [compiling, *others]:
            if p is not None and p.poll() is None:
                p.kill()
    assert compiling.returncode == 0 and not failed, (err, failed)
    rows = rows_of(db)
    bad = [(r["backend"], r["status"], r["reason"]) for r in rows if r["status"] not in ("OK", "UNSUPPORTED")]
    print(f"runs {runs} trial {trial}: {len(rows)} rows, {ends} short runs ended during the compiles, bad {bad}")
    assert not bad
    assert sum(r["backend"] in ("compile", "flex") and r["status"] == "OK" for r in rows) == 8  # 2 x 2 x 2 repeats
    assert not (tmp_path / "shared.sqlite.compile-cache").exists()  # the sweep's last run removed it
