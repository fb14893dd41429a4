"""Shared helpers for the CPU test suite: paths, tiny YAML grids, the CLI called in-process, store rows."""
from __future__ import annotations

import hashlib
import shutil
import sqlite3
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # tiers.py beside this file, also when lab/tests is run alone
from tiers import FULL, full_entry  # noqa: E402

FAKES = str(HERE / "plugins" / "fakes.py")
ALL_FAKES = ("fake-good,fake-crash,fake-hang,fake-oom,fake-wrong,fake-unwritten,fake-liar,fake-refuses,"
             "fake-raises,fake-mutates")


def _console_script() -> str | None:
    """The installed `attnbench` command of this interpreter's environment (or on PATH)."""
    here = Path(sys.executable).parent / "attnbench"
    return str(here) if here.is_file() else shutil.which("attnbench")


ATTNBENCH = _console_script()
needs_console_script = pytest.mark.skipif(ATTNBENCH is None, reason="attnbench command not installed")

# One prefill and one decode workload, tiny enough that every attempt takes well under a second on CPU.
TINY_GRID = """\
name: tiny
workloads:
  - {mode: prefill, batch: 1, q_heads: 2, kv_heads: 1, head_dim: 16, seqlen: 32, dtype: fp32}
  - {mode: decode, batch: 1, q_heads: 2, kv_heads: 1, head_dim: 16, seqlen: 64, dtype: fp32}
"""


@pytest.hookimpl(tryfirst=True)  # before -m deselects: the marker must be there when it looks
def pytest_collection_modifyitems(config, items):
    """Mark `full` the tests tiers.FULL names (the default run deselects them: pyproject's addopts), except
    those named on the command line by node id."""
    matched = set()
    named = set(config.args)  # a test asked for by its node id runs, whatever its tier
    for item in items:
        entry = full_entry(item.nodeid)
        if entry and item.nodeid not in named and item.nodeid.split("[", 1)[0] not in named:
            item.add_marker(pytest.mark.full)
            matched.add(entry)
    modules = {item.nodeid.split("::", 1)[0]: getattr(item, "module", None) for item in items}

    def gone(entry: str) -> bool:  # its file was collected and has no such test (whatever -k or ids selected)
        path, name = entry.split("::", 1)
        module = modules.get(path)
        return module is not None and not hasattr(module, name.split("[", 1)[0])

    config._attnbench_stale_tiers = sorted(e for e in FULL if e not in matched and gone(e))


def pytest_terminal_summary(terminalreporter, config):
    stale = getattr(config, "_attnbench_stale_tiers", [])
    if stale:  # a renamed test runs in the default tier until tiers.FULL names it again
        terminalreporter.write_line("tests/tiers.py names tests that no longer exist: " + ", ".join(stale),
                                    yellow=True)


@pytest.fixture
def fakes_path() -> str:
    return FAKES


@pytest.fixture
def write_yaml(tmp_path):
    """write_yaml(text, name='grid.yaml') -> path of a YAML file under tmp_path."""

    def _write(text: str, name: str = "grid.yaml") -> Path:
        p = tmp_path / name
        p.write_text(text)
        return p

    return _write


@dataclass
class CliResult:
    rc: int
    out: str
    err: str


@pytest.fixture
def cli(capsys, monkeypatch):
    """Call attnbench.cli.main.main(argv) in this process; returns rc, stdout and stderr.

    The rich consoles are made wide so that tables are not truncated in captured output."""
    from rich.console import Console

    from attnbench.cli import console
    from attnbench.cli.main import main

    monkeypatch.setattr(console, "out", Console(width=250))
    monkeypatch.setattr(console, "err", Console(stderr=True, width=250))

    def _run(*argv: str) -> CliResult:
        capsys.readouterr()  # drop anything printed before
        try:
            rc = main([str(a) for a in argv])
        except SystemExit as e:  # --help / --version exit through argparse
            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        cap = capsys.readouterr()
        return CliResult(rc, cap.out, cap.err)

    return _run


def rows_of(db: str | Path, where: str = "") -> list[dict]:
    """Every attempts row of a store, in insertion order, as plain dicts (raw SQLite values)."""
    con = sqlite3.connect(str(db))
    con.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in con.execute(f"SELECT * FROM attempts {where} ORDER BY rowid")]
    finally:
        con.close()


def make_row(i: int = 0, **over) -> dict:
    """A plausible attempts row (as the sweep writes it) without running anything."""
    from attnbench.workloads import Workload
    from attnbench.workloads.cost import flops, io_bytes

    w = Workload(mode="prefill", batch=1, q_len=64 * (i + 1), kv_len=64 * (i + 1), q_heads=4, kv_heads=2,
                 head_dim=32, head_dim_v=32, dtype="bf16", causal=bool(i % 2))
    ok = over.get("status", "OK") == "OK"
    samples = [10.0 + 0.1 * j + i for j in range(12)]
    row = {
        "attempt_key": f"key{i:04d}", "run_id": "run-a", "tag": "default", "backend": f"be{i % 3}",
        "family": "plugin", "role": "contestant", "workload_key": w.key(), **w.to_dict(),
        "causal": int(w.causal), "decode_append": None, "repeat": i % 2, "status": "OK", "reason": None,
        "median_us": samples[6] if ok else None, "p95_us": max(samples) if ok else None,
        "samples_us": samples if ok else None, "calls_per_sample": 3, "timer": "host_clock", "converged": True,
        "rel_err": 0.004, "warmup_calls": 7, "warmup_us": 1234.5, "wall_s": 0.25,
        "phases_s": {"inputs": 0.01, "timing": 0.2}, "cold_start_us": 99.9, "peak_mem_bytes": None,
        "max_abs_err": 1.5e-3, "rmse": 2.25e-4, "cosine": 0.9999991, "err_ratio": 1.0, "ref_err": 1.5e-3,
        "check_detail": {"o": {"max_abs": 1.5e-3, "ratio": 1.0, "ref_max_abs": 1.5e-3}},
        "dispatch_status": "probed", "dispatch_kernels": ["aten::matmul", "aten::bmm"],
        "dispatch_families": ["unfused-gemm"], "flops": float(flops(w)), "bytes": float(io_bytes(w)),
        "device_name": "CPU test", "device_index": None, "created_at": f"2026-01-01T00:00:{i % 60:02d}Z",
    }
    row.update(over)
    return row


def digest(p: Path) -> str:
    """A file's bytes as one hash: a refused write must leave a store (or export) byte for byte."""
    return hashlib.sha256(Path(p).read_bytes()).hexdigest()


def finished_store(p: Path, n: int = 4) -> Path:
    """A store of one finished run ("run-a") holding make_row(0..n-1)."""
    from attnbench.store.db import Store

    s = Store(p)
    s.start_run("run-a", "default", "g", "attnbench run", "CPU test", {"ceilings": {}})
    s.insert_many([make_row(i) for i in range(n)])
    s.finish_run("run-a")
    s.close()
    return p
