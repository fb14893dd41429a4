"""Counters as readers see them (review of issue 39): sources.read joins the counters table onto the attempts once
(stores, and exports with a counters export beside them), analyze's mechanism section takes winner and runner-up
from the contests, and explain validates its device, retries rows that say why counters were not read, never lets
such a row replace counters, and counts what it did per reason."""
from __future__ import annotations

import sqlite3

from attnbench.measure import counters
from attnbench.store import counters as store_counters

from conftest import finished_store, make_row


def _store(path, rows, read: dict):
    """A store of one run holding `rows`; the attempts named in `read` (key -> tensor %) get counters."""
    from attnbench.store.db import Store

    s = Store(path)
    s.start_run("run-a", "default", "g", "attnbench run", "CPU test", {"ceilings": {}})
    s.insert_many(rows)
    for row in rows:
        if row["attempt_key"] in read:
            got = counters.collect({"workload": {}}, "standard", counters.FAKES["fake"])
            got["tensor_pct"] = read[row["attempt_key"]]
            store_counters.insert(s.con, store_counters.row_of(row, got, "run"))
    s.finish_run("run-a")
    s.close()
    return path


def _timed(key: str, backend: str, us: float, **over) -> dict:
    return make_row(0, attempt_key=key, backend=backend, samples_us=[us] * 12, median_us=us, p95_us=us, **over)


def test_a_winner_without_counters_is_still_the_winner(tmp_path):
    """The fastest backend has no counters, the next two have: the lead is the winner's over the runner-up (as
    analyze's winners say), and it says the winner has none; before, the runner-up was printed as the winner."""
    from attnbench.analysis.analyze import compute
    from attnbench.report.mechanism_text import lead_lines
    from attnbench.store.sources import load

    db = _store(tmp_path / "s.sqlite", [_timed("a", "fastest", 10.0), _timed("b", "second", 18.0),
                                        _timed("c", "third", 30.0)], {"b": 76.0, "c": 57.0})
    data = load([str(db)])
    a = compute(data.attempts, data.runs, paths=data.paths)
    (lead,) = a.mechanism.leads
    assert (lead.winner, lead.runner_up, lead.ratio) == ("fastest", "second", 1.8)
    assert lead.winner_bound is None and lead.runner_up_bound == "tensor" and "winner has no counters" in lead.why
    assert "fastest 1.80x ahead of second" in lead_lines(a)[0] and "(- vs tensor)" in lead_lines(a)[0]
    (won,) = a.winners.frame.to_dict(orient="records")
    assert (won["backend"], won["runner_up"]) == (lead.winner, lead.runner_up)


def test_a_lead_with_counters_on_both_is_explained_and_one_without_any_is_left_out(tmp_path):
    from attnbench.analysis.analyze import compute
    from attnbench.store.sources import load

    w1 = dict(q_len=128, kv_len=128)
    rows = [_timed("a", "wgmma", 10.0), _timed("b", "mma", 18.0),
            _timed("c", "wgmma", 10.0, **w1, workload_key="other"), _timed("d", "mma", 18.0, **w1,
                                                                           workload_key="other")]
    data = load([str(_store(tmp_path / "s.sqlite", rows, {"a": 76.0, "b": 57.0}))])
    (lead,) = compute(data.attempts, data.runs).mechanism.leads  # the second workload has no counters
    assert (lead.winner, lead.why, lead.winner_bound, lead.runner_up_bound) == (
        "wgmma", "tensor pipe 76 % vs 57 %", "tensor", "latency")


def test_sources_read_carries_the_counters_and_sections_need_no_store_path(cli, tmp_path):
    """One reader: the Dataset's attempts carry the counters columns (NaN on rows without); analyze reads them
    without being given the stores' paths. An export with the counters export beside it (NAME.counters.jsonl)
    reads the same; one without has no counters columns."""
    from attnbench.analysis.analyze import compute
    from attnbench.store.sources import load

    db = _store(tmp_path / "s.sqlite", [_timed("a", "wgmma", 10.0), _timed("b", "mma", 18.0)], {"a": 76.0})
    data = load([str(db)])
    got = data.attempts.set_index("attempt_key")
    assert got.loc["a", "bound"] == "tensor" and got.loc["a", "tensor_pct"] == 76.0 and got.isna().loc["b", "bound"]
    assert compute(data.attempts, data.runs).mechanism.classes  # no paths given: no file read by a section
    plain = load([str(finished_store(tmp_path / "plain.sqlite", n=2))]).attempts
    assert "bound" not in plain.columns
    out = tmp_path / "x.jsonl"
    assert cli("export", "--db", str(db), "--out", str(out)).rc == 0
    assert "bound" not in load([str(out)]).attempts.columns
    assert cli("export", "--db", str(db), "--table", "counters", "--out", str(tmp_path / "x.counters.jsonl")).rc == 0
    again = load([str(out)]).attempts.set_index("attempt_key")
    assert again.loc["a", "bound"] == "tensor" and again.isna().loc["b", "bound"]


def test_explain_refuses_a_device_this_host_lacks_before_writing(cli, tmp_path, monkeypatch):
    import torch

    db = finished_store(tmp_path / "s.sqlite", n=2)
    monkeypatch.setenv(counters.COLLECTOR_ENV, "fake")
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    r = cli("explain", str(db), "--device", f"cuda:{n}")
    assert r.rc == 2 and len(r.err.strip().splitlines()) == 1 and "cuda" in r.err
    assert store_counters.rows(sqlite3.connect(db)) == []


def test_explain_retries_unread_rows_and_never_replaces_counters_with_a_note(cli, tmp_path, monkeypatch):
    db = finished_store(tmp_path / "s.sqlite", n=2)
    con = sqlite3.connect(db)
    notes = lambda: {r["attempt_key"]: r["note"] for r in store_counters.rows(con)}  # noqa: E731
    monkeypatch.setenv(counters.COLLECTOR_ENV, "fake-not-permitted")
    r = cli("explain", str(db))
    assert r.rc == 0 and "2 replayed without counters" in r.err and "0 attempt(s) explained" in r.err
    assert all(n and "ERR_NVGPUCTRPERM" in n for n in notes().values())
    monkeypatch.setenv(counters.COLLECTOR_ENV, "fake")
    r = cli("explain", str(db))  # the rows that say why are not "done": read now
    assert r.rc == 0 and "2 attempt(s) explained with counters" in r.err
    assert notes() == {"key0000": None, "key0001": None}
    monkeypatch.setenv(counters.COLLECTOR_ENV, "fake-not-permitted")
    r = cli("explain", str(db), "--again")  # cannot read them now: the counters read before stay
    assert r.rc == 0 and "2 replayed without counters, their counters read before kept" in r.err
    assert notes() == {"key0000": None, "key0001": None}


def test_explain_counts_each_reason_apart(cli, tmp_path, monkeypatch):
    from attnbench.cli.commands import explain

    db = finished_store(tmp_path / "s.sqlite", n=4)
    monkeypatch.setenv(counters.COLLECTOR_ENV, "fake")
    assert cli("explain", str(db), "--where", "causal=false", "--limit", "1").rc == 0  # key0000
    r = cli("explain", str(db), "--limit", "1")
    assert "1 attempt(s) explained with counters; 1 already had counters" in r.err and "2 left by --limit" in r.err
    monkeypatch.setattr(explain, "_gpu_name", lambda device: "NVIDIA H200")
    r = cli("explain", str(db))
    assert "2 already had counters" in r.err and "2 ran on another GPU model: skipped" in r.err
