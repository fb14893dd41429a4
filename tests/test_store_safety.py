"""No command destroys or half-writes a store: exports never overwrite a store, readers write
nothing, damaged stores and invalid imports are refused in one line, concurrent use is safe."""
from __future__ import annotations

import json
import multiprocessing as mp
import sqlite3
import time

import pytest

from attnbench.store import db as db_mod
from attnbench.store.db import Store, StoreError
from conftest import digest, finished_store, make_row, rows_of


def listing(d) -> set[str]:
    return {p.name for p in d.iterdir()}


@pytest.fixture
def store_file(tmp_path):
    return finished_store(tmp_path / "s.sqlite")


def one_line_error(res, text):
    assert res.rc == 2, (res.rc, res.err)
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("attnbench: error: ") and text in lines[0], res.err


@pytest.mark.parametrize("target", ["same", "symlink", "other-store", "directory"])
def test_export_never_overwrites_a_store(cli, store_file, tmp_path, target):
    other = tmp_path / "other.sqlite"
    Store(other).close()
    out = {"same": store_file, "symlink": tmp_path / "link.jsonl", "other-store": other,
           "directory": tmp_path / "dir.jsonl"}[target]
    if target == "symlink":
        out.symlink_to(store_file)
    if target == "directory":
        out.mkdir()
    before = {p: digest(p) for p in (store_file, other)}
    res = cli("export", "--db", store_file, "--out", out, "--format", "jsonl")
    text = {"same": "is the store being exported", "symlink": "is the store being exported",
            "other-store": "is a SQLite database", "directory": "is a directory"}[target]
    one_line_error(res, text)
    assert {p: digest(p) for p in (store_file, other)} == before
    assert not list(tmp_path.glob("*.partial"))


def test_readers_write_nothing_beside_the_store(cli, store_file, tmp_path):
    before, files = digest(store_file), listing(tmp_path)
    assert cli("show", "--db", store_file, "--status").rc == 0
    assert cli("export", "--db", store_file, "--out", tmp_path / "x.jsonl").rc == 0
    assert digest(store_file) == before
    assert listing(tmp_path) == files | {"x.jsonl"}  # no -wal or -shm file appeared


def test_a_reader_sees_the_rows_of_a_run_in_progress(store_file):
    writer = Store(store_file)  # a run holding the store open, its rows still in the -wal file
    writer.insert(make_row(9))
    reader = Store(store_file, readonly=True)
    assert reader.count() == 5
    reader.close()
    writer.close()


def damage(p) -> None:
    """Overwrite the middle of the attempts table's pages with garbage (not the header)."""
    data = bytearray(p.read_bytes())
    page = 4096
    for i in range(2 * page, len(data) - page, page):
        data[i + 100:i + 400] = b"\xff" * 300
    p.write_bytes(bytes(data))


@pytest.mark.parametrize("argv", [["show", "--db", "{db}"], ["export", "--db", "{db}", "--out", "{d}/x.jsonl"],
                                  ["import", "{d}/in.jsonl", "--db", "{db}"],
                                  ["run", "--grid", "smoke", "--backends", "sdpa-math", "--db", "{db}"]])
def test_a_damaged_store_is_named_in_one_line_by_every_command(cli, store_file, tmp_path, argv):
    s = Store(store_file)
    s.insert_many([make_row(i, attempt_key=f"fill{i}") for i in range(10, 200)])  # a few pages of rows
    s.close()
    (tmp_path / "in.jsonl").write_text(json.dumps(make_row(300, attempt_key="new")) + "\n")
    damage(store_file)
    res = cli(*[a.format(db=store_file, d=tmp_path) for a in argv])
    assert res.rc == 2 and len(res.err.strip().splitlines()) == 1, res.err
    assert "damaged" in res.err or "malformed" in res.err or "not a usable" in res.err, res.err
    assert not (tmp_path / "x.jsonl").exists()


@pytest.mark.parametrize("change,text", [
    ({"samples_us": "[1.0, oops"}, "samples_us"),
    ({"status": "SKIPPED"}, "unknown status 'SKIPPED'"),
    ({"samples_us": None, "median_us": None}, "lacks samples_us"),
    ({"status": "CRASH", "reason": None, "samples_us": None}, "lacks reason"),
])
def test_import_refuses_rows_attnbench_could_not_have_written(cli, tmp_path, change, text):
    rows = [make_row(0), make_row(1, **change)]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = cli("import", src, "--db", tmp_path / "new.sqlite")
    one_line_error(res, text)
    assert not (tmp_path / "new.sqlite").exists()


def test_a_format_that_contradicts_the_name_is_bad_input(cli, store_file, tmp_path):
    one_line_error(cli("export", "--db", store_file, "--out", tmp_path / "x.jsonl", "--format", "csv"),
                   "contradicts the name")
    assert not (tmp_path / "x.jsonl").exists()


def _create_and_insert(args) -> int:
    path, i = args
    s = Store(path)
    s.insert(make_row(i, attempt_key=f"p{i}"))
    s.close()
    return i


def test_several_processes_create_and_fill_one_new_store(tmp_path):
    path = tmp_path / "shared.sqlite"
    with mp.get_context("spawn").Pool(6) as pool:
        assert sorted(pool.map(_create_and_insert, [(str(path), i) for i in range(12)])) == list(range(12))
    assert len(rows_of(path)) == 12


def test_claims_keep_two_runs_from_measuring_one_attempt(store_file):
    a, b = Store(store_file), Store(store_file)
    assert a.claim("fresh", "run-1") and a.claim("fresh", "run-1")  # taking it again is harmless
    assert not b.claim("fresh", "run-2")  # this process is alive: run-1 still holds it
    assert not b.claim("key0000", "run-2")  # already has a row
    a.release_claims("run-1")
    assert b.claim("fresh", "run-2")
    # a claim left by a process that died is taken over
    b.con.execute("UPDATE claims SET pid=999999999, run_id='dead' WHERE attempt_key='fresh'")
    b.con.commit()
    assert a.claim("fresh", "run-3")
    a.close()
    b.close()


def test_a_claim_whose_pid_now_names_another_process_is_taken_over(store_file):
    """A store carried to a fresh machine of the same name: the dead run's pid is alive there, as
    another process. The claim names its process by boot and start time, so it is not held."""
    import os
    from attnbench.store.claims import process_id as _process_id
    from attnbench.store.db import utcnow

    a = Store(store_file)
    me = _process_id(os.getpid())
    a.con.execute("INSERT INTO claims VALUES ('moved', 'dead-run', ?, ?, '2026-01-01T00:00:00Z')",
                  (me.replace(" boot=", " boot=other-boot-"), os.getpid()))  # same name, same live pid
    a.con.execute("INSERT INTO claims VALUES ('reused', 'dead-run2', ?, ?, '2026-01-01T00:00:00Z')",
                  (me.rsplit("start=", 1)[0] + "start=1", os.getpid()))  # this boot, pid started later
    a.con.execute("INSERT INTO claims VALUES ('live', 'live-run', ?, ?, '2026-01-01T00:00:00Z')",
                  (me, os.getpid()))  # the very process: still held
    a.con.execute("INSERT INTO claims VALUES ('away', 'far-run', 'elsewhere boot=x start=1', 1, ?)",
                  (utcnow(),))  # another host, refreshed just now: held
    a.con.commit()
    assert a.claim("moved", "run-9") and a.claim("reused", "run-9")
    assert not a.claim("live", "run-9") and not a.claim("away", "run-9")
    a.close()


def test_a_lock_held_too_long_ends_in_one_line(cli, store_file, tmp_path, monkeypatch):
    monkeypatch.setattr(db_mod, "LOCK_TIMEOUT_S", 0.2)
    holder = sqlite3.connect(store_file)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        (tmp_path / "in.jsonl").write_text(json.dumps(make_row(300, attempt_key="new")) + "\n")
        res = cli("import", tmp_path / "in.jsonl", "--db", store_file)
        one_line_error(res, "locked by another program")
    finally:
        holder.rollback()
        holder.close()
    with pytest.raises(StoreError, match="locked"):
        h = sqlite3.connect(store_file)
        h.execute("BEGIN EXCLUSIVE")
        try:
            Store(store_file)
        finally:
            h.rollback()
            h.close()


@pytest.mark.parametrize("option,value,text", [
    ("--timeout", "inf", "--timeout must be positive and finite"),
    ("--timeout", "nan", "--timeout must be positive and finite"),
    ("--tol", "inf", "--tol must be positive and finite"),
    ("--max-time", "nan", "--max-time must be positive and finite"),
    ("--max-time", "0", "--max-time must be positive and finite"),
    ("--db", "", "--db is empty"),
    ("--backends", "", "names nothing"),
    ("--backends", " , ", "names nothing"),
    ("--modes", ",", "names nothing"),
    ("--seed", "x", "invalid int value"),
    ("--tag", " ", "--tag is empty"),
    ("--where", "colour=red", "unknown workload axis 'colour'"),
    ("--where", "batch=many", "bad batch"),
    ("--where", "batch", "use AXIS=V1,V2"),
    ("--compile-cache", "{d}/afile", "is not a directory"),
    ("--compile-cache", "{d}/no/such/parent", "is not a directory"),
])
def test_bad_run_options_exit_2_and_write_nothing(cli, tmp_path, monkeypatch, option, value, text):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("")
    argv = ["run", "--repeats", "1", "--grid", "smoke", "--db", str(tmp_path / "r.sqlite"), option,
            value.format(d=tmp_path)]
    one_line_error(cli(*argv), text)
    assert listing(tmp_path) == {"afile"}


HOSTILE = """
from attnbench.backends.base import Backend


class Odd(Backend):
    def availability(self):
        return "needs lib[extra] >= 2 [/] [/red]"


BACKENDS = [Odd(name="odd", family="plugin", description="[/red] a [bold]description[/bold] [/]")]
"""


def test_plugin_and_library_text_is_printed_as_text(cli, tmp_path):
    plugin = tmp_path / "odd.py"
    plugin.write_text(HOSTILE)
    res = cli("backends", "--plugin", plugin)
    assert res.rc == 0, res.err
    out = " ".join(res.out.split())
    assert "[/red] a [bold]description[/bold] [/]" in out and "needs lib[extra] >= 2 [/] [/red]" in out, out


def test_a_plugin_whose_backends_function_raises_is_one_line(cli, tmp_path):
    plugin = tmp_path / "boom.py"
    plugin.write_text("def backends():\n    raise KeyError('no such config')\n")
    one_line_error(cli("backends", "--plugin", plugin), "listing its backends failed: KeyError")
    one_line_error(cli("run", "--repeats", "1", "--plugin", plugin, "--db", tmp_path / "r.sqlite"),
                   "listing its backends failed")
    assert not (tmp_path / "r.sqlite").exists()


@pytest.mark.parametrize("argv,text", [
    (["show", "--db", "{db}", "--format", "xml"], "invalid choice"),
    (["show", "--db", "{db}", "--where", "batch=many"], "bad batch"),
    (["show", "--db", "{db}", "--tag", "nope"], "no attempts row has tag 'nope'"),
    (["show", "--db", "{d}/absent.sqlite"], "store not found"),
    (["export", "--db", "{db}", "--out", "{d}/x.jsonl", "--table", "both"], "invalid choice"),
    (["export", "--db", "{db}", "--out", "{d}/x.txt"], "cannot tell the format"),
    (["export", "--db", "{db}", "--out", "{d}/no/x.jsonl"], "does not exist"),
    (["import", "{d}/absent.jsonl", "--db", "{db}"], "file not found"),
    (["import", "{d}/x.txt", "--db", "{db}"], "cannot tell the format"),
    (["import", "{d}/x.jsonl", "--db", "{db}", "--table", "both"], "invalid choice"),
    (["backends", "--plugin", "{d}/absent.py"], "plugin file not found"),
    (["env", "--device", "tpu"], "bad --device"),
])
def test_bad_options_of_every_command_exit_2_and_change_nothing(cli, store_file, tmp_path, argv, text):
    (tmp_path / "x.txt").write_text("{}\n")
    (tmp_path / "x.jsonl").write_text(json.dumps(make_row(50, attempt_key="fifty")) + "\n")
    before, files = digest(store_file), listing(tmp_path)
    one_line_error(cli(*[a.format(db=store_file, d=tmp_path) for a in argv]), text)
    assert digest(store_file) == before and listing(tmp_path) == files


@pytest.mark.slow
def test_a_run_that_leaves_attempts_claimed_by_another_run_says_how_many(cli, tmp_path):
    db = tmp_path / "s.sqlite"
    argv = ("run", "--grid", "smoke", "--where", "mode=prefill", "--where", "causal=false", "--backends", "reference",
            "--repeats", "1", "--max-time", "0.05", "--db", db)
    assert cli(*argv).rc == 0
    con = sqlite3.connect(db)
    key, = con.execute("SELECT attempt_key FROM attempts LIMIT 1").fetchone()
    con.execute("DELETE FROM attempts WHERE attempt_key=?", (key,))
    con.execute("INSERT INTO claims VALUES (?, 'far-run', 'elsewhere boot=x start=1', 1, ?)",
                (key, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())))  # refreshed just now: held
    con.commit()
    res = cli(*argv)
    assert "1 attempts have no row" in res.err, res.err  # rc 0: a run beside it may be filling them
    assert not con.execute("SELECT 1 FROM attempts WHERE attempt_key=?", (key,)).fetchone()
    con.execute("DELETE FROM claims")
    con.commit()
    assert cli(*argv).rc == 0
    assert con.execute("SELECT 1 FROM attempts WHERE attempt_key=?", (key,)).fetchone()
    con.close()
