"""Names from the data are text, never rich markup: imported backend, device and tag names (and labels)
with brackets print whole through show, analyze, advise and compare, and `[/red]` crashes nothing."""
from __future__ import annotations

import io
import json
from types import SimpleNamespace

import pytest
from rich.console import Console

from attnbench.cli import console
from conftest import make_row
from table_rows import rows_for, store

NAMES = ("flash-attn [v2]", "[/red]")  # a name rich would eat, a closing tag that makes rich raise
DEVICE, TAG = "GPU [bold]H", "[/]tag"
W1 = "prefill B=1 N=1024 Hq=8 Hkv=8 D=64 bf16 causal"


@pytest.fixture
def stores(cli, tmp_path):
    home = {"w1": {NAMES[0]: [10, 10, 10], NAMES[1]: [20, 20, 20]}, "w2": {NAMES[0]: [30, 30, 30],
                                                                          NAMES[1]: [15, 15, 15]}}
    away = {"w1": {NAMES[0]: [15, 15, 15], NAMES[1]: [25, 25, 25]}}  # both slower there: compare lists both
    return (store(cli, tmp_path, "home", rows_for(home, device=DEVICE, tag=TAG)),
            store(cli, tmp_path, "away", rows_for(away, device=DEVICE, tag=TAG)))


@pytest.fixture
def failed_store(cli, tmp_path):
    """Failed attempts imported from an export whose names and reasons hold markup."""
    rows = [make_row(i, backend=NAMES[i % 2], device_name=DEVICE, tag=TAG, attempt_key=f"k{i}", status="CRASH",
                     reason=f"worker died [/red] [bold]{i}", samples_us=None, median_us=None, p95_us=None)
            for i in range(4)] + [make_row(9, backend=NAMES[0], device_name=DEVICE, tag=TAG, attempt_key="ok")]
    path = tmp_path / "failed.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    db = tmp_path / "failed.sqlite"
    res = cli("import", path, "--db", db)
    assert res.rc == 0, res.err
    return db


def flat(res) -> str:
    assert res.rc == 0, res.err
    return " ".join(res.out.split())


@pytest.mark.parametrize("width", [80, 250])  # the compact table and the wide one
def test_show_prints_names_whole(cli, monkeypatch, stores, width):
    monkeypatch.setattr(console, "out", Console(width=width))
    out = flat(cli("show", "--db", stores[0]))
    assert all(n in out for n in NAMES) and "GPU [bold]H" in out, out
    out = flat(cli("show", "--db", stores[0], "--rank", "--status"))
    assert all(n in out for n in NAMES) and "GPU [bold]H" in out, out


def test_show_failures_prints_names_and_reasons_as_text(cli, failed_store):
    out = flat(cli("show", "--db", failed_store, "--failures"))
    assert all(n in out for n in NAMES) and "worker died [/red] [bold]0" in out, out


def test_analyze_prints_names_labels_and_devices_as_text(cli, stores):
    out = flat(cli("analyze", stores[0], f"[red]x={stores[1]}"))
    assert "[red]x" in out and "GPU [bold]H" in out, out


def test_advise_prints_names_as_text(cli, stores):
    out = flat(cli("advise", *stores, "--workload", W1))
    assert f"use {NAMES[0]}:" in out and f"runner-up {NAMES[1]}" in out and "GPU [bold]H" in out, out


def test_compare_prints_names_as_text(cli, stores):
    res = cli("compare", stores[0], stores[1])
    assert res.rc in (0, 3), res.err
    out = " ".join(res.out.split())
    assert all(n in out for n in NAMES) and "GPU [bold]H" in out, out


def test_compare_prints_store_paths_as_text(cli, stores, tmp_path):
    """The header names BASE and NEW as given: a folder named like markup prints whole (it vanished)."""
    odd = tmp_path / "[red]runs"
    odd.mkdir()
    base, new = odd / "home.sqlite", odd / "away.sqlite"
    base.write_bytes(stores[0].read_bytes())
    new.write_bytes(stores[1].read_bytes())
    res = cli("compare", base, new)
    assert res.rc in (0, 3), res.err
    assert f"compare {base} -> {new}:" in " ".join(res.out.split()).replace(" -> ", " -> "), res.out


def test_model_progress_names_a_plugin_backend_as_text():
    from attnbench.cli.commands.model import _Progress

    con = Console(file=io.StringIO(), force_terminal=True, width=80, color_system=None)
    status = con.status("starting")
    job = SimpleNamespace(spec=SimpleNamespace(label=lambda: "prefill B1 N64"), backend=SimpleNamespace(name=NAMES[1]))
    _Progress(status).attempt(job)  # raised MarkupError
    con.print(status.renderable)
    assert "prefill B1 N64: [/red]" in con.file.getvalue()


def test_import_and_export_echo_a_path_with_brackets_whole(cli, stores, tmp_path):
    """The paths import and export name are data: a folder named like markup prints whole (it vanished)."""
    odd = tmp_path / "[red]runs"
    odd.mkdir()
    out = odd / "x.jsonl"
    res = cli("export", "--db", stores[0], "--out", out)
    assert res.rc == 0 and str(out) in " ".join(res.err.split()), res.err
    runs = odd / "x.runs.jsonl"
    assert cli("export", "--db", stores[0], "--table", "runs", "--out", runs).rc == 0
    res = cli("import", runs, "--table", "runs", "--db", odd / "y.sqlite")
    assert res.rc == 0 and str(odd / "y.sqlite") in " ".join(res.err.split()), res.err
