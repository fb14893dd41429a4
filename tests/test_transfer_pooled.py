"""`analyze`: the transfer cost pooled over every ordered pair of sides (one figure for a study), and the
words "separation cannot be established" for imported single-sample medians."""
from __future__ import annotations

import json

from table_rows import rows_for, store

# x: a wins w1 and w2; y: b wins w1 (x's a costs 1.5 there), a wins w2; z: b wins both (a costs 2 on w2)
X = {"w1": {"a": [10, 10, 10], "b": [20, 20, 20]}, "w2": {"a": [10, 10, 10], "b": [20, 20, 20]}}
Y = {"w1": {"a": [15, 15, 15], "b": [10, 10, 10]}, "w2": {"a": [10, 10, 10], "b": [20, 20, 20]}}
Z = {"w1": {"a": [15, 15, 15], "b": [10, 10, 10]}, "w2": {"a": [20, 20, 20], "b": [10, 10, 10]}}


def test_the_transfer_cost_pooled_over_every_ordered_pair(cli, tmp_path):
    sides = [store(cli, tmp_path, n, rows_for(t, device=f"GPU-{n}")) for n, t in (("x", X), ("y", Y), ("z", Z))]
    res = cli("analyze", *sides, "--json", tmp_path / "a.json", "--md", tmp_path / "a.md")
    assert res.rc == 0, res.err
    rows = json.loads((tmp_path / "a.json").read_text())["transfer"]
    pairs = [r for r in rows if r["source"] != "(all)"]
    (pooled,) = [r for r in rows if r["source"] == "(all)"]  # was: none, only the 6 pairs' rows
    assert len(pairs) == 6 and pooled["target"] == "(all)" and pooled["pairs"] == 6
    # every matched workload of every ordered pair, once: x>y 1.5 1, x>z 1.5 2, y>x 2 1, y>z 1 2, z>x 2 2, z>y 1 2
    assert pooled["all"]["n"] == sum(r["all"]["n"] for r in pairs) == 12
    assert pooled["all"]["median"] == 1.75 and pooled["all"]["max"] == 2.0  # no one pair's median is 1.75
    assert pooled["all"]["distribution"] == {"1": 4, "<=1.05": 0, "<=1.10": 0, "<=1.25": 0, "<=1.5": 2, "<=2": 6,
                                             ">2": 0}
    assert pooled["separated"]["n"] == sum(r["separated"]["n"] for r in pairs)
    (line,) = [x.split() for x in res.out.splitlines() if x.split()[:2] == ["(all)", "(all)"]]
    assert line[2:7] == ["prefill", "12", "0", "1.750", "2.000"] and "(all): the 6 ordered pairs pooled" in res.out
    assert "(all)" in (tmp_path / "a.md").read_text()


def test_two_stores_pool_their_two_ordered_pairs_and_one_store_has_none(cli, tmp_path):
    x = store(cli, tmp_path, "x", rows_for(X, device="GPU-x"))
    y = store(cli, tmp_path, "y", rows_for(Y, device="GPU-y"))
    res = cli("analyze", x, y, "--json", tmp_path / "a.json")
    (pooled,) = [r for r in json.loads((tmp_path / "a.json").read_text())["transfer"] if r["source"] == "(all)"]
    assert pooled["pairs"] == 2 and pooled["all"]["n"] == 4
    res = cli("analyze", x, "--json", tmp_path / "b.json")
    assert res.rc == 0 and json.loads((tmp_path / "b.json").read_text())["transfer"] == []


def test_single_sample_imports_say_separation_cannot_be_established(cli, tmp_path):
    # one imported median per repeat, two repeats: nothing to resample
    one = store(cli, tmp_path, "one", rows_for({"w1": {"a": [10, 10], "b": [30, 30]}}, samples=1))
    res = cli("analyze", one, "--md", tmp_path / "a.md")
    assert res.rc == 0, res.err
    assert "separation cannot be established" in res.out  # was: only "none 1" in the bootstrap column
    assert "separation cannot be established" in (tmp_path / "a.md").read_text()
    many = store(cli, tmp_path, "many", rows_for({"w1": {"a": [10, 10, 10], "b": [30, 30, 30]}}))
    assert "cannot be established" not in cli("analyze", many).out


def test_the_report_lists_the_pooled_transfer_cost(cli, tmp_path):
    sides = [store(cli, tmp_path, n, rows_for(t, device=f"GPU-{n}")) for n, t in (("x", X), ("y", Y), ("z", Z))]
    res = cli("report", *sides, "--out", tmp_path / "site")
    assert res.rc == 0, res.err
    page = (tmp_path / "site" / "portability.html").read_text()
    assert "(all): the 6 ordered pairs pooled" in page and "1.750" in page  # no one pair's median is 1.75
