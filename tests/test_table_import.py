"""`attnbench import --format table`: other tools' results become valid attempt rows, or nothing is written."""
from __future__ import annotations

import json

import pytest

from attnbench.store.db import Store
from conftest import rows_of
from table_rows import rows_for, store, write


def test_rows_become_ok_attempts_with_their_samples_or_their_median(cli, tmp_path):
    rows = rows_for({"w1": {"fa": [10.0, 11.0]}}) + rows_for({"w2": {"fa": [12.0]}}, samples=1)
    db = store(cli, tmp_path, "t", rows)
    got = rows_of(db)
    assert len(got) == 3 and {r["status"] for r in got} == {"OK"}
    one = [r for r in got if r["kv_len"] == 2048][0]
    assert json.loads(one["samples_us"]) == [12.0] and one["median_us"] == 12.0
    assert one["run_id"] == "import-t" and one["dispatch_status"] == "unprobed" and one["timer"] == "imported"
    assert one["err_ratio"] is None and one["cosine"] is None and one["wall_s"] is None  # not measured
    many = [r for r in got if r["kv_len"] == 1024 and r["repeat"] == 1][0]
    assert len(json.loads(many["samples_us"])) == 5 and many["median_us"] == pytest.approx(11.0)
    assert one["q_len"] == 2048 and one["kv_heads"] == 8 and one["head_dim_v"] == 64 and one["causal"] == 1
    s = Store(db, create=False)
    (run,) = [r for r in s.runs() if r["run_id"] == "import-t"]
    s.close()
    assert run["provenance"]["format"] == "table"
    res = cli("import", "--format", "table", tmp_path / "t.csv", "--db", db)  # the same file again
    assert res.rc == 0 and "imported 0 new attempts (3 already present)" in res.err


def test_attempt_keys_are_derived_from_the_fields(cli, tmp_path):
    a = rows_of(store(cli, tmp_path, "a", rows_for({"w1": {"fa": [10.0]}})))
    b = rows_of(store(cli, tmp_path, "b", rows_for({"w1": {"fa": [10.0]}})))
    c = rows_of(store(cli, tmp_path, "c", rows_for({"w1": {"fa": [10.0]}}, torch_version="2.13.0")))
    assert a[0]["attempt_key"] == b[0]["attempt_key"] != c[0]["attempt_key"]


def test_decode_takes_seqlen_as_the_cache_length(cli, tmp_path):
    rows = [{"device": "G", "backend": "fa", "mode": "decode", "batch": 8, "seqlen": "4k", "q_heads": 32,
             "kv_heads": 8, "head_dim": 128, "dtype": "bf16", "launch": "graph", "median_us": 20.0}]
    (r,) = rows_of(store(cli, tmp_path, "d", rows))
    assert (r["q_len"], r["kv_len"], r["launch"], r["decode_append"]) == (1, 4096, "graph", "excluded")


GOOD = {"device": "G", "backend": "fa", "mode": "prefill", "batch": 1, "seqlen": 64, "q_heads": 2, "head_dim": 16,
        "dtype": "bf16", "median_us": 5.0}


@pytest.mark.parametrize("change,text", [
    ({"median_us": None}, "no column median_us"),
    ({"color": "red"}, "unknown column 'color'"),
    ({"mode": "prefil"}, "row 1, column mode: unknown mode 'prefil'"),
    ({"q_heads": 3, "kv_heads": 2}, "not a multiple"),
    ({"median_us": -1}, "column median_us: must be a positive time"),
    ({"samples_us": "1 2 3"}, "is not the median of samples_us"),
    ({"role": "judge"}, "role must be"),
])
def test_a_bad_row_is_one_line_exit_2_and_nothing_written(cli, tmp_path, change, text):
    row = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
    path = write(tmp_path / "bad.csv", [row])
    res = cli("import", "--format", "table", path, "--db", tmp_path / "s.sqlite")
    assert res.rc == 2 and text in res.err and len(res.err.strip().splitlines()) == 1, res.err
    assert not (tmp_path / "s.sqlite").exists()


def test_two_rows_of_one_repeat_are_refused(cli, tmp_path):
    path = write(tmp_path / "dup.csv", [GOOD, GOOD])
    res = cli("import", "--format", "table", path, "--db", tmp_path / "s.sqlite")
    assert res.rc == 2 and "rows 1 and 2 are the same" in res.err


def test_table_is_for_attempts_only(cli, tmp_path):
    path = write(tmp_path / "t.csv", [GOOD])
    res = cli("import", "--format", "table", "--table", "runs", path, "--db", tmp_path / "s.sqlite")
    assert res.rc == 2 and "--table runs does not apply" in res.err
