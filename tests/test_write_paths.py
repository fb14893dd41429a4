"""Every write path is safe: no output over a store's -wal, -shm or -journal file (or over a store), a read-only
place or a full disk is one line and exit 2 with nothing half-written, and a row whose text is damaged is named
by a read (not called a failed write) while export saves the intact rows."""
from __future__ import annotations

import errno
import json
import pathlib
import sqlite3

import pytest

from attnbench.store.db import Store
from conftest import digest, finished_store, make_row, rows_of


@pytest.fixture
def db(tmp_path):
    return finished_store(tmp_path / "s.sqlite")


def refused(res, text: str) -> None:
    assert res.rc == 2, (res.rc, res.err)
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("attnbench: error: ") and text in lines[0], res.err


@pytest.mark.parametrize("suffix", ["-wal", "-shm", "-journal"])
def test_export_never_writes_over_a_stores_sidecar(cli, db, tmp_path, suffix):
    writer = Store(db)  # a run holding the store open: its newest row is only in the -wal file
    writer.insert(make_row(9, attempt_key="in-the-wal"))
    try:
        res = cli("export", "--db", db, "--out", f"{db}{suffix}", "--format", "jsonl")
        refused(res, f"is the {suffix[1:]} file of the SQLite database")
        other = tmp_path / "other.sqlite"  # any store's sidecar, not only the one exported
        Store(other).close()
        refused(cli("export", "--db", db, "--out", f"{other}{suffix}", "--format", "jsonl"), suffix[1:])
    finally:
        writer.close()
    assert "in-the-wal" in {r["attempt_key"] for r in rows_of(db)}
    assert not list(tmp_path.glob("*.partial"))


def test_analyze_and_compare_outputs_never_replace_a_store(cli, db, tmp_path):
    other = tmp_path / "b.sqlite"
    other.write_bytes(db.read_bytes())
    before = digest(other)
    refused(cli("analyze", db, "--json", other), "is a SQLite database")
    refused(cli("analyze", db, "--md", f"{other}-wal"), "is the wal file")
    refused(cli("compare", db, other, "--json", other), "is a SQLite database")
    assert digest(other) == before


def test_analyze_and_compare_outputs_never_replace_an_export_they_read(cli, db, tmp_path):
    export = tmp_path / "s.jsonl"
    assert cli("export", "--db", db, "--out", export).rc == 0
    before = digest(export)
    refused(cli("analyze", export, "--json", export), "is a file this command reads")
    refused(cli("analyze", f"x={export}", "--md", tmp_path / "." / "s.jsonl"), "is a file this command reads")
    refused(cli("compare", db, export, "--json", export), "is a file this command reads")
    assert digest(export) == before


def _failing(monkeypatch, method: str, code: int, where) -> None:
    """pathlib.Path.<method> raises OSError(code) for the paths `where` accepts (a read-only place, a full disk)."""
    real = getattr(pathlib.Path, method)

    def fake(self, *a, **k):
        if where(self):
            raise OSError(code, __import__("os").strerror(code), str(self))
        return real(self, *a, **k)

    monkeypatch.setattr(pathlib.Path, method, fake)


def test_export_into_a_read_only_place_is_one_line(cli, db, tmp_path, monkeypatch):
    out = tmp_path / "ro" / "x.jsonl"
    out.parent.mkdir()
    inside = lambda p: p.parent == out.parent  # noqa: E731
    for method in ("open", "unlink"):  # a read-only place refuses the removal of what is not there too
        _failing(monkeypatch, method, errno.EROFS, inside)
    refused(cli("export", "--db", db, "--out", out), "Read-only file system")
    assert not any(out.parent.iterdir())


def test_analyze_output_on_a_full_disk_is_one_line_and_leaves_nothing(cli, db, tmp_path, monkeypatch):
    out = tmp_path / "a.json"
    _failing(monkeypatch, "write_text", errno.ENOSPC, lambda p: p.name.startswith("a.json"))
    refused(cli("analyze", db, "--json", out), "No space left on device")
    assert not out.exists() and not list(tmp_path.glob("*.partial"))


def test_report_into_a_read_only_place_is_refused_before_reading(cli, db, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    import os

    real = os.mkdir

    def fake(path, *a, **k):
        if pathlib.Path(path).parent == tmp_path:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real(path, *a, **k)

    monkeypatch.setattr(os, "mkdir", fake)
    refused(cli("report", db, "--out", tmp_path / "site"), "cannot write in")
    refused(cli("report", db, "--out", f"{db}-wal"), "is the wal file")


def test_report_on_a_full_disk_is_one_line_and_keeps_the_old_site(cli, db, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from attnbench.report.html.site import MARKER

    site = tmp_path / "site"  # a site an earlier report wrote
    site.mkdir()
    (site / MARKER).write_text("attnbench\n")
    (site / "index.html").write_text("<p>the old site</p>\n")
    before = {p.relative_to(site): digest(p) for p in site.rglob("*") if p.is_file()}
    _failing(monkeypatch, "write_text", errno.ENOSPC, lambda p: ".partial" in str(p))
    refused(cli("report", db, "--out", site), "No space left on device")
    assert {p.relative_to(site): digest(p) for p in site.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.sqlite", "site"]


def _damage_text(db, key: str, column: str = "backend") -> None:
    """Bytes that are not UTF-8 in one row's text: the pages stay sound (quick_check passes)."""
    con = sqlite3.connect(db)
    con.execute(f"UPDATE attempts SET {column} = CAST(x'66ff6f' AS TEXT) WHERE attempt_key = ?", (key,))
    con.commit()
    con.close()


@pytest.mark.parametrize("argv", [["show", "--db", "{db}"], ["analyze", "{db}"], ["compare", "{db}", "{db2}"],
                                  ["show", "--db", "{db}", "--status"]])
def test_damaged_text_is_named_by_a_read_not_called_a_failed_write(cli, db, tmp_path, argv):
    db2 = tmp_path / "b.sqlite"
    db2.write_bytes(db.read_bytes())
    _damage_text(db, "key0001")
    before = digest(db)
    res = cli(*[a.format(db=db, db2=db2) for a in argv])
    refused(res, "row 2 (attempt_key 'key0001'), column backend")
    assert "could not be written" not in res.err and "export" in res.err
    assert digest(db) == before


def test_export_saves_the_intact_rows_and_names_the_damaged_ones(cli, db, tmp_path):
    _damage_text(db, "key0002", "reason")
    out = tmp_path / "x.jsonl"
    res = cli("export", "--db", db, "--out", out)
    assert res.rc == 1, res.err
    assert "wrote 3 attempts" in res.err
    warning = [x for x in res.err.splitlines() if x.startswith("attnbench: warning:")]
    assert len(warning) == 1 and "row 3 (attempt_key 'key0002'), column reason" in warning[0], res.err
    keys = [json.loads(x)["attempt_key"] for x in out.read_text().splitlines()]
    assert keys == ["key0000", "key0001", "key0003"]
    assert cli("import", out, "--db", tmp_path / "back.sqlite").rc == 0  # the saved rows stand alone


DAMAGE = [  # (SQL expression written over one value, column, what the line says)
    ("'[1.0, 2'", "samples_us", "not JSON"),
    ("'{\"a\": 1}'", "samples_us", "JSON of the wrong kind"),
    ("'abc'", "median_us", "text in a number column"),
]


@pytest.mark.parametrize("value,column,what", DAMAGE, ids=[w for _, _, w in DAMAGE])
def test_json_or_number_damage_is_named_by_readers_and_left_out_by_export(cli, db, tmp_path, value, column, what):
    con = sqlite3.connect(db)
    con.execute(f"UPDATE attempts SET {column} = {value} WHERE attempt_key = 'key0001'")
    con.commit()
    con.close()
    for argv in (["show", "--db", db], ["analyze", db]):  # a traceback before
        if column == "samples_us":  # schema 11: readers take samples from the samples table written at insert
            assert cli(*argv).rc == 0
            continue
        refused(cli(*argv), f"row 2 (attempt_key 'key0001'), column {column}: {what}")
    out = tmp_path / "x.csv"
    res = cli("export", "--db", db, "--out", out)
    assert res.rc == 1 and f"column {column}: {what}" in res.err, res.err
    assert cli("import", out, "--db", tmp_path / "back.sqlite").rc == 0  # what was saved imports whole
    assert [r["attempt_key"] for r in rows_of(tmp_path / "back.sqlite")] == ["key0000", "key0002", "key0003"]


def test_a_damaged_run_row_is_named_too(cli, db, tmp_path):
    con = sqlite3.connect(db)
    con.execute("UPDATE runs SET provenance = '{oops'")
    con.commit()
    con.close()
    refused(cli("show", "--db", db), "runs row 1 (run_id 'run-a'), column provenance: not JSON")
    res = cli("export", "--db", db, "--table", "runs", "--out", tmp_path / "r.jsonl")
    assert res.rc == 1 and "column provenance: not JSON" in res.err


def test_model_kernel_grid_never_replaces_a_store_and_a_full_disk_is_one_line(cli, db, tmp_path, monkeypatch):
    before = digest(db)
    refused(cli("model", "--config", "tiny", "--device", "cpu", "--kernel-grid", db), "is a SQLite database")
    refused(cli("model", "--config", "tiny", "--device", "cpu", "--kernel-grid", f"{db}-journal"), "journal file")
    assert digest(db) == before
    _failing(monkeypatch, "write_text", errno.ENOSPC, lambda p: p.name.startswith("k.yaml"))
    refused(cli("model", "--config", "tiny", "--device", "cpu", "--kernel-grid", tmp_path / "k.yaml"),
            "No space left on device")
    assert not list(tmp_path.glob("k.yaml*"))
