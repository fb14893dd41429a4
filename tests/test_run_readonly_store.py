"""`run` on a store it cannot write fails first: one line, exit 2, before any worker starts (it used to start
the workers, measure the device, then fail at the run's first row)."""
from __future__ import annotations

import sqlite3

from attnbench.runner.executors import local as local_mod
from attnbench.store import db as db_mod
from attnbench.store.db import Store
from conftest import TINY_GRID


def test_run_on_a_read_only_store_fails_in_one_line_before_any_worker_starts(cli, tmp_path, write_yaml, monkeypatch):
    db = tmp_path / "s.sqlite"
    Store(db).close()
    before = db.read_bytes()
    real = sqlite3.connect

    def read_only(path, *args, **kw):  # what SQLite falls back to for a file it may not write (chmod 444, not root)
        if str(path) == str(db):
            return real(f"file:{db}?mode=ro", uri=True, timeout=kw.get("timeout", 5.0))
        return real(path, *args, **kw)

    monkeypatch.setattr(db_mod.sqlite3, "connect", read_only)
    started = []

    def no_worker(*args, **kw):
        started.append(kw.get("warm"))
        raise AssertionError("a worker started")

    monkeypatch.setattr(local_mod, "Worker", no_worker)
    res = cli("run", "--config", write_yaml(TINY_GRID), "--backends", "reference", "--repeats", "1", "--db", db,
              "--device", "cpu")
    assert res.rc == 2 and not started, res.err
    lines = [ln for ln in res.err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("attnbench: error:") and "cannot be written" in lines[0], res.err
    assert db.read_bytes() == before
    assert not (tmp_path / "s.sqlite.compile-cache").exists()
