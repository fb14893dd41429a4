"""`attnbench export --table model_rows` and `import --table model_rows`: the rows of `attnbench model` round-trip
through jsonl, csv and parquet, and a bad file is refused with one line, exit 2 and nothing written."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from attnbench.model import amdahl
from attnbench.store import model_rows
from attnbench.store.db import Store

EVIL_BACKEND = "<b>evil</b>"
DEVICE = "GPU-T"


def _ok(key: str, backend: str, step: str, median: float, **over) -> dict:
    samples = [median * (1 + 0.01 * (j - 2)) for j in range(5)]
    return {"row_key": key, "run_id": "run-model", "tag": "default", "backend": backend, "family": "x",
            "role": "contestant", "config": "tiny", "layers": 2, "hidden": 128, "q_heads": 4, "kv_heads": 2,
            "head_dim": 32, "intermediate": 344, "dtype": "fp32", "step": step, "launch": "eager", "batch": 2,
            "seqlen": 64, "tokens": 2 if step == "decode" else 128, "attention_calls": 2, "status": "OK",
            "samples_us": samples, "calls_per_sample": 1, "timer": "host_clock", "converged": True,
            "stationary": True, "tokens_per_s": (2 if step == "decode" else 128) / (median / 1e6),
            "families": ["flash"], "attn_families": ["flash"], "device_name": DEVICE,
            "created_at": "2026-11-30T20:00:00Z", "torch_version": "2.13.0", **over}


def rows() -> list[dict]:
    """Finished model rows of two steps: the baseline, a faster backend named with markup (its predicted and
    measured speedups from model/amdahl.py against kernel-level medians), and one UNSUPPORTED row."""
    out = []
    for step, base_us, fast_us in (("prefill", 1000.0, 800.0), ("decode", 400.0, 380.0)):
        base = model_rows.finish(_ok(f"{step}-base", "sdpa-flash", step, base_us, share_profiler=0.4,
                                     share_diff=0.45, noop_us=base_us * 0.55, attn_kernel_us=base_us * 0.4))
        fast = model_rows.finish(_ok(f"{step}-fast", EVIL_BACKEND, step, fast_us, share_profiler=0.3,
                                     share_diff=0.3, noop_us=base_us * 0.55, attn_kernel_us=fast_us * 0.3))
        kernels = {"sdpa-flash": 100.0, EVIL_BACKEND: 50.0}
        base.update(amdahl.compare(base, base, kernels, 2))
        fast.update(amdahl.compare(fast, base, kernels, 2))
        out += [base, fast]
    out.append(model_rows.finish({**_ok("prefill-ref", "flex", "prefill", 1.0), "status": "UNSUPPORTED",
                                  "reason": 'no <i>attend</i> & "more"'}))
    return out


def model_store(path: Path) -> Path:
    """A store whose model_rows hold rows(), with its run."""
    s = Store(path)
    s.start_run("run-model", "default", "model:tiny", "attnbench model", DEVICE, {"device": {"name": DEVICE}})
    model_rows.ensure(s.con)
    for r in rows():
        assert model_rows.insert(s.con, r)
    s.finish_run("run-model")
    s.close()
    return path


def _stored(db: Path) -> list[dict]:
    s = Store(db, readonly=True)
    try:
        return model_rows.rows(s.con)
    finally:
        s.close()


@pytest.mark.parametrize("name", ["m.jsonl", "m.jsonl.gz", "m.csv", "m.parquet"])
def test_model_rows_round_trip(cli, tmp_path, name):
    if name.endswith("parquet"):
        pytest.importorskip("pyarrow")
    src = model_store(tmp_path / "src.sqlite")
    out = tmp_path / name
    res = cli("export", "--db", src, "--table", "model_rows", "--out", out)
    assert res.rc == 0 and "wrote 5 model_rows" in res.err, res.err
    dst = tmp_path / "dst.sqlite"
    res = cli("import", out, "--db", dst, "--table", "model_rows")
    assert res.rc == 0 and "imported 5 new model rows" in res.err, res.err
    before, after = _stored(src), _stored(dst)
    assert len(after) == 5
    for a, b in zip(before, after):
        for k, v in a.items():
            if isinstance(v, float):
                assert b[k] == pytest.approx(v, rel=1e-12), k
            else:
                assert b[k] == v, k
    res = cli("import", out, "--db", dst, "--table", "model_rows")  # twice: nothing added
    assert res.rc == 0 and "imported 0 new model rows (5 already present)" in res.err
    assert Store(dst, readonly=True).runs()[0]["run_id"] == "run-model"  # a placeholder run row


def test_export_of_a_store_without_model_rows_is_empty(cli, tmp_path):
    db = tmp_path / "s.sqlite"
    Store(db).close()
    res = cli("export", "--db", db, "--table", "model_rows", "--out", tmp_path / "m.jsonl")
    assert res.rc == 0 and (tmp_path / "m.jsonl").read_text() == ""


@pytest.mark.parametrize("change, text", [
    ({"status": "FINE"}, "unknown status 'FINE'"),
    ({"backend": None}, "lacks backend"),
    ({"reason": None}, "lacks reason"),
    ({"samples_us": None, "status": "OK"}, "lacks samples_us"),
])
def test_bad_model_rows_are_refused(cli, tmp_path, change, text):
    src = model_store(tmp_path / "src.sqlite")
    good = tmp_path / "m.jsonl"
    assert cli("export", "--db", src, "--table", "model_rows", "--out", good).rc == 0
    lines = [json.loads(x) for x in good.read_text().splitlines()]
    lines[-1].update(change)  # the UNSUPPORTED row
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps(r) + "\n" for r in lines))
    dst = tmp_path / "dst.sqlite"
    res = cli("import", bad, "--db", dst, "--table", "model_rows")
    assert res.rc == 2 and text in res.err and len(res.err.strip().splitlines()) == 1, res.err
    assert not dst.exists()


@pytest.mark.slow
def test_rows_of_a_real_model_run_round_trip_and_reach_the_report(cli, tmp_path, monkeypatch):
    """The tiny model on CPU through the CLI (prefill, two backends), its rows exported as CSV, imported, and a
    site built from the store: the page holds them (no kernel-level rows of its shape: no prediction, a note)."""
    pytest.importorskip("matplotlib")
    from rich.console import Console

    from attnbench.cli import console
    from test_html_report import make_store

    monkeypatch.setattr(console, "out", Console(width=80))
    monkeypatch.setattr(console, "err", Console(stderr=True, width=80))
    db = make_store(tmp_path / "s.sqlite", "alpha")  # the report needs attempts beside the model rows
    res = cli("model", "--db", db, "--steps", "prefill", "--backends", "sdpa-flash,reference", "--device", "cpu",
              "--max-time", "0.02")
    assert res.rc == 0, res.err
    assert cli("export", "--db", db, "--table", "model_rows", "--out", tmp_path / "m.csv.gz").rc == 0
    res = cli("import", tmp_path / "m.csv.gz", "--db", tmp_path / "copy.sqlite", "--table", "model_rows")
    assert res.rc == 0 and "imported 2 new model rows" in res.err, res.err
    assert _stored(tmp_path / "copy.sqlite") == _stored(db)
    assert cli("report", db, "--out", tmp_path / "site").rc == 0
    page = (tmp_path / "site" / "model.html").read_text()
    assert "prefill steps of tiny × 2 layers, fp32" in page and "No backend of this model has a prediction" in page


def test_a_model_rows_table_from_before_late_samples_reads_and_gains_the_column(tmp_path):
    """A store whose model_rows were written before late_samples existed: read-only, its rows read the
    column as NULL; opened for writing, ensure() adds it, and new rows carry their count."""
    import sqlite3

    db = model_store(tmp_path / "old.sqlite")
    con = sqlite3.connect(db)  # as the table was before the column
    con.execute(f"ALTER TABLE {model_rows.TABLE} DROP COLUMN late_samples")
    con.commit()
    con.close()
    old = _stored(db)
    assert len(old) == len(rows()) and all(r["late_samples"] is None for r in old)
    assert [r["row_key"] for r in old] == [r["row_key"] for r in rows()]
    s = Store(db)
    model_rows.ensure(s.con)
    assert model_rows.insert(s.con, model_rows.finish(_ok("decode-graph", "sdpa-flash", "decode", 300.0,
                                                          launch="graph", timer="cuda_graph", late_samples=2)))
    s.close()
    got = {r["row_key"]: r["late_samples"] for r in _stored(db)}
    assert got["decode-graph"] == 2 and got["prefill-base"] is None
