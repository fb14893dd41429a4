"""The one loader (store/sources.py): a store and its export read alike, under one label, by every command."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from attnbench.store import sources
from attnbench.store.db import Store, StoreError
from conftest import make_row


@pytest.fixture
def pair(cli, tmp_path):
    """quick.sqlite (three backends over three workloads, two repeats each), and its export quick.jsonl.gz with
    the runs export beside it, in another folder."""
    db = tmp_path / "quick.sqlite"
    s = Store(db)
    s.start_run("run-a", "default", "tiny", "attnbench run", "CPU test", {"torch": "2.13.0"})
    s.insert_many([make_row(i % 3, attempt_key=f"k{i}", backend=f"be{i // 6}", repeat=(i // 3) % 2)
                   for i in range(18)])
    s.finish_run("run-a")
    s.close()
    (tmp_path / "exp").mkdir()
    exp = tmp_path / "exp" / "quick.jsonl.gz"
    assert cli("export", "--db", db, "--out", exp).rc == 0
    assert cli("export", "--db", db, "--table", "runs", "--out", tmp_path / "exp" / "quick.runs.jsonl").rc == 0
    return db, exp


def _sorted(df: pd.DataFrame) -> pd.DataFrame:
    return df.sort_values("attempt_key").reset_index(drop=True)


def test_a_store_and_its_export_give_one_dataset_under_one_label(pair):
    db, exp = pair
    a, b = sources.load([str(db)]), sources.load([str(exp)])
    assert a.labels == b.labels == ["quick"]  # the name before the first dot, for both
    assert len(a.attempts) == 18 and set(a.attempts["label"]) == {"quick"}
    pd.testing.assert_frame_equal(_sorted(a.attempts), _sorted(b.attempts))
    assert [r["run_id"] for r in a.runs["quick"]] == [r["run_id"] for r in b.runs["quick"]]
    assert a.runs["quick"][0]["grid"] == b.runs["quick"][0]["grid"] != "imported"  # the runs export was read
    assert a.paths == {"quick": db} and b.paths == {"quick": exp}
    assert a.models.empty and "label" in a.models.columns


def test_analyze_reads_an_export_as_it_reads_the_store(cli, tmp_path, pair):
    db, exp = pair
    out = {}
    for name, src in (("store", db), ("export", exp)):
        res = cli("analyze", src, "--json", tmp_path / f"{name}.json")
        assert res.rc == 0, res.err
        out[name] = json.loads((tmp_path / f"{name}.json").read_text())
        out[name]["sources"][0].pop("path")
    assert out["store"] == out["export"] and out["store"]["sources"][0]["label"] == "quick"
    assert cli("show", "--db", exp, "--format", "json").out == cli("show", "--db", db, "--format", "json").out


def test_labels_follow_one_rule_and_clash_as_an_error(tmp_path, pair):
    db, exp = pair
    assert [s.label for s in sources.parse(["q=" + str(db), str(tmp_path / "quick.v2.sqlite")])] == ["q", "quick"]
    with pytest.raises(StoreError, match="two stores are labelled 'quick'"):
        sources.parse([str(db), str(exp)])  # quick.sqlite and quick.jsonl.gz: one label
    assert sources.load(["s=" + str(db), "e=" + str(exp)]).labels == ["s", "e"]


@pytest.mark.parametrize("case,text", [("missing", "store not found"), ("directory", "is a directory"),
                                       ("unknown", "neither an attnbench store nor an export"),
                                       ("foreign", "is not an attnbench store"), ("bad", "cannot read")])
def test_missing_or_foreign_files_are_one_store_error(tmp_path, cli, case, text):
    import sqlite3

    (tmp_path / "dir").mkdir()
    (tmp_path / "afile").write_text("x")
    (tmp_path / "bad.jsonl").write_text("{not json\n")
    sqlite3.connect(tmp_path / "theirs.db").execute("CREATE TABLE t (x)").connection.close()
    path = {"missing": "absent.sqlite", "directory": "dir", "unknown": "afile", "foreign": "theirs.db",
            "bad": "bad.jsonl"}[case]
    with pytest.raises(StoreError, match=text):
        sources.load([str(tmp_path / path)])
    for argv in (["analyze", tmp_path / path], ["show", "--db", tmp_path / path]):
        res = cli(*argv)
        assert res.rc == 2 and text in res.err and len(res.err.strip().splitlines()) == 1, res.err
