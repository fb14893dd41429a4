"""Issue 42.2: a backend that declares no kernel families has its OK rows marked "dispatch unchecked"
(dispatch_checked = 0, shown as name? with one note), not the same OK as a verified one."""
from __future__ import annotations

import json

import pytest

from attnbench.backends.registry import load_plugin_file
from attnbench.runner import attempt
from attnbench.store.db import Store
from attnbench.workloads import Workload
from conftest import FAKES, make_row

W = Workload(mode="prefill", batch=1, q_len=32, kv_len=32, q_heads=2, kv_heads=1, head_dim=16, head_dim_v=16,
             dtype="fp32")


@pytest.mark.parametrize("name,checked", [("fake-good", True), ("fake-identity-cache", False)])
def test_the_row_says_whether_dispatch_was_checked(name, checked):
    backend = {b.name: b for b in load_plugin_file(FAKES)}[name]
    spec = {"op": "attempt", "workload": W.to_dict(), "device": "cpu", "seed": 0,
            "timing": dict(warmup_s=0.0, min_samples=3, max_samples=5, max_time_s=0.05)}
    res = attempt.run(spec, backend, attempt.WorkloadCache())
    assert res["status"] == "OK", res["reason"]
    assert res["dispatch_checked"] is checked


def _store(p):
    s = Store(p)
    s.start_run("run-a", "default", "g", "attnbench run", "CPU test", {"ceilings": {}})
    # two workloads; be1 declares nothing (dispatch_checked 0) and wins the first; older rows (NULL) unmarked
    s.insert_many([make_row(0, backend="be0", dispatch_checked=1, median_us=20.0, samples_us=[20.0] * 12),
                   make_row(0, attempt_key="k1", backend="be1", dispatch_checked=0),
                   make_row(1, backend="be2", dispatch_checked=None)])
    s.finish_run("run-a")
    s.close()
    return p


def test_show_marks_unchecked_backends_and_says_why(cli, tmp_path):
    db = _store(tmp_path / "s.sqlite")
    r = cli("show", "--db", db)
    assert r.rc == 0, r.err
    assert "be1?" in r.out and "be0?" not in r.out and "be2?" not in r.out
    assert "dispatch unchecked" in r.out
    ranked = cli("show", "--db", db, "--rank")
    assert "be1?" in ranked.out and "dispatch unchecked" in ranked.out
    data = json.loads(cli("show", "--db", db, "--format", "json").out)
    assert {d["best"]: d["dispatch_unchecked"] for d in data} == {"be1": True, "be2": False}


def test_show_at_80_columns_keeps_the_mark(cli, tmp_path, monkeypatch):
    from rich.console import Console

    from attnbench.cli import console

    db = _store(tmp_path / "s.sqlite")
    monkeypatch.setattr(console, "out", Console(width=80))
    r = cli("show", "--db", db)
    assert "be1?" in r.out and max(map(len, r.out.splitlines())) <= 80


def test_analyze_marks_unchecked_backends(cli, tmp_path):
    """analyze's dispatch and outcomes tables print name? for a backend with unchecked OK rows, and the JSON
    section counts them; the report's dispatch table has the column."""
    db = _store(tmp_path / "s.sqlite")
    r = cli("analyze", db)
    assert r.rc == 0, r.err
    assert "dispatch unchecked: be1? 1" in r.out and "be0?" not in r.out
    md = tmp_path / "a.md"
    assert cli("analyze", db, "--md", md).rc == 0
    assert "be1?" in md.read_text() and "be0?" not in md.read_text()
    out = tmp_path / "a.json"
    assert cli("analyze", db, "--json", out).rc == 0
    rows = {x["backend"]: x["unchecked"] for x in json.loads(out.read_text())["dispatch"]}
    assert rows["be1"] == 1 and rows["be0"] == 0
