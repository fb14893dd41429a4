"""Output where people read it: an 80-column CI log, a file, a reader scanning failures: run's progress in a
log comes as a plain line at a steady interval, analyze's tables fit 80 columns with whole store names, show
--failures is grouped by reason, the host's load is shown where noisy results are explained."""
from __future__ import annotations

import io
import json
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console

from attnbench.cli import console
from attnbench.cli import progress
from attnbench.cli.progress import SweepProgress
from attnbench.store.db import Store
from conftest import make_row
from table_rows import rows_for, store

RESULTS = Path(__file__).resolve().parents[1] / "results" / "h200"
PAIR = [RESULTS / f"pair-2026-11-30-cuda{i}.jsonl.gz" for i in (0, 1)]


def at_width(monkeypatch, width: int) -> None:
    monkeypatch.setattr(console, "out", Console(width=width))


def test_analyze_of_the_committed_stores_fits_80_columns_with_store_names_whole(cli, monkeypatch):
    at_width(monkeypatch, 80)
    res = cli("analyze", *PAIR)
    assert res.rc == 0, res.err
    lines = res.out.splitlines()
    assert max(len(x) for x in lines) <= 80
    labels = ["pair-2026-11-30-cuda0", "pair-2026-11-30-cuda1"]
    # every mention of a store is its whole name (folded cells left pieces such as "pair-2026" / "-11-30-cu")
    assert res.out.count("pair-20") == sum(res.out.count(x) for x in labels), res.out
    assert "A = pair-2026-11-30-cuda0:" in res.out and "B = pair-2026-11-30-cuda1:" in res.out
    rows = [x.split() for x in lines if x.split()[:2] in (["A", "all"], ["A", "B"])]
    assert rows, res.out  # the tables name the stores by letter


def test_analyze_keeps_whole_names_where_they_fit(cli, monkeypatch, tmp_path):
    at_width(monkeypatch, 200)
    a = store(cli, tmp_path, "a-store", rows_for({"w1": {"x": [10, 10, 10], "y": [20, 20, 20]}}))
    b = store(cli, tmp_path, "b-store", rows_for({"w1": {"x": [11, 11, 11], "y": [20, 20, 20]}}))
    out = cli("analyze", a, b).out
    assert " a-store " in out and " = a-store" not in out  # no letters on a wide terminal


@pytest.fixture
def failures(tmp_path):
    """60 attempts refused with one sentence that holds each workload's sizes, 2 of another kind."""
    db = tmp_path / "f.sqlite"
    s = Store(db)
    s.start_run("run-a", "default", "g", "attnbench run", "CPU test", {"device": {"type": "cpu"}})
    rows = [make_row(i, backend=f"be{i % 3}", attempt_key=f"u{i}", status="UNSUPPORTED", samples_us=None,
                     median_us=None, p95_us=None, reason=f"refused: Query.sizes(): [1, {i}, 64, 32] too long")
            for i in range(60)]
    rows += [make_row(i, attempt_key=f"c{i}", status="CRASH", reason=f"worker died (signal {i})", samples_us=None,
                      median_us=None, p95_us=None) for i in range(2)]
    s.insert_many(rows + [make_row(99, attempt_key="ok")])
    s.finish_run("run-a")
    s.close()
    return db


def test_show_failures_groups_attempts_by_status_and_reason(cli, monkeypatch, failures):
    at_width(monkeypatch, 80)
    res = cli("show", "--db", failures, "--failures")
    assert res.rc == 0, res.err
    assert len(res.out.splitlines()) < 25, res.out  # was one row (and its folded reason) per attempt
    out = " ".join(res.out.split())
    assert "62, in 2 group(s)" in out and "UNSUPPORTED be0 20, be1 20, be2 20" in out, out
    assert "refused: Query.sizes(): [1, 0, 64, 32] too long" in out  # the first reason, as stored
    assert "(+57 more workloads)" in out and "CRASH" in out
    every = json.loads(cli("show", "--db", failures, "--failures", "--format", "json").out)
    assert len(every) == 62  # the data formats keep one row per attempt


@pytest.fixture
def loaded(tmp_path):
    """A store whose run started on a loaded 2-CPU host, with a noisy lead (repeats disagree)."""
    db = tmp_path / "loaded.sqlite"
    s = Store(db)
    s.start_run("run-a", "default", "g", "attnbench run", "CPU test",
                {"device": {"type": "cpu", "name": "CPU test"}, "host_load_1_5_15": [3.5, 2.0, 1.0],
                 "host_cpus": 2})
    rows = []
    for backend, medians in (("fast", [10.0, 14.0, 10.0]), ("slow", [20.0, 20.0, 20.0])):
        for r, m in enumerate(medians):
            rows.append(make_row(0, backend=backend, attempt_key=f"{backend}{r}", repeat=r, median_us=m,
                                 p95_us=m * 1.01, samples_us=[m * (1 + 0.001 * j) for j in range(12)]))
    s.insert_many(rows)
    s.finish_run("run-a")
    s.close()
    return db


def test_the_host_load_is_shown_where_noisy_results_are_explained(cli, monkeypatch, loaded):
    at_width(monkeypatch, 100)
    out = " ".join(cli("show", "--db", loaded).out.split())
    assert "noisy: 1 lead(s)" in out and "host load 3.5 on 2 CPUs at start" in out, out
    out = " ".join(cli("analyze", loaded).out.split())
    assert "load 3.5 on 2 CPUs at start" in out, out
    sources = json.loads(_analyze_json(cli, loaded))["sources"]
    assert sources[0]["host_load"] == [3.5, 3.5] and sources[0]["host_cpu_count"] == 2


def _analyze_json(cli, db) -> str:
    out = Path(db).with_suffix(".json")
    assert cli("analyze", db, "--json", out).rc == 0
    return out.read_text()


def _attempt(backend: str):
    w = SimpleNamespace(mode="decode", batch=8, kv_len=4096, launch="graph")
    return SimpleNamespace(backend=SimpleNamespace(name=backend), workload=w, repeat=0)


def test_in_a_log_run_prints_a_progress_line_at_a_steady_interval(monkeypatch):
    """A live bar shows nothing in a file until the run ends; a log gets a plain line every interval."""
    monkeypatch.setenv("ATTNBENCH_PROGRESS_S", "0.05")
    monkeypatch.setattr(progress, "STARTING_QUIET_S", 0.01)
    out = io.StringIO()
    con = Console(file=out, width=80, force_terminal=False)
    with SweepProgress(con) as p:
        p.starting("cpu")
        deadline = time.monotonic() + 20
        while "starting workers" not in out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.02)  # a start that takes a while is said
        p.begin(total=10, resumed=2, retried=0)
        p.attempt(_attempt("flex"))
        p.row({"status": "OK"})
        deadline = time.monotonic() + 20  # a loaded host may be slow to run the ticker: wait, never race
        while out.getvalue().count("progress: 3/10") < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        during = out.getvalue()  # before the run ends
    assert "starting workers on cpu" in during
    assert during.count("progress: 3/10 attempts (30%)") >= 2, during
    line = [x for x in during.splitlines() if x.startswith("progress: 3/10")][0]
    assert "elapsed, ETA -:--:--; OK 1 resumed-past 2; now: flex decode B8 N4096 graph r0" in line, line
    assert "[" not in during  # no markup, no bar


def test_in_a_log_a_start_that_ends_at_once_prints_no_starting_line(monkeypatch):
    """A start that fails (or ends) within the quiet spell leaves its error as the only line: the pending
    'starting workers' line is dropped, not printed late."""
    assert progress.STARTING_QUIET_S >= 1  # a real start takes seconds; a refusal comes sooner
    monkeypatch.setattr(progress, "STARTING_QUIET_S", 0.3)
    out = io.StringIO()
    with SweepProgress(Console(file=out, width=80, force_terminal=False)) as p:
        p.starting("cpu")
    time.sleep(0.8)
    assert out.getvalue() == ""


@pytest.mark.parametrize("value,every", [("abc", "a progress line every 30 s"), ("0", None)])
def test_the_interval_is_set_by_the_environment(monkeypatch, value, every):
    monkeypatch.setenv("ATTNBENCH_PROGRESS_S", value)
    out = io.StringIO()
    with SweepProgress(Console(file=out, width=80, force_terminal=False)) as p:
        p.begin(total=2, resumed=0, retried=0)
        p.row({"status": "OK"})
    text = out.getvalue()
    if every:
        assert "ATTNBENCH_PROGRESS_S='abc' is not a number of seconds" in text and every in text
    else:
        assert "every" not in text and text.count("progress:") == 2  # at the start and at the end only


def _model_store(cli, tmp_path, noop_over_step: float) -> Path:
    """The committed llama3.1-8b prefill row of sdpa-flash, its no-op step made `noop_over_step` x the step."""
    row = json.loads((RESULTS / "model-llama3.1-8b-2026-11-30.jsonl").read_text().splitlines()[0])
    assert row["status"] == "OK" and row["step"] == "prefill"
    row["noop_us"] = row["median_us"] * noop_over_step
    row["share_diff"] = (row["median_us"] - row["noop_us"]) / row["median_us"]
    path = tmp_path / "m.jsonl"
    path.write_text(json.dumps(row) + "\n")
    db = tmp_path / "m.sqlite"
    res = cli("import", path, "--table", "model_rows", "--db", db)
    assert res.rc == 0, res.err
    return db


def test_model_says_a_share_below_noise_instead_of_a_negative_percent(cli, monkeypatch, tmp_path):
    at_width(monkeypatch, 80)
    res = cli("model", "--db", _model_store(cli, tmp_path, 1.3), "--show")
    assert res.rc == 0, res.err
    out = " ".join(res.out.split())
    assert "19%/<noise" in out and "-30%" not in out, out  # was "19%/-30%", said without a word
    assert "attention's share by difference is not measurable there" in out


def test_model_keeps_a_share_above_noise(cli, monkeypatch, tmp_path):
    at_width(monkeypatch, 80)
    out = " ".join(cli("model", "--db", _model_store(cli, tmp_path, 0.8), "--show").out.split())
    assert "19%/20%" in out and "<noise" not in out, out  # 7.3 ms of difference against a spread of ~0.3 ms


def test_the_reports_ceilings_table_prints_a_cpus_small_ceilings(cli, tmp_path):
    db = tmp_path / "cpu.sqlite"
    s = Store(db)
    s.start_run("run-a", "default", "g", "attnbench run", "CPU test",
                {"device": {"type": "cpu", "name": "CPU test"},
                 "ceilings": {"copy_gbps": 12.34, "matmul_tflops_bf16": 0.0523, "matmul_tflops_fp32": 0.4}})
    s.insert_many([make_row(0), make_row(1, backend="be1", attempt_key="k1")])
    s.finish_run("run-a")
    s.close()
    res = cli("report", db, "--out", tmp_path / "site")
    assert res.rc == 0, res.err
    index = (tmp_path / "site" / "index.html").read_text()
    # were "0" TFLOP/s
    assert 'data-v="0.0523">0.0523<' in index and 'data-v="0.4">0.4<' in index and ">12.3<" in index


@pytest.mark.parametrize("noop_over_step,shown", [(1.3, "<noise"), (0.8, None)])
def test_the_reports_model_page_says_a_share_below_noise(noop_over_step, shown):
    """The site's model table says what the terminal says: '<noise' for a share by difference within noise
    (it showed -30%), the stored share otherwise."""
    from attnbench.report.html.pages.model import _row

    row = json.loads((RESULTS / "model-llama3.1-8b-2026-11-30.jsonl").read_text().splitlines()[0])
    row["noop_us"] = row["median_us"] * noop_over_step
    row["share_diff"] = (row["median_us"] - row["noop_us"]) / row["median_us"]
    assert _row(row)["share_diff"] == (shown or row["share_diff"])
