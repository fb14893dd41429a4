"""Imports are validated to the meaning, not only the syntax (store/meaning.py): a row of valid JSON that no
attnbench could have written is one line naming its row and column, exit 2, and the store unchanged."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from attnbench.store.db import Store
from conftest import digest, make_row, rows_of
from table_rows import write

MS_SAMPLES = [1000.0 + j for j in range(12)]  # milliseconds' worth of µs


@pytest.fixture
def db(tmp_path):
    """A store that already holds rows: a refused import must leave it byte for byte."""
    p = tmp_path / "s.sqlite"
    s = Store(p)
    s.insert_many([make_row(i, attempt_key=f"held{i}") for i in range(3)])
    s.close()
    return p


def refused(res, where: str) -> None:
    assert res.rc == 2, (res.rc, res.err)
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("attnbench: error: ") and where in lines[0], res.err


BAD = [  # (change to an OK row, the column the error must name)
    ({"samples_us": {"a": 1}}, "samples_us"),
    ({"samples_us": ["10", "11"]}, "samples_us"),
    ({"samples_us": [10.0, -1.0]}, "samples_us"),
    ({"median_us": -5.0}, "median_us"),
    ({"median_us": 0.5, "samples_us": MS_SAMPLES, "p95_us": 1011.0}, "median_us"),
    ({"p95_us": 1e9}, "p95_us"),
    ({"mode": "training"}, "mode"),  # under the row's old workload_key
    ({"dtype": "fp64"}, "dtype"),
    ({"batch": -4}, "batch"),
    ({"batch": 1.5}, "batch"),
    ({"kv_len": 4096}, "workload_key"),  # a valid workload, but not the one the key names
    ({"kernel_calls_us": {"x": 1}}, "kernel_calls_us"),
    ({"phases_s": [1, 2]}, "phases_s"),
    ({"converged": 7}, "converged"),
    ({"wall_s": -1.0}, "wall_s"),
    ({"repeat": -1}, "repeat"),
]


@pytest.mark.parametrize("change,column", BAD, ids=[c for _, c in BAD])
def test_a_jsonl_row_that_means_nothing_is_refused(cli, tmp_path, db, change, column):
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(make_row(5)) + "\n" + json.dumps(make_row(6, **change)) + "\n")
    before = digest(db)
    refused(cli("import", src, "--db", db), f"row 2, column {column}:")
    assert digest(db) == before  # all or nothing: the good first row was not written either


@pytest.mark.parametrize("fmt", ["csv", "parquet", "jsonl.gz"])
@pytest.mark.parametrize("change,column", [({"samples_us": {"a": 1}}, "samples_us"), ({"median_us": -5.0}, "median_us"),
                                           ({"dtype": "fp64"}, "dtype")])
def test_every_export_format_is_checked_alike(cli, tmp_path, db, fmt, change, column):
    good = tmp_path / "good.sqlite"
    s = Store(good)
    s.insert_many([make_row(5), make_row(6)])
    s.close()
    out = tmp_path / f"x.{fmt}"
    assert cli("export", "--db", good, "--out", out).rc == 0
    if fmt == "jsonl.gz":
        import gzip

        rows = [json.loads(x) for x in gzip.open(out, "rt")]
        rows[1].update(change)
        with gzip.open(out, "wt") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
    else:
        frame = pd.read_csv(out) if fmt == "csv" else pd.read_parquet(out)
        for k, v in change.items():
            frame[k] = frame[k].astype(object)
            frame.at[1, k] = json.dumps(v) if isinstance(v, (dict, list)) else v
        frame.to_csv(out, index=False) if fmt == "csv" else frame.to_parquet(out, index=False)
    before = digest(db)
    refused(cli("import", out, "--db", db), f"row 2, column {column}:")
    assert digest(db) == before


def test_a_reader_of_an_export_refuses_it_before_it_crashes(cli, tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(make_row(5, samples_us={"a": 1})) + "\n")
    base = tmp_path / "base.jsonl"
    base.write_text(src.read_text())
    for argv in (["analyze", src], ["compare", base, src]):
        refused(cli(*argv), "row 1, column samples_us:")


def test_what_a_store_of_checked_rows_shows_is_a_time(cli, tmp_path):
    """The old failure: an OK row of -5 µs was imported and crowned by show."""
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(make_row(5, median_us=-5.0)) + "\n")
    refused(cli("import", src, "--db", tmp_path / "new.sqlite"), "column median_us")
    assert not (tmp_path / "new.sqlite").exists()


def test_model_rows_and_runs_are_checked_too(cli, tmp_path):
    from test_model_rows_io import model_store

    src = model_store(tmp_path / "m.sqlite")
    out = tmp_path / "m.jsonl"
    assert cli("export", "--db", src, "--table", "model_rows", "--out", out).rc == 0
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    lines[0]["samples_us"] = {"a": 1}
    out.write_text("".join(json.dumps(r) + "\n" for r in lines))
    refused(cli("import", out, "--db", tmp_path / "d.sqlite", "--table", "model_rows"), "row 1, column samples_us")
    runs = tmp_path / "r.jsonl"
    runs.write_text(json.dumps({"run_id": "r", "tag": "t", "provenance": [1, 2]}) + "\n")
    refused(cli("import", runs, "--db", tmp_path / "d.sqlite", "--table", "runs"), "row 1, column provenance")
    assert not (tmp_path / "d.sqlite").exists()


def test_a_results_table_is_checked_by_the_same_rules(cli, tmp_path):
    row = {"device": "G", "backend": "fa", "mode": "prefill", "batch": -4, "seqlen": 64, "q_heads": 2,
           "head_dim": 16, "dtype": "bf16", "median_us": 5.0}
    refused(cli("import", "--format", "table", write(tmp_path / "t.csv", [row]), "--db", tmp_path / "s.sqlite"),
            "row 1, column batch")
    row.update(batch=1, samples_us="[1000, 1001, 1002]", median_us=0.5)  # µs against ms samples
    refused(cli("import", "--format", "table", write(tmp_path / "t.csv", [row]), "--db", tmp_path / "s.sqlite"),
            "row 1, column median_us")
    assert not (tmp_path / "s.sqlite").exists()


def test_good_rows_of_every_status_still_import(cli, tmp_path, db):
    from test_store import sample_rows

    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in sample_rows()))
    res = cli("import", src, "--db", db)
    assert res.rc == 0, res.err
    assert len(rows_of(db)) == 3 + len(sample_rows())
