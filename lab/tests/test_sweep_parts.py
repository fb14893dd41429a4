"""lab/sweep_parts.py: what the attempts left of a sweep in parts would add, from repeat 0's rows."""
import importlib.util
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "sweep_parts.py"


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # a dataclass looks its module up there
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def parts():
    return _load("sweep_parts", SCRIPT)


@pytest.fixture(scope="module")
def make_row():
    """tests/conftest.py's store row, loaded by path: pytest loads that conftest for tests/ only."""
    return _load("attnbench_tests_conftest", SCRIPT.parents[1] / "tests" / "conftest.py").make_row


def attempt(backend, wk, mode, repeat):
    return SimpleNamespace(backend=SimpleNamespace(name=backend), repeat=repeat,
                           workload=SimpleNamespace(key=lambda: wk, mode=mode))


def row(backend, wk, mode, repeat, wall, samples, calls, cold, phases_as_text=True):
    phases = {"timing": 1.0} | ({} if cold is None else {"cold_call": cold})
    return {"backend": backend, "workload_key": wk, "mode": mode, "repeat": repeat, "wall_s": wall,
            "samples_us": json.dumps(samples) if samples is not None else None, "calls_per_sample": calls,
            "phases_s": json.dumps(phases) if phases_as_text else phases}


def test_each_attempt_left_costs_its_repeat0_row_else_its_backend_and_modes_mean(parts):
    ok = pd.DataFrame([
        row("a", "w1", "prefill", 0, 4.0, [100_000.0, 100_000.0], 2, 1.5),  # timed 0.4 s
        row("a", "w2", "prefill", 0, 2.0, [50_000.0], 1, 0.5, phases_as_text=False),  # timed 0.05 s
        row("a", "w1", "prefill", 1, 99.0, [9e9], 1, 99.0),  # a later repeat's row is no yardstick
        row("a", "w3", "prefill", 0, 50.0, None, None, 40.0),  # samples slimmed away: no yardstick
        row("b", "w1", "decode", 0, 1.0, [10_000.0] * 3, None, None),  # calls unknown: 1; no first call
    ])
    todo = [attempt("a", "w1", "prefill", 1), attempt("a", "w1", "prefill", 2),  # its own repeat-0 row
            attempt("a", "w9", "prefill", 1),  # no row of its own: the mean of a's prefill rows
            attempt("b", "w1", "decode", 2),
            attempt("c", "w1", "prefill", 0)]  # nothing to go by
    c = parts.remaining_cost(ok, todo)
    assert c["unmatched"] == 1
    assert c["wall_s"] == pytest.approx(4.0 * 2 + 3.0 + 1.0)
    assert c["timed"] == pytest.approx(0.4 * 2 + 0.225 + 0.03)
    assert c["first_call"] == pytest.approx(1.5 * 2 + 1.0 + 0.0)


def _cache_pieces(where: Path, name: str, files: dict, pieces: int) -> list[Path]:
    """A gzipped tar of `files` split into `pieces` parts, as h200_detached.sh returns a compiler cache."""
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(path)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    blob, out = buf.getvalue(), []
    step = -(-len(blob) // pieces)
    for i in range(pieces):
        p = where / f"{name}.cache.tgz.{i:02d}"
        p.write_bytes(blob[i * step:(i + 1) * step])
        out.append(p)
    return out


def test_take_keeps_a_parts_rows_and_replaces_the_cache_pieces_whole(parts, tmp_path, monkeypatch):
    ledgers = []
    monkeypatch.setattr(parts, "ledger", lambda args: ledgers.append(args))
    got, kept, carry = tmp_path / "device", tmp_path / "results", tmp_path / "carry"
    for d in (got, kept, carry):
        d.mkdir()
    (got / "port-seg6.jsonl.gz").write_bytes(b"rows")
    (got / "port-seg6.runs.jsonl").write_text("{}\n")
    (got / "port-seg6.runs.jsonl").chmod(0o444)  # as the device's files arrive: read-only
    _cache_pieces(carry, "port", {"inductor/old": "x" * 5000}, 3)  # the last part's: three pieces
    new = _cache_pieces(got, "port", {"inductor/a": "a" * 3000, "jax/b": "b"}, 2)
    args = SimpleNamespace(src=str(got), name="port", dir=str(kept), carry=str(carry / "port.sqlite.gz"))
    parts.take(args)
    assert sorted(p.name for p in kept.iterdir()) == ["port-seg6.jsonl.gz", "port-seg6.runs.jsonl"]
    (kept / "port-seg6.runs.jsonl").write_text("{}\n")  # writable
    joined = sorted(carry.glob("port.cache.tgz.*"))
    assert [p.name for p in joined] == [p.name for p in new]  # no stale third piece
    assert len(parts.members(joined)) == 2 and ledgers == [args]
    # a second take of the same files is harmless; a differing kept file is not overwritten
    parts.take(args)
    (kept / "port-seg6.jsonl.gz").write_bytes(b"other rows")
    with pytest.raises(SystemExit, match="exists and differs"):
        parts.take(args)
    # pieces that do not make one archive: nothing is taken, the kept cache stays
    (kept / "port-seg6.jsonl.gz").write_bytes(b"rows")
    new[1].write_bytes(new[1].read_bytes()[:-20])
    before = {p.name: p.read_bytes() for p in carry.glob("port.cache.tgz.*")}
    with pytest.raises(SystemExit, match="not one archive"):
        parts.take(args)
    assert {p.name: p.read_bytes() for p in carry.glob("port.cache.tgz.*")} == before and len(ledgers) == 2


def _tree(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def _cache(root: Path, files: dict) -> Path:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root


def test_pack_keeps_the_largest_set_of_compilers_that_fits_and_unpack_restores_it(parts, tmp_path, monkeypatch):
    import os

    cache = _cache(tmp_path / "cache", {"inductor/fx/a": "i" * 40, "triton/k/b": "t" * 40, "jax/c": "j"})
    out = tmp_path / "out"
    out.mkdir()
    (out / "port.cache.tgz.07").write_bytes(b"a stale piece")  # an earlier part's: never beside new ones
    assert parts.pack(cache, out, "port") == ["inductor", "triton", "jax"]
    pieces = sorted(out.glob("port.cache.t?z.*"))
    assert [p.name for p in pieces] == ["port.cache.txz.00"] and pieces[0].read_bytes()[:6] == b"\xfd7zXZ\x00"
    parts.unpack(pieces, tmp_path / "back")
    assert _tree(tmp_path / "back") == _tree(cache)
    # too large for MAX_PIECES: Triton's part goes first, then Inductor's (random bytes do not compress)
    (cache / "triton/k/big").write_bytes(os.urandom(5000))
    monkeypatch.setattr(parts, "PIECE", 1000)
    assert parts.pack(cache, out, "port") == ["inductor", "jax"]
    assert parts.kinds_of(parts.members(sorted(out.glob("port.cache.t?z.*")))) == {"inductor", "jax"}
    (cache / "inductor/fx/big").write_bytes(os.urandom(5000))
    assert parts.pack(cache, out, "port") == ["jax"]
    (cache / "jax/big").write_bytes(os.urandom(5000))
    assert parts.pack(cache, out, "port") == [] and not list(out.glob("port.cache.*"))


def test_take_keeps_the_carried_compilers_that_the_returned_cache_left_out(parts, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(parts, "ledger", lambda args: None)
    got, kept, carry = tmp_path / "device", tmp_path / "results", tmp_path / "carry"
    for d in (got, kept, carry):
        d.mkdir()
    (got / "port-seg7.jsonl.gz").write_bytes(b"rows")
    # the last part's cache, all three compilers, in gzip as parts packed it before xz
    _cache_pieces(carry, "port", {"inductor/fx/a": "old a", "triton/k": "old k", "jax/j": "old j"}, 2)
    # this part's: Inductor's and Triton's left out for size, JAX's grown
    parts.pack(_cache(tmp_path / "new", {"jax/j": "new j", "jax/j2": "new j2"}), got, "port")
    parts.take(SimpleNamespace(src=str(got), name="port", dir=str(kept), carry=str(carry / "port.sqlite.gz")))
    pieces = sorted(carry.glob("port.cache.t?z.*"))
    assert [p.name for p in pieces] == ["port.cache.txz.00"]  # the two gzip pieces are gone
    parts.unpack(pieces, tmp_path / "next")
    assert _tree(tmp_path / "next") == {"inductor/fx/a": "old a", "triton/k": "old k",
                                         "jax/j": "new j", "jax/j2": "new j2"}
    # the line names what each compiler's part holds: JAX's two new entries, the others' carried one
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("compiler cache for the next part")]
    per = dict(kv.split() for kv in line[line.index("(") + 1:-1].split(", "))
    assert sorted(per) == ["inductor", "jax", "triton"] and int(per["jax"]) == int(per["triton"]) + 1
    # a returned cache with every compiler replaces the carried one whole
    parts.pack(_cache(tmp_path / "all", {"inductor/fx/b": "b", "triton/t": "t", "jax/j": "j"}), got, "port")
    parts.take(SimpleNamespace(src=str(got), name="port", dir=str(kept), carry=str(carry / "port.sqlite.gz")))
    parts.unpack(sorted(carry.glob("port.cache.t?z.*")), tmp_path / "next2")
    assert _tree(tmp_path / "next2") == {"inductor/fx/b": "b", "triton/t": "t", "jax/j": "j"}


def test_pack_and_unpack_without_the_xz_tool(parts, tmp_path, monkeypatch):
    cache = _cache(tmp_path / "cache", {"inductor/fx/a": "i" * 400, "jax/c": "j"})
    monkeypatch.setattr(parts.shutil, "which", lambda name: None)  # a machine without xz: Python's lzma
    assert parts.pack(cache, tmp_path / "out", "port") == ["inductor", "jax"]
    pieces = sorted((tmp_path / "out").glob("port.cache.t?z.*"))
    parts.unpack(pieces, tmp_path / "back")
    assert _tree(tmp_path / "back") == _tree(cache)


def _part(parts_dir: Path, name: str, rows: list[dict], provenance: dict | None = None, **run) -> None:
    """One kept part: its rows and runs table as `segment` writes them."""
    from attnbench.store.db import Store
    from attnbench.store.io import export

    s = Store(str(parts_dir / f"{name}.sqlite"))
    for r in rows:
        s.ensure_run({"run_id": r["run_id"], "tag": "default", "provenance": provenance or {}} | run)
        s.insert(r)
    export(s, None, parts_dir / f"{name}.jsonl.gz")
    export(s, None, parts_dir / f"{name}.runs.jsonl", table="runs")
    s.close()
    (parts_dir / f"{name}.sqlite").unlink()


def test_the_ledger_never_writes_a_resume_store_with_fewer_attempts_than_the_carried_one(parts, make_row, tmp_path, capsys):
    import gzip
    import sqlite3


    kept, carry = tmp_path / "kept", tmp_path / "carry" / "port.sqlite.gz"
    kept.mkdir()
    _part(kept, "port-seg1", [make_row(i, run_id="run-1") for i in range(3)])
    args = SimpleNamespace(dir=str(kept), carry=str(carry))
    parts.ledger(args)

    def keys() -> set:
        db = tmp_path / "resume.sqlite"
        db.write_bytes(gzip.decompress(carry.read_bytes()))
        with sqlite3.connect(db) as con:
            return {r[0] for r in con.execute("SELECT attempt_key FROM attempts")}

    assert keys() == {"key0000", "key0001", "key0002"}
    _part(kept, "port-seg2", [make_row(i, run_id="run-2") for i in range(3, 5)], {"ceilings": {"host_op_us": 9.5}})
    capsys.readouterr()
    parts.ledger(args)
    assert len(keys()) == 5
    lines = capsys.readouterr().out.splitlines()  # each part's line names its host's pace where recorded
    assert [line.endswith(", host 9.50 us/op") for line in lines if line.startswith("  run run-")] == [False, True]
    before = carry.read_bytes()
    # the first part's rows set aside (as during a device call): the rebuilt store would lack them
    aside = tmp_path / "aside"
    aside.mkdir()
    for f in kept.glob("port-seg1.*"):
        f.rename(aside / f.name)
    with pytest.raises(SystemExit, match="lack 3 attempts"):
        parts.ledger(args)
    assert carry.read_bytes() == before
    for f in aside.iterdir():
        f.rename(kept / f.name)
    parts.ledger(args)
    assert len(keys()) == 5 and "resume store" in capsys.readouterr().out


def test_the_ledger_counts_one_start_up_for_the_sweep_run_whole(parts, make_row, tmp_path, capsys):
    import re


    kept = tmp_path / "kept"
    kept.mkdir()
    # read in name order, but the first part is the run that started earliest (seg2 here)
    for n, day, up in ((1, 2, 20.0), (2, 1, 30.0), (3, 3, 50.0)):
        rows = [make_row(i, run_id=f"run-{n}", created_at=f"2026-01-0{day}T00:00:{9 + i - 2 * n:02d}Z",
                         samples_us=[250000.0] * 4, median_us=250000.0, p95_us=250000.0, calls_per_sample=1)
                for i in range(2 * n, 2 * n + 2)]
        _part(kept, f"port-seg{n}", rows, {"startup_s": up}, started_at=f"2026-01-0{day}T00:00:00Z")
    parts.ledger(SimpleNamespace(dir=str(kept), carry=str(tmp_path / "carry" / "port.sqlite.gz")))
    out = capsys.readouterr().out
    assert "of it, 3 parts' start-ups before a first attempt: 100 s" in out
    wall, timed = map(float, re.search(r"sweep wall (\d+) s for ([\d.]+) s", out).groups())
    # each part's span is 10 s to its last row, and its start-up: 3 x 10 + 100
    assert (wall, timed) == (130, 6.0)  # 1 s of samples a row
    ratio = float(re.search(r"the first part's 30 s\): wall / timed ([\d.]+)", out).group(1))
    assert ratio == pytest.approx((wall - 70) / timed, abs=1e-3)
    capsys.readouterr()
    for f in kept.glob("port-seg[13].*"):  # one part alone: nothing to take off
        f.unlink()
    parts.ledger(SimpleNamespace(dir=str(kept), carry=str(tmp_path / "carry2" / "port.sqlite.gz")))
    assert "start-ups" not in capsys.readouterr().out


def test_later_repeats_are_set_against_their_repeat0_row_apart_for_the_same_run_and_an_earlier_part(parts):
    def r(backend, wk, repeat, run, wall, cold):
        return row(backend, wk, "prefill", repeat, wall, [1.0], 1, cold) | {"run_id": run}

    ok = pd.DataFrame([
        r("a", "w1", 0, "p1", 10.0, 4.0), r("a", "w2", 0, "p1", 6.0, 2.0),
        r("a", "w1", 1, "p1", 7.0, 1.0), r("a", "w1", 2, "p1", 8.0, 2.0),  # the same run: 15 / 20 s, 3 / 8 s
        r("a", "w2", 1, "p2", 9.0, 3.0),  # a later part, p1's cache not kept: 9 / 6 s, 3 / 2 s
        r("a", "w3", 0, "p2", 10.0, 5.0), r("a", "w3", 1, "p3", 8.0, 1.0),  # p2 kept it, p3 resumed it
        r("a", "w4", 0, "p2", 10.0, 5.0), r("a", "w4", 1, "p4", 11.0, 6.0),  # p4 began with a fresh one
        r("a", "w5", 0, "p1", 10.0, 4.0), r("a", "w5", 1, "p2", 10.0, 4.0),  # repeat 1 in p2, which kept it,
        r("a", "w5", 2, "p3", 7.0, 1.0),  # so repeat 2 in p3 resumed their compiles though repeat 0's were lost
        r("b", "w9", 1, "p2", 99.0, 99.0),  # no repeat-0 row: not compared
    ])
    temp = {"compile_cache": {"kind": "fresh", "dir": "/tmp/attnbench-compile-x1"}}  # before "kept": by its folder
    beside = {"compile_cache": {"kind": "fresh", "dir": "/tmp/port/run.sqlite.compile-cache"}}
    provenances = {"p1": temp, "p2": beside, "p3": {"compile_cache": {"kind": "resumed", "dir": "d", "kept": True}},
                   "p4": {"compile_cache": {"kind": "fresh", "dir": "d", "kept": True}}}
    same, carried, not_carried = parts.LATER
    got = parts.later_vs_first(ok, provenances)
    assert got[same] == {"rows": 2, "wall": pytest.approx(0.75), "first_call": pytest.approx(3 / 8)}
    assert got[carried] == {"rows": 2, "wall": pytest.approx(15 / 20), "first_call": pytest.approx(2 / 9)}
    assert got[not_carried] == {"rows": 3, "wall": pytest.approx(30 / 26), "first_call": pytest.approx(13 / 11)}
    none = parts.later_vs_first(ok[ok["repeat"] == 0], provenances)
    assert [none[k]["rows"] for k in parts.LATER] == [0, 0, 0]
    # the attempts left whose compiles the next part begins with: p4 began fresh, so only its own
    assert parts.carried_pairs(ok, provenances) == {("a", "w4")}
    assert parts.carried_pairs(ok, provenances, pieces=False) == set()  # the pieces to resume from are lost
    # without p4, the last run p3 resumed p2's cache: both runs' rows, of any repeat
    upto3 = {k: v for k, v in provenances.items() if k != "p4"}
    pairs = parts.carried_pairs(ok[ok["run_id"] != "p4"], upto3)
    assert pairs == {("a", "w2"), ("a", "w3"), ("a", "w4"), ("a", "w5"), ("b", "w9")}
    c = parts.remaining_cost(ok, [attempt("a", "w3", "prefill", 2), attempt("a", "w1", "prefill", 2)], pairs)
    assert c["carried"] == 1 and c["carried_wall"] == pytest.approx(10.0) and c["wall_s"] == pytest.approx(20.0)


def test_a_run_that_began_fresh_breaks_the_chain_of_carried_compiles(parts):
    def r(wk, repeat, run):
        return row("a", wk, "prefill", repeat, 10.0, [1.0], 1, 4.0) | {"run_id": run}

    kept = {"compile_cache": {"kind": "fresh", "dir": "d", "kept": True}}
    resumed = {"compile_cache": {"kind": "resumed", "dir": "d", "kept": True}}
    dropped = {"compile_cache": {"kind": "resumed", "dir": "d", "kept": False}}
    provenances = {"r1": kept, "r2": resumed, "r3": kept, "r4": resumed, "r5": dropped, "r6": resumed}
    assert parts.held_by("r2", provenances) == ["r1"]
    assert parts.held_by("r3", provenances) == []  # fresh: r1 and r2's compiles were lost
    assert parts.held_by("r4", provenances) == ["r3"]
    assert parts.held_by("r6", provenances) == []  # r5 did not keep what it had
    assert parts.chain("r4", provenances) == ["r4", "r3"]
    ok = pd.DataFrame([r("w1", 0, "r1"), r("w2", 0, "r3"), r("w1", 1, "r4"), r("w2", 1, "r4")])
    got = parts.later_vs_first(ok, provenances)
    assert got[parts.LATER[1]]["rows"] == 1 and got[parts.LATER[2]]["rows"] == 1  # w2 carried, w1 not
    assert parts.carried_pairs(ok, {k: provenances[k] for k in ("r1", "r2", "r3", "r4")}) == {("a", "w1"), ("a", "w2")}


def test_take_makes_the_part_from_a_lost_machines_last_backup(parts, make_row, tmp_path, monkeypatch, capsys):
    """A part whose machine was lost mid-run returns no segment, only the backup of its whole store that
    the last call brought back: take cuts the latest run's rows out of it (the earlier parts' rows stay
    out), as segment does at a part's end; a folder with neither is refused, nothing kept."""
    import gzip

    from attnbench.store.db import Store

    monkeypatch.setattr(parts, "ledger", lambda args: None)
    got, kept = tmp_path / "device", tmp_path / "results"
    got.mkdir()
    args = SimpleNamespace(src=str(got), name="port", dir=str(kept), carry=str(tmp_path / "carry" / "port.sqlite.gz"))
    with pytest.raises(SystemExit, match="nor a port.sqlite.gz backup"):
        parts.take(args)
    assert not kept.exists()
    s = Store(str(tmp_path / "run.sqlite"))
    for run, ids in (("run-1", range(3)), ("run-2", range(3, 5))):  # an earlier part, then the lost one
        s.ensure_run({"run_id": run, "tag": "default", "provenance": {}})
        for i in ids:
            s.insert(make_row(i, run_id=run))
    s.close()
    (got / "port.sqlite.gz").write_bytes(gzip.compress((tmp_path / "run.sqlite").read_bytes()))
    parts.take(args)
    assert sorted(p.name for p in kept.iterdir()) == ["port-seg2.jsonl.gz", "port-seg2.runs.jsonl"]
    assert "its run did not end there" in capsys.readouterr().out
    rows = pd.read_json(kept / "port-seg2.jsonl.gz", lines=True)
    assert sorted(rows.attempt_key) == ["key0003", "key0004"] and set(rows.run_id) == {"run-2"}
    runs = [json.loads(line)["run_id"] for line in (kept / "port-seg2.runs.jsonl").read_text().splitlines()]
    assert runs == ["run-1", "run-2"]
