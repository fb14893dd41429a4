"""attnbench show as a reader meets it: compact below 160 columns, data formats, filters, the full
ranking and the failures, on a store of known rows."""
from __future__ import annotations

import csv
import io
import json

import pytest
from rich.console import Console

from attnbench.cli import console
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
    monkeypatch.setattr(console, "out", Console(width=width))
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


def test_status_shows_how_several_devices_shared_the_work(cli, monkeypatch, tmp_path, store):
    """Per device that ran attempts: attempts, OK rows, their wall and its share; rows planned out of
    a sharded plan (no device) are left out; one device gets no such table."""
    db = tmp_path / "two.sqlite"
    s = Store(db)
    s.start_run("run-a", "default", "g", "attnbench run --devices 0,1", "NVIDIA H200",
                {"device": {"type": "cuda", "name": "NVIDIA H200"}})
    rows = [make_row(i, attempt_key=f"k{i}", device_name="NVIDIA H200", device_index=i % 2,
                     device_uuid=f"GPU-{i % 2}aaaaaaaaaaaaaaaa", wall_s=1.0 + 2.0 * (i % 2)) for i in range(6)]
    rows[2].update(status="CRASH", reason="killed", samples_us=None, median_us=None, p95_us=None)
    rows.append(make_row(7, attempt_key="k7", status="UNSUPPORTED", reason="planned out", samples_us=None,
                         median_us=None, p95_us=None, device_name="NVIDIA H200", device_index=None, wall_s=None))
    s.insert_many(rows)
    s.finish_run("run-a")
    s.close()
    res = run_show(cli, monkeypatch, 80, "--db", str(db), "--status")
    assert res.rc == 0, res.err
    assert max(len(line) for line in res.out.splitlines()) <= 80
    table = res.out[res.out.index("Attempts per device"):res.out.index("Where the sweep's wall went")]
    cells = [[c.strip() for c in line.split("│")[1:-1]] for line in table.splitlines() if line.startswith("│")]
    assert cells == [["0 NVIDIA H200 GPU-0aaaaaaa…", "3", "2", "3.0", "25%"],
                     ["1 NVIDIA H200 GPU-1aaaaaaa…", "3", "3", "9.0", "75%"]], table
    one = run_show(cli, monkeypatch, 80, "--db", str(store), "--status")
    assert "Attempts per backend and status" in one.out and "Attempts per device" not in one.out
