"""attnbench show as a reader meets it: compact below 160 columns, data formats, filters, the full
ranking and the failures, on a store of known rows."""
from __future__ import annotations

import csv
import io
import json

import pytest
from rich.console import Console

from attnbench.cli import commands
from attnbench.store.db import Store
from conftest import make_row


@pytest.fixture
def store(tmp_path):
    db = tmp_path / "s.sqlite"
    s = Store(db)
    s.start_run("run-a", "default", "g", "attnbench run", "CPU test",
                {"ceilings": {"matmul_tflops_bf16": 1.0}, "device": {"type": "cpu", "name": "CPU test"}})
    fast, slow = make_row(0, backend="a-very-long-backend-name"), make_row(0, backend="slow", attempt_key="k1",
                                                                          median_us=30.0,
                                                                          samples_us=[30.0 + j for j in range(12)])
    other = make_row(1, backend="slow", attempt_key="k2")
    failed = make_row(2, backend="slow", attempt_key="k3", status="CRASH", reason="worker killed by [SIGABRT]",
                      samples_us=None, median_us=None, p95_us=None)
    s.insert_many([fast, slow, other, failed])
    s.finish_run("run-a")
    s.close()
    return db


def run_show(cli, monkeypatch, width, *argv):
    monkeypatch.setattr(commands, "out", Console(width=width))
    return cli("show", *argv)


def test_compact_below_160_columns_fits_and_never_cuts_a_name(cli, monkeypatch, store):
    res = run_show(cli, monkeypatch, 80, "--db", store)
    assert res.rc == 0, res.err
    lines = res.out.splitlines()
    assert max(len(line) for line in lines) <= 80 and "clear" in res.out  # the last column too
    assert any("a-very-long-backend-name" in line for line in lines), res.out  # whole, on one line
    assert "…" not in res.out
    assert "every row: CPU test" in " ".join(res.out.split())  # one device: stated once
    wide = run_show(cli, monkeypatch, 250, "--db", store)
    assert "p95 µs" in wide.out and "p95 µs" not in res.out


@pytest.mark.parametrize("fmt", ["csv", "json", "md"])
def test_the_same_results_as_data(cli, store, fmt):
    res = cli("show", "--db", store, "--format", fmt)
    assert res.rc == 0, res.err
    if fmt == "csv":
        rows = list(csv.DictReader(io.StringIO(res.out)))
    elif fmt == "json":
        rows = json.loads(res.out)
    else:
        head, _, *body = res.out.strip().splitlines()
        names = [c.strip() for c in head.strip("|").split("|")]
        rows = [dict(zip(names, (c.strip() for c in line.strip("|").split("|")))) for line in body]
    assert len(rows) == 2 and {r["best"] for r in rows} == {"a-very-long-backend-name", "slow"}


def test_failures_list_every_non_ok_attempt_with_its_reason_as_text(cli, store):
    res = cli("show", "--db", store, "--failures")
    assert res.rc == 0 and "worker killed by [SIGABRT]" in res.out and "CRASH" in res.out
    rows = json.loads(cli("show", "--db", store, "--failures", "--format", "json").out)
    assert [(r["backend"], r["status"]) for r in rows] == [("slow", "CRASH")]


def test_rank_lists_every_backend_of_a_workload(cli, store):
    rows = json.loads(cli("show", "--db", store, "--rank", "--format", "json").out)
    by_workload = {}
    for r in rows:
        by_workload.setdefault(r["workload_key"], []).append(r["backend"])
    assert sorted(len(v) for v in by_workload.values()) == [1, 2]
    res = cli("show", "--db", store, "--rank")
    assert res.rc == 0 and "× best" in res.out


def test_filters(cli, store):
    rows = json.loads(cli("show", "--db", store, "--where", "causal=true", "--format", "json").out)
    assert [r["best"] for r in rows] == ["slow"]  # make_row(1) is the causal one
    rows = json.loads(cli("show", "--db", store, "--backend", "slow", "--format", "json").out)
    assert {r["best"] for r in rows} == {"slow"} and len(rows) == 2
    res = cli("show", "--db", store, "--backend", "nope")
    assert res.rc == 2 and "no attempt of backend 'nope'" in res.err
    res = cli("show", "--db", store, "--where", "colour=red")
    assert res.rc == 2 and "unknown workload axis" in res.err


def _repeats(backend, medians, **over):
    return [make_row(0, **{"backend": backend, "attempt_key": f"{backend}{r}", "repeat": r, "median_us": m,
                           "p95_us": m * 1.05, "samples_us": [m * (1 + 0.001 * j) for j in range(12)], **over})
            for r, m in enumerate(medians)]


@pytest.mark.parametrize("fast,over,why", [
    ([10.0, 10.2, 14.0], {}, "repeats disagree"),
    ([10.0, 10.1, 10.2], {"rel_err": 0.2}, "median known to ±20% only"),
    ([10.0, 10.1, 10.2], {"p95_us": 50.0}, "p95 5.0x the median"),
])
def test_a_lead_on_noisy_numbers_is_not_called_clear(cli, tmp_path, fast, over, why):
    from attnbench.analysis.winners import best_per_workload

    rows = _repeats("fast", fast, **over) + _repeats("slow", [30.0, 30.1, 30.2])
    import pandas as pd

    (r,) = best_per_workload(pd.DataFrame(rows), []).to_dict(orient="records")
    assert r["separated"] and not r["clear"] and why in r["noise"], r["noise"]
    db = tmp_path / "n.sqlite"
    s = Store(db)
    s.insert_many(rows)
    s.close()
    out = " ".join(cli("show", "--db", db).out.split())
    assert "noisy" in out and why in out
    quiet = _repeats("fast", [10.0, 10.1, 10.2]) + _repeats("slow", [30.0, 30.1, 30.2])
    (r,) = best_per_workload(pd.DataFrame(quiet), []).to_dict(orient="records")
    assert r["clear"] and r["noise"] is None
