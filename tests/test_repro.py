"""Issue 42.4: show --repro prints, per attempt, the run command and the YAML grid block that re-measure it,
with the versions it ran under; the printed command, run on CPU, measures the same workload key."""
from __future__ import annotations

import dataclasses
import json
import shlex

import pandas as pd

from attnbench.analysis.repro import kept_options, repro_frame, workload_of
from attnbench.workloads import Workload
from attnbench.workloads.grids import load_yaml_grid
from conftest import FAKES, TINY_GRID, make_row, rows_of


def test_the_yaml_block_names_exactly_the_rows_workload(tmp_path):
    """Every axis goes into the block (a decode with its append, a fresh-inputs workload, a stored 0/1 bool):
    the grid it makes holds one workload, the row's own key."""
    ws = [Workload(mode="decode", batch=2, q_len=1, kv_len=300, q_heads=4, kv_heads=1, head_dim=32, head_dim_v=16,
                   dtype="fp16", page_size=16, decode_append="included", launch="graph", fresh_inputs=True),
          Workload(mode="prefill", batch=1, q_len=64, kv_len=128, q_heads=2, kv_heads=2, head_dim=64, head_dim_v=64,
                   causal=True, causal_align="top_left", window=32, layout="BNHD")]
    for i, w in enumerate(ws):
        row = make_row(i, **{**w.to_dict(), "causal": int(w.causal), "fresh_inputs": int(w.fresh_inputs),
                             "workload_key": w.key(), "torch_version": "2.11.0+cu130", "attnbench_sha": "abc123"})
        frame = repro_frame(pd.DataFrame([row]), [{"run_id": "run-a", "argv": "attnbench run --grid quick --seed 7 "
                                                   "--tol 4 --where batch=1 --backends x,y --db a.sqlite",
                                                   "provenance": {"libraries": {"triton": "3.6.0"}}}])
        r = frame.iloc[0]
        assert r["workload_key"] == w.key() == workload_of(row).key()
        path = tmp_path / f"repro-{w.key()[:8]}.yaml"
        path.write_text(r["yaml"])
        assert [x.key() for x in load_yaml_grid(path)[1]] == [w.key()]
        words = shlex.split(r["command"])
        assert words[:4] == ["attnbench", "run", "--config", path.name]
        assert "--seed" in words and "--tol" in words and "--where" not in words and "a.sqlite" not in words
        assert "torch_version=2.11.0+cu130" in r["versions"] and "attnbench_sha=abc123" in r["versions"]
        assert "triton=3.6.0" in r["versions"]


def test_kept_options_drop_what_selects():
    argv = "attnbench run --grid=quick --where mode=decode --fresh-inputs --seed 3 --plugin p.py --max-time 0.2 -v"
    assert kept_options(argv) == ["--seed", "3", "--plugin", "p.py", "--max-time", "0.2"]


def test_the_printed_command_remeasures_the_same_workload_key(cli, tmp_path, monkeypatch):
    """A run on CPU (a fake backend through --plugin, fresh inputs on one workload), then each printed command
    run in a folder holding its YAML block: the new store's rows have the same workload keys and backend."""
    grid = tmp_path / "g.yaml"
    grid.write_text(TINY_GRID)
    db = tmp_path / "a.sqlite"
    r = cli("run", "--device", "cpu", "--config", grid, "--plugin", FAKES, "--backends", "fake-good",
            "--repeats", "1", "--max-time", "0.05", "--fresh-inputs", "--db", db)
    assert r.rc == 0, r.err
    r = cli("show", "--db", db, "--repro", "--format", "json")
    assert r.rc == 0, r.err
    frame = json.loads(r.out)
    assert len(frame) == 2
    text = cli("show", "--db", db, "--repro")
    assert all(row["command"] in text.out for row in frame)
    monkeypatch.chdir(tmp_path)
    for row in frame:
        (tmp_path / f"repro-{row['workload_key'][:8]}.yaml").write_text(row["yaml"])
        words = shlex.split(row["command"])
        assert words[:2] == ["attnbench", "run"]
        assert cli(*words[1:]).rc == 0
    again = rows_of(tmp_path / "repro.sqlite")
    assert sorted((x["workload_key"], x["backend"]) for x in again) == \
        sorted((x["workload_key"], x["backend"]) for x in frame)
    assert all(x["fresh_inputs"] == 1 for x in again)


def test_the_report_gives_a_repro_per_failed_attempt(cli, tmp_path):
    """The report's table of attempts that did not end OK has a re-measure column: the row's command and block."""
    from attnbench.store.db import Store

    s = Store(tmp_path / "s.sqlite")
    s.start_run("run-a", "default", "g", "attnbench run --grid smoke --seed 5", "CPU test", {"ceilings": {}})
    s.insert_many([make_row(0), make_row(1, status="INCORRECT", reason="wrong", median_us=None, p95_us=None,
                                          samples_us=None)])
    s.finish_run("run-a")
    s.close()
    assert cli("report", tmp_path / "s.sqlite", "--out", tmp_path / "site").rc == 0
    page = (tmp_path / "site" / "tables.html").read_text()
    assert "attnbench run --config repro-" in page and "--seed 5" in page


def test_kept_options_only_from_a_stored_run_command():
    """A row written by `referee` or `selftest` stored its own command line: no word of it is a run option
    (it printed `attnbench run ... referee pub.csv --gpu H200 ...`); a run's word run does not accept is dropped."""
    assert kept_options("attnbench referee pub.csv --gpu H200 --db r.sqlite --seed 3") == []
    assert kept_options("attnbench selftest --device cpu --tag run") == []
    assert kept_options("attnbench model --grid quick") == []
    assert kept_options("attnbench -vv run --seed 2 stray --counters --device=cpu") == \
        ["--seed", "2", "--counters", "--device=cpu"]
    assert kept_options("attnbench run --counters full --tol 4") == ["--counters", "full", "--tol", "4"]


def test_the_option_tables_are_runs_own_parser():
    """Every option `attnbench run` accepts is in exactly one of repro's tables, with its parser's arity."""
    import argparse

    from attnbench.analysis import repro
    from attnbench.cli.commands import run

    parser = argparse.ArgumentParser(add_help=True)
    run.add_arguments(parser)
    accepted = {}
    for action in parser._actions:
        arity = None if action.nargs == "?" else (0 if action.nargs == 0 else 1)
        accepted.update({s: arity for s in action.option_strings})
    tables = {**repro._SELECTING, **repro.MEASURING}
    assert not set(repro._SELECTING) & set(repro.MEASURING)
    assert tables == accepted
