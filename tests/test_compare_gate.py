"""`compare`'s regression gate: reruns of the same grid pass, slowdowns beyond the between-run floor of
their class fail (exit 3), host-bound / clock-low / unmeasured / <3-repeat lines are reported, not gated;
every row names its device; a threshold that gates nothing is refused."""
from __future__ import annotations

import itertools
import json
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from attnbench.analysis.regress import FLOORS, compare, verdict
from attnbench.analysis.stats import json_list
from attnbench.store import sources
from table_rows import rows_for, store

H200 = Path(__file__).resolve().parents[1] / "results" / "h200"
QUICK = ["quick-2026-11-30", "quick-2026-11-30b", "quick-2026-11-30c"]


@pytest.fixture(scope="module")
def quick() -> dict[str, pd.DataFrame]:
    df = sources.load([f"{n}={H200 / n}.jsonl.gz" for n in QUICK]).attempts
    return {n: df[df["label"] == n].reset_index(drop=True) for n in QUICK}


def _slowed(df: pd.DataFrame, backend: str, s: float) -> pd.DataFrame:
    out = df[df["backend"] == backend].copy()
    ok = out["status"] == "OK"
    out["samples_us"] = [v if not good else np.asarray(json_list(v)) * s for v, good in zip(out["samples_us"], ok)]
    for c in ("median_us", "p95_us"):
        out.loc[ok, c] = pd.to_numeric(out.loc[ok, c]) * s
    return out


def test_a_rerun_of_the_quick_grid_regresses_nothing(quick):
    # was: 5 lines regressed b -> c and 11 c -> b (µs-scale eager rows, a compile graph line at 1.31x)
    for a, b in (("quick-2026-11-30b", "quick-2026-11-30c"), ("quick-2026-11-30c", "quick-2026-11-30b")):
        rows = compare(quick[a], quick[b])
        s = verdict(rows)
        assert s["regressed"] == 0 and s["lost"] == 0 and s["compared"] > 400, (a, b, s)
        old = [r for r in rows if r["ratio"] and r["ratio"] >= 1.05 and r["lo"] is not None and r["lo"] > 1]
        assert len(old) >= 5  # what the old rule (interval above 1) failed on
        if a.endswith("b"):  # decode B1 N1024 compile graph: 16.0 > 21.0 µs, all three repeats moved
            (line,) = [r for r in old if r["backend"] == "compile" and r["launch"] == "graph"]
            assert (line["gate"], line["verdict"]) == ("compiled <50us", "slower") and line["lo"] > 1.3


@pytest.mark.parametrize("a,b", list(itertools.permutations(QUICK, 2)))
def test_every_ordered_pair_of_the_three_reruns_regresses_nothing(quick, a, b):
    assert verdict(compare(quick[a], quick[b]))["regressed"] == 0


def test_a_planted_slowdown_on_a_rerun_is_caught_at_the_graph_floor(quick):
    base, new = quick["quick-2026-11-30b"], quick["quick-2026-11-30c"]
    flash = base[base["backend"] == "sdpa-flash"]
    for s, caught in ((1.0, False), (1.03, False), (1.06, True), (1.10, True)):
        rows = compare(flash, _slowed(new, "sdpa-flash", s))
        hit = [r for r in rows if r["verdict"] == "regressed"]
        assert bool(hit) == caught, s
        assert all(r["gate"] == "graph" and r["lo"] > FLOORS["graph"] for r in hit)


def _set(db: Path, sql: str) -> None:
    with sqlite3.connect(db) as c:
        c.execute(sql)


def test_each_class_fails_only_beyond_its_floor(cli, tmp_path):
    tight = [10.0, 10.01, 9.99]
    base = store(cli, tmp_path, "base", rows_for({"w1": {"e": tight}}, launch="graph")
                 + rows_for({"w2": {"e": tight}}))
    for s, rc in ((1.07, 0), (1.12, 3)):  # eager: floor 1.08 (the old rule failed 1.07: interval above 1)
        new = store(cli, tmp_path, f"e{s}", rows_for({"w1": {"e": tight}}, launch="graph")
                    + rows_for({"w2": {"e": [m * s for m in tight]}}))
        res = cli("compare", base, new, "--json", tmp_path / "c.json")
        assert res.rc == rc, (s, res.out)
        (r,) = [x for x in json.loads((tmp_path / "c.json").read_text())["rows"] if x["kv_len"] == 2048]
        assert (r["gate"], r["floor"], r["verdict"]) == ("eager", 1.08, "slower" if rc == 0 else "regressed")
    new = store(cli, tmp_path, "g", rows_for({"w1": {"e": [m * 1.06 for m in tight]}}, launch="graph")
                + rows_for({"w2": {"e": tight}}))
    assert cli("compare", base, new).rc == 3  # graph: floor 1.05
    small = [16.0, 16.01, 15.99]  # a compile-based backend at µs scale: floor 1.35
    cb = store(cli, tmp_path, "cb", rows_for({"w1": {"c": small}}, launch="graph", family="compile"))
    for s, rc in ((1.31, 0), (1.5, 3)):
        cn = store(cli, tmp_path, f"cn{s}", rows_for({"w1": {"c": [m * s for m in small]}}, launch="graph",
                                                       family="compile"))
        assert cli("compare", cb, cn).rc == rc, s


def test_host_bound_clock_low_unmeasured_and_few_repeat_lines_are_reported_not_gated(cli, tmp_path):
    tight = [10.0, 10.01, 9.99]
    base = store(cli, tmp_path, "base", rows_for({"w1": {"a": tight}}))
    cases = {"host-bound": "host_bound = 1", "clock-low": "clock_low = 1",
             "host unmeasured": "timer = 'cuda_event', host_bound = NULL"}
    for i, (gate, sql) in enumerate(cases.items()):
        new = store(cli, tmp_path, f"n{i}", rows_for({"w1": {"a": [m * 2 for m in tight]}}))
        _set(new, f"UPDATE attempts SET {sql}")
        res = cli("compare", base, new, "--json", tmp_path / "c.json")
        assert res.rc == 0 and "not gated" in res.out and gate in res.out, (gate, res.out)
        out = json.loads((tmp_path / "c.json").read_text())
        (r,) = out["rows"]
        assert (r["verdict"], r["gate"], r["floor"]) == ("slower", gate, None)
        assert out["summary"]["not_gated"][gate] == 1
    two = store(cli, tmp_path, "two", rows_for({"w1": {"a": [10.0, 10.0]}}, spread=0.01))
    twice = store(cli, tmp_path, "twice", rows_for({"w1": {"a": [20.0, 20.0]}}, spread=0.01))
    res = cli("compare", two, twice)
    assert res.rc == 0 and "<3 repeats 1" in res.out  # pooled samples are blind to the drift between processes
    assert "no compared line is gated" in res.out and "no compared line" not in cli("compare", base, base).out


def test_two_devices_lines_carry_their_device(cli, tmp_path):
    times = {"w1": {"a": [10.0, 10.01, 9.99]}}
    slow = {"w1": {"a": [20.0, 20.01, 19.99]}}
    base = store(cli, tmp_path, "base", rows_for(times, device="GPU-X") + rows_for(times, device="GPU-Y"))
    new = store(cli, tmp_path, "new", rows_for(slow, device="GPU-X") + rows_for(slow, device="GPU-Y"))
    res = cli("compare", base, new, "--json", tmp_path / "c.json")
    assert res.rc == 3
    rows = json.loads((tmp_path / "c.json").read_text())["rows"]
    assert sorted(r["device_name"] for r in rows if r["verdict"] == "regressed") == ["GPU-X", "GPU-Y"]
    table = [line for line in res.out.splitlines() if " a " in line and "20.0" in line]
    assert len(table) == 2 and len(set(table)) == 2 and "GPU-X" in table[0] + table[1]  # two lines, told apart


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "0", "-1", "1"])
def test_a_threshold_that_gates_nothing_is_refused(cli, tmp_path, value):
    base = store(cli, tmp_path, "base", rows_for({"w1": {"a": [10.0, 10.01, 9.99]}}))
    res = cli("compare", base, base, f"--threshold={value}")  # inf exited 0 whatever NEW held
    assert res.rc == 2 and res.out == "" and len(res.err.strip().splitlines()) == 1, res.err
    assert "--threshold must be above 1 and finite" in res.err
