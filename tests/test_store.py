"""SQLite store (store/db.py), schema (store/schema.py), export and import (store/io.py)."""
from __future__ import annotations

import json
import sqlite3

import pandas as pd
import pytest

from attnbench.store import io
from attnbench.store.db import Store, StoreError
from attnbench.store.schema import (ATTEMPT_COLUMNS, COLUMN_NAMES, JSON_COLUMNS, RUN_COLUMNS, SCHEMA_VERSION,
                                    markdown)
from attnbench.workloads import Workload
from conftest import make_row


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "s.sqlite")
    yield s
    s.close()


def sample_rows() -> list[dict]:
    rows = [make_row(i) for i in range(6)]
    rows.append(make_row(6, status="INCORRECT", reason="o: error 0.1 is 5x the same-dtype reference's",
                         err_ratio=5.25, samples_us=None, median_us=None, p95_us=None))
    rows.append(make_row(7, status="UNSUPPORTED", reason="fake: refuses", max_abs_err=None, rmse=None, cosine=None,
                         err_ratio=None, ref_err=None, check_detail=None, dispatch_status=None,
                         dispatch_kernels=None, dispatch_families=None, calls_per_sample=None, converged=None,
                         timer=None, phases_s={}, samples_us=None, median_us=None, p95_us=None, wall_s=0.0))
    decode = Workload(mode="decode", batch=1, q_len=1, kv_len=576, q_heads=4, kv_heads=2, head_dim=32, head_dim_v=32)
    rows.append(make_row(8, mode="decode", q_len=1, decode_append="excluded", device_index=0, peak_mem_bytes=123456,
                         run_id="run-b", tag="other", sm_clock_mhz=1980.0, throttle="none", bytes=None,
                         workload_key=decode.key()))  # the key of its fields, as import checks
    return rows


def test_schema_version_and_tables(store):
    con = store.con
    assert con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    cols = [r[1] for r in con.execute("PRAGMA table_info(attempts)")]
    assert cols == COLUMN_NAMES
    assert [r[1] for r in con.execute("PRAGMA table_info(runs)")] == [c for c, _, _ in RUN_COLUMNS]
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_reopening_keeps_rows(tmp_path):
    s = Store(tmp_path / "s.sqlite")
    s.insert(make_row(0))
    s.close()
    s = Store(tmp_path / "s.sqlite", create=False)
    assert s.count() == 1
    s.close()


def test_other_schema_version_is_refused(tmp_path):
    p = tmp_path / "s.sqlite"
    Store(p).close()
    con = sqlite3.connect(p)
    con.execute("UPDATE meta SET value='999' WHERE key='schema_version'")
    con.commit()
    con.close()
    with pytest.raises(StoreError, match="schema version 999"):
        Store(p)


def test_missing_store_without_create_writes_nothing(tmp_path):
    with pytest.raises(StoreError, match="not found"):
        Store(tmp_path / "absent.sqlite", create=False)
    assert list(tmp_path.iterdir()) == []


def test_foreign_sqlite_file_is_not_a_store(tmp_path):
    p = tmp_path / "other.sqlite"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    for create in (False, True):  # neither reading nor running adds our tables to their database
        with pytest.raises(StoreError, match="not an attnbench store"):
            Store(p, create=create)
    assert {r[0] for r in sqlite3.connect(p).execute("SELECT name FROM sqlite_master")} == {"t"}


def test_non_sqlite_file_is_a_store_error(tmp_path):
    p = tmp_path / "notes.txt"
    p.write_text("these are not the rows you are looking for\n" * 20)
    with pytest.raises(StoreError):
        Store(p, create=False)


def test_insert_and_query_decode_json_and_bools(store):
    row = make_row(3)
    store.insert(row)
    (got,) = store.attempts()
    assert set(got) == set(COLUMN_NAMES)
    assert got["samples_us"] == row["samples_us"]
    assert got["phases_s"] == row["phases_s"]
    assert got["check_detail"] == row["check_detail"]
    assert got["dispatch_kernels"] == ["aten::matmul", "aten::bmm"]
    assert got["dispatch_families"] == ["unfused-gemm"]
    assert got["converged"] == 1 and got["causal"] == 1
    assert got["median_us"] == row["median_us"] and got["batch"] == row["batch"]
    assert got["peak_mem_bytes"] is None
    raw = store.con.execute("SELECT samples_us, converged FROM attempts").fetchone()
    assert json.loads(raw[0]) == row["samples_us"] and raw[1] == 1
    assert store.attempts("WHERE backend = ?", ("nope",)) == []
    assert len(store.attempts("WHERE backend = ?", (row["backend"],))) == 1


def test_duplicate_attempt_key_is_ignored_and_the_first_row_kept(store):
    store.insert(make_row(0, status="OK"))
    store.insert(make_row(0, status="CRASH", reason="second"))
    assert store.count() == 1
    (got,) = store.attempts()
    assert got["status"] == "OK" and got["reason"] is None
    assert store.done_keys() == {"key0000"}
    assert store.insert_many([make_row(0), make_row(1), make_row(2)]) == 2
    assert store.count() == 3


def test_insert_reports_a_duplicate(store):
    assert store.insert(make_row(0)) is True
    assert store.insert(make_row(0)) is False


def test_unknown_column_is_refused_and_nothing_written(store):
    with pytest.raises(StoreError, match="unknown column"):
        store.insert_many([make_row(0), {**make_row(1), "speed": 3}])
    assert store.count() == 0


def test_required_columns_are_not_null(store):
    with pytest.raises(sqlite3.IntegrityError):
        store.con.execute("INSERT INTO attempts (attempt_key, run_id, backend) VALUES ('k', 'r', 'b')")


def test_runs(store):
    store.start_run("r1", "default", "smoke", "attnbench run", "CPU x", {"seed": 0, "ceilings": {"copy_gbps": 1.0}})
    (r,) = store.runs()
    assert r["run_id"] == "r1" and r["finished_at"] is None and r["provenance"]["seed"] == 0
    store.finish_run("r1")
    assert store.runs()[0]["finished_at"]
    store.ensure_run({"run_id": "r1", "tag": "x", "provenance": {}})  # present: kept as it was
    assert store.runs()[0]["tag"] == "default" and len(store.runs()) == 1


def test_dataframe_in_insertion_order(store):
    rows = sample_rows()
    store.insert_many(rows)
    df = store.dataframe()
    assert list(df.columns) == COLUMN_NAMES
    assert list(df["attempt_key"]) == [r["attempt_key"] for r in rows]


@pytest.mark.parametrize("fmt", io.FORMATS)
def test_export_import_export_round_trip(tmp_path, store, fmt):
    rows = sample_rows()
    store.insert_many(rows)
    a = tmp_path / f"a.{fmt}"
    assert io.export(store, fmt, a) == len(rows)
    assert not (tmp_path / f"a.{fmt}.partial").exists()
    back = io.read_rows(a)
    assert len(back) == len(rows)
    other = Store(tmp_path / "other.sqlite")
    assert io.import_rows(other, back) == len(rows)
    assert other.attempts() == store.attempts()
    b = tmp_path / f"b.{fmt}"
    io.export(other, fmt, b)
    if fmt == "parquet":
        pd.testing.assert_frame_equal(pd.read_parquet(a), pd.read_parquet(b))
    else:
        assert a.read_text() == b.read_text()
    # import is idempotent: the same rows again add nothing
    assert io.import_rows(other, io.read_rows(b)) == 0
    assert other.count() == len(rows)
    # runs the store did not know get a placeholder
    assert {r["run_id"] for r in other.runs()} == {"run-a", "run-b"}
    assert all(r["grid"] == "imported" for r in other.runs())
    other.close()


def test_jsonl_export_holds_values_not_json_text(tmp_path, store):
    store.insert(make_row(0))
    io.export(store, "jsonl", tmp_path / "a.jsonl")
    (rec,) = [json.loads(x) for x in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert set(rec) == set(COLUMN_NAMES)
    assert isinstance(rec["samples_us"], list) and rec["dispatch_families"] == ["unfused-gemm"]
    assert rec["peak_mem_bytes"] is None


def test_unknown_export_format(tmp_path, store):
    with pytest.raises(StoreError, match="unknown format"):
        io.export(store, "xlsx", tmp_path / "a.xlsx")
    assert not (tmp_path / "a.xlsx").exists()


@pytest.mark.parametrize("name,content", [
    ("bad.jsonl", '{"attempt_key": "k", "run_id": "r",\n'),
    ("bad.jsonl", "not json at all\n"),
    ("missing.jsonl", '{"attempt_key": "k", "run_id": "r", "backend": "b"}\n'),
    ("missing.csv", "a,b\n1,2\n"),
    ("bad.parquet", "this is not parquet"),
    ("bad.txt", "{}"),
])
def test_malformed_import_raises_and_writes_nothing(tmp_path, name, content):
    p = tmp_path / name
    p.write_text(content)
    before = sorted(x.name for x in tmp_path.iterdir())
    with pytest.raises(StoreError):
        io.read_rows(p)
    assert sorted(x.name for x in tmp_path.iterdir()) == before


def test_import_missing_file(tmp_path):
    with pytest.raises(StoreError, match="not found"):
        io.read_rows(tmp_path / "absent.jsonl")


def test_import_non_object_jsonl_line(tmp_path):
    p = tmp_path / "a.jsonl"
    p.write_text('{"attempt_key": "k", "run_id": "r", "backend": "b", "status": "OK"}\n42\n')
    with pytest.raises(StoreError):
        io.read_rows(p)


def test_import_badly_typed_value(tmp_path):
    p = tmp_path / "a.jsonl"
    p.write_text('{"attempt_key": "k", "run_id": "r", "backend": "b", "status": "OK", "batch": "x"}\n')
    with pytest.raises(StoreError):
        io.read_rows(p)


def test_import_null_required_value_is_refused(tmp_path):
    p = tmp_path / "a.jsonl"
    p.write_text('{"attempt_key": null, "run_id": "r", "backend": "b", "status": "OK", "tag": "t"}\n')
    with pytest.raises(StoreError):
        io.read_rows(p)


def test_csv_round_trip_keeps_text_that_looks_numeric(tmp_path, store):
    store.insert(make_row(0, attempt_key="0123456789012345", tag="007", reason="NA", status="ERROR"))
    io.export(store, "csv", tmp_path / "a.csv")
    (back,) = io.read_rows(tmp_path / "a.csv")
    assert (back["attempt_key"], back["tag"], back["reason"]) == ("0123456789012345", "007", "NA")


def test_markdown_lists_every_column():
    md = markdown()
    assert f"version {SCHEMA_VERSION}" in md
    for c, t, meaning in ATTEMPT_COLUMNS + RUN_COLUMNS:
        assert f"| `{c}` | {t.split()[0]} | {meaning} |" in md
    from attnbench.record import MODEL_STEPS

    for c in MODEL_STEPS.columns:  # the model-step rows, declared as the attempts' are
        assert f"| `{c.name}` | {c.sql} | {c.doc} | {c.origin} |" in md
    from attnbench.record import COUNTERS, TABLES

    for c in COUNTERS.columns:  # the counters of attempts (issue 39)
        assert f"| `{c.name}` | {c.sql} | {c.doc} | {c.origin} |" in md
    # every table of the record family (attempts, model_rows, counters, ...) and the runs
    assert md.count("| `") == len(RUN_COLUMNS) + sum(len(t.columns) for t in TABLES.values())
    assert md.index("## attempts") < md.index("`status`") < md.index("## runs") < md.index("## model_rows")


def test_json_columns_are_columns():
    assert set(JSON_COLUMNS) <= set(COLUMN_NAMES)
    assert len(COLUMN_NAMES) == len(set(COLUMN_NAMES))


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_gzip_export_round_trip(tmp_path, store, fmt):
    import gzip

    rows = sample_rows()
    store.insert_many(rows)
    plain, packed = tmp_path / f"a.{fmt}", tmp_path / f"a.{fmt}.gz"
    io.export(store, fmt, plain)
    assert io.export(store, fmt, packed) == len(rows)
    assert gzip.decompress(packed.read_bytes()).decode() == plain.read_text()  # really gzip, same content
    other = Store(tmp_path / "other.sqlite")
    assert io.import_rows(other, io.read_rows(packed)) == len(rows)
    assert other.attempts() == store.attempts()
    other.close()


def test_parquet_is_not_gzipped_again(tmp_path, store):
    with pytest.raises(StoreError, match="parquet compresses itself"):
        io.export(store, "parquet", tmp_path / "a.parquet.gz")
    assert list(tmp_path.glob("a.parquet*")) == []


def test_truncated_gzip_is_a_clean_error(tmp_path, store):
    store.insert_many(sample_rows())
    p = tmp_path / "a.jsonl.gz"
    io.export(store, "jsonl", p)
    p.write_bytes(p.read_bytes()[:-20])
    with pytest.raises(StoreError, match="cannot read"):
        io.read_rows(p)


@pytest.mark.parametrize("fmt", io.FORMATS)
def test_runs_table_round_trip_replaces_placeholders_only(tmp_path, store, fmt):
    rows = sample_rows()
    store.insert_many(rows)
    store.start_run("run-a", "default", "quick", "attnbench run", "NVIDIA H200", {"ceilings": {"copy_gbps": 4000.0}})
    store.finish_run("run-a")
    runs_file = tmp_path / f"runs.{fmt}"
    assert io.export(store, fmt, runs_file, table="runs") == 1
    other = Store(tmp_path / "other.sqlite")
    io.import_rows(other, rows)  # attempts first: their runs get placeholders
    assert all(r["provenance"] == {"imported": True} for r in other.runs())
    assert io.import_runs(other, io.read_rows(runs_file, table="runs")) == 1
    back = {r["run_id"]: r for r in other.runs()}
    assert back["run-a"]["provenance"] == {"ceilings": {"copy_gbps": 4000.0}}
    assert back["run-a"]["grid"] == "quick" and back["run-a"]["finished_at"]
    assert back["run-b"]["provenance"] == {"imported": True}  # not in the runs file: placeholder stays
    # a real run row is never overwritten by a later import
    changed = [{**io.read_rows(runs_file, table="runs")[0], "grid": "other"}]
    assert io.import_runs(other, changed) == 0
    assert {r["run_id"]: r for r in other.runs()}["run-a"]["grid"] == "quick"
    other.close()


def test_unknown_table(tmp_path, store):
    with pytest.raises(StoreError, match="unknown table"):
        io.export(store, "jsonl", tmp_path / "a.jsonl", table="nope")


def test_source_digest_names_the_code_and_changes_with_it(tmp_path):
    from attnbench.measure.provenance import source_digest

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n")
    (tmp_path / "pkg" / "notes.txt").write_text("not code")
    d1 = source_digest(tmp_path / "pkg")
    assert len(d1) == 64 and d1 == source_digest(tmp_path / "pkg")
    (tmp_path / "pkg" / "notes.txt").write_text("changed, still not code")
    assert source_digest(tmp_path / "pkg") == d1
    (tmp_path / "pkg" / "a.py").write_text("x = 2\n")
    assert source_digest(tmp_path / "pkg") != d1
    (tmp_path / "pkg" / "a.py").rename(tmp_path / "pkg" / "b.py")
    assert source_digest(tmp_path / "pkg") not in (d1,)
    assert len(source_digest()) == 64  # the installed package itself


def _version_4_store(path, rows):
    """A store as schema version 4 wrote it: its DDL had no column for the axes added since (window,
    lengths, page_size)."""
    from attnbench.store.schema import BACKFILL, ddl

    old = [c for c in COLUMN_NAMES if c not in BACKFILL]
    con = sqlite3.connect(path)
    for stmt in ddl():
        for c in BACKFILL:  # the v4 DDL: the same statements without the later columns
            stmt = stmt.replace(f",\n  {c} INTEGER", "").replace(f",\n  {c} TEXT", "")
        con.execute(stmt)
    assert not set(BACKFILL) & {r[1] for r in con.execute("PRAGMA table_info(attempts)")}
    con.execute("INSERT INTO meta VALUES ('schema_version', '4')")
    for r in rows:
        con.execute(f"INSERT INTO attempts ({','.join(old)}) VALUES ({','.join('?' * len(old))})",
                    [json.dumps(r.get(c)) if c in JSON_COLUMNS and r.get(c) is not None else r.get(c) for c in old])
    con.commit()
    con.close()


def test_a_version_4_store_is_migrated_and_its_rows_read_with_no_window(tmp_path):
    from attnbench.workloads import Workload
    from attnbench.workloads.axes import NAMES

    p = tmp_path / "v4.sqlite"
    rows = [make_row(i) for i in range(3)]
    for r in rows:
        r.pop("window"), r.pop("lengths"), r.pop("page_size")
    _version_4_store(p, rows)
    ro = Store(p, readonly=True)  # read-only: nothing is written, the absent column reads its default
    assert [(r["window"], r["lengths"]) for r in ro.attempts()] == [(0, "fixed")] * 3
    assert list(ro.dataframe()["window"]) == [0, 0, 0] and set(ro.dataframe()["lengths"]) == {"fixed"}
    ro.close()
    s = Store(p, create=False)  # opened for writing: migrated, the column filled
    assert s.con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    got = [tuple(r) for r in s.con.execute("SELECT window, lengths, page_size FROM attempts ORDER BY rowid")]
    assert got == [(0, "fixed", 0)] * 3
    back = s.attempts()
    # the stored workload_key is still the key of the workload the row describes: resume finds it
    for r, want in zip(back, rows):
        w = Workload(**{n: bool(r[n]) if n in ("causal", "fresh_inputs") else r[n] for n in NAMES})
        assert w.window == 0 and w.lengths == "fixed" and w.page_size == 0 and w.key() == want["workload_key"]
    s.insert(make_row(5, window=0))
    assert len(s.attempts()) == 4
    s.close()


def test_an_export_written_before_the_window_axis_imports_with_no_window(tmp_path, store):
    row = make_row(0)
    row.pop("window"), row.pop("lengths"), row.pop("page_size")
    p = tmp_path / "old.jsonl"
    p.write_text(json.dumps(row) + "\n")
    (back,) = io.read_rows(p)
    assert (back["window"], back["lengths"], back["page_size"]) == (0, "fixed", 0)
    io.import_rows(store, [back])
    got = store.attempts()[0]
    assert (got["window"], got["lengths"], got["page_size"]) == (0, "fixed", 0)
