"""`attnbench analyze` on stores built through `import --format table`, whose winners, separation,
transfer costs and winner changes are known by construction."""
from __future__ import annotations

import json

import pytest

from table_rows import rows_for, store

# GPU-X: w1 a 2x ahead; w2 a tie (a wins by name, not separated); w3 c ahead; w4 a ahead by the medians
# but one repeat in three reverses it; w5, w6 a 3x ahead
X = {"w1": {"a": [10, 10, 10], "b": [20, 20, 20]}, "w2": {"a": [10, 10, 10], "b": [10, 10, 10]},
     "w3": {"c": [5, 5, 5], "a": [10, 10, 10]}, "w4": {"a": [10, 30, 10], "b": [20, 20, 20]},
     "w5": {"a": [10, 10, 10], "b": [30, 30, 30]}, "w6": {"a": [10, 10, 10], "b": [30, 30, 30]}}
# GPU-Y: w1 b wins (X's a costs 1.5 there); w3 has no c (X's winner unavailable); the rest as X
Y = {"w1": {"a": [15, 15, 15], "b": [10, 10, 10]}, "w2": {"a": [10, 10, 10], "b": [10, 10, 10]},
     "w3": {"a": [10, 10, 10], "b": [12, 12, 12]}, "w4": {"a": [10, 10, 10], "b": [20, 20, 20]},
     "w5": {"a": [10, 10, 10], "b": [30, 30, 30]}, "w6": {"a": [10, 10, 10], "b": [30, 30, 30]}}


@pytest.fixture
def xy(cli, tmp_path):
    return store(cli, tmp_path, "x", rows_for(X, device="GPU-X")), store(cli, tmp_path, "y", rows_for(Y, device="GPU-Y"))


def run(cli, tmp_path, *argv) -> dict:
    out = tmp_path / "a.json"
    res = cli("analyze", *argv, "--json", out, "--md", tmp_path / "a.md")
    assert res.rc == 0, res.err
    return json.loads(out.read_text())


def test_winners_and_their_separation(cli, tmp_path, xy):
    r = run(cli, tmp_path, *xy)
    assert set(r) >= {"winners", "transfer", "pairs", "outcomes", "dispatch", "correctness", "efficiency"}
    won = {(w["side"], w["kv_len"]): w for w in r["winners"]["rows"]}
    assert won["x", 1024]["backend"] == "a" and won["x", 1024]["separated"] and won["x", 1024]["ratio"] == 2.0
    assert won["x", 2048]["backend"] == "a" and won["x", 2048]["ratio"] == 1.0 and not won["x", 2048]["separated"]
    assert won["x", 8192]["backend"] == "a" and not won["x", 8192]["separated"]  # the noisy repeat
    assert won["x", 4096]["backend"] == "c" and won["x", 4096]["separation"] == "paired-repeats"
    (sx,) = [s for s in r["winners"]["separated"] if s["side"] == "x"]
    assert (sx["mode"], sx["contested"], sx["separated"]) == ("prefill", 6, 4)


def test_transfer_costs_and_unavailable_winners(cli, tmp_path, xy):
    r = run(cli, tmp_path, *xy)
    t = {(x["source"], x["target"]): x for x in r["transfer"]}
    xy_all = t["x", "y"]["all"]
    assert (xy_all["n"], xy_all["unavailable"], xy_all["compared"]) == (6, 1, 5)  # c was not measured on y
    assert xy_all["median"] == 1.0 and xy_all["max"] == 1.5  # a on y's w1: 15 / 10
    assert xy_all["distribution"]["1"] == 4 and xy_all["distribution"]["<=1.5"] == 1
    xy_sep = t["x", "y"]["separated"]
    assert (xy_sep["n"], xy_sep["unavailable"], xy_sep["max"]) == (4, 1, 1.5)
    yx = t["y", "x"]["all"]
    assert yx["unavailable"] == 0 and yx["max"] == 2.0  # y's b on x's w1 (20/10), y's a on x's w3 (10/5)


def test_winner_change_rate_and_a_pair_too_small_to_read(cli, tmp_path, xy):
    r = run(cli, tmp_path, *xy)
    (p,) = r["pairs"]["rows"]
    assert (p["shared"], p["changed"], p["separated"], p["changed_separated"]) == (6, 2, 4, 2)
    assert p["too_small"] and not p["same_model"] and r["pairs"]["noise_floor"] == []
    changed = {(c["kv_len"], c["winner_a"], c["winner_b"]) for c in r["pairs"]["changes"]}
    assert changed == {(1024, "a", "b"), (4096, "c", "a")}
    md = (tmp_path / "a.md").read_text()
    assert "Winner changes" in md and "Changed winners (2" in md


def test_two_stores_of_one_gpu_model_are_the_noise_floor(cli, tmp_path):
    a = store(cli, tmp_path, "a", rows_for(X))
    b = store(cli, tmp_path, "b", rows_for(X))  # same device, tag and keys: apart only by label
    res = cli("analyze", a, b)
    assert res.rc == 0, res.err
    assert "noise floor (a vs b" in res.out and "changes on 0% of 6 workloads" in res.out


def test_by_launch_compares_eager_with_graph_in_the_same_store(cli, tmp_path):
    rows = rows_for({"w1": {"a": [10, 10, 10], "b": [20, 20, 20]}}) + \
        rows_for({"w1": {"a": [10, 10, 10], "b": [8, 8, 8]}}, launch="graph")
    db = store(cli, tmp_path, "s", rows)
    other = store(cli, tmp_path, "o", rows_for({"w1": {"b": [1, 1, 1]}}, launch="graph"))
    r = run(cli, tmp_path, db, other, "--by", "launch")
    t = {(x["source"], x["target"]): x["all"] for x in r["transfer"]}
    # eager's a on graph: 10 / 8; store o's graph row is another store's and is not matched
    assert t["eager", "graph"]["n"] == 1 and t["eager", "graph"]["median"] == 1.25
    assert t["graph", "eager"]["median"] == 2.0


def test_one_sample_rows_say_separation_cannot_be_established(cli, tmp_path):
    db = store(cli, tmp_path, "one", rows_for({"w1": {"a": [10, 10], "b": [30, 30]}}, samples=1))
    r = run(cli, tmp_path, db)
    (w,) = r["winners"]["rows"]
    assert w["separation"] == "none" and not w["separated"]
    res = cli("analyze", db)
    assert "none 1" in res.out


@pytest.mark.parametrize("argv,text", [
    (["{d}/absent.sqlite"], "store not found"),
    (["{d}/x.sqlite", "x={d}/y.sqlite"], "two stores are labelled 'x'"),
    (["{d}/x.sqlite", "--by", "color"], "invalid choice"),
    (["{d}/x.sqlite", "--json", "{d}/no/dir/a.json"], "directory of --json does not exist"),
])
def test_bad_input_is_one_line_and_exit_2(cli, tmp_path, xy, argv, text):
    res = cli("analyze", *(a.format(d=tmp_path) for a in argv))
    assert res.rc == 2 and text in res.err and len(res.err.strip().splitlines()) == 1


def test_the_terminal_summary_fits_80_columns(tmp_path, cli, xy, monkeypatch):
    from rich.console import Console

    from attnbench.cli import console

    monkeypatch.setattr(console, "out", Console(width=80, record=True))
    assert cli("analyze", *xy).rc == 0
    text = console.out.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "Transfer cost" in text and "Winner changes" in text


def test_gpu_uuids_are_shortened_to_prefixes_that_still_differ():
    from attnbench.analysis.sides import short_uuids

    got = short_uuids({"GPU-5cc530cd-9756-71c8", "GPU-ee537f37-4f29-0978", "GPU-5cc530cd-aaaa-0000", "-"})
    assert got["GPU-ee537f37-4f29-0978"] == "GPU-ee537f37"
    assert got["GPU-5cc530cd-9756-71c8"] == "GPU-5cc530cd-9" and got["GPU-5cc530cd-aaaa-0000"] == "GPU-5cc530cd-a"
    assert got["-"] == "-"


def _host(db, cpu: str, op_us: float) -> None:
    """Give every run of a store the host facts a measured run records."""
    import sqlite3

    with sqlite3.connect(db) as con:
        con.execute("UPDATE runs SET provenance = ?",
                    (json.dumps({"host_cpu": cpu, "ceilings": {"host_op_us": op_us}}),))


def test_runs_on_hosts_of_different_pace_are_named_with_their_host_bound_rows(cli, tmp_path):
    import sqlite3

    rows = rows_for({"w1": {"a": [10, 10, 10], "b": [20, 20, 20]}, "w2": {"a": [10, 10, 10], "b": [20, 20, 20]}})
    a, b = store(cli, tmp_path, "a", rows), store(cli, tmp_path, "b", rows)
    for db in (a, b):  # w1 (N 1024) host-bound, as a timed eager row over its kernel time says
        with sqlite3.connect(db) as con:
            con.execute("UPDATE attempts SET host_bound = 1 WHERE q_len = 1024")
    _host(a, "CPU One", 8.0)
    _host(b, "CPU Two", 8.4)  # 1.05x apart: within the spread one host shows
    r = run(cli, tmp_path, a, b)
    assert r["host_pace"] is None
    assert {s["label"]: (s["host_cpus"], s["host_op_us"]) for s in r["sources"]} == {
        "a": (["CPU One"], [8.0, 8.0]), "b": (["CPU Two"], [8.4, 8.4])}
    _host(b, "CPU Two", 11.0)
    r = run(cli, tmp_path, a, b)
    assert r["host_pace"]["spread"] == pytest.approx(11.0 / 8.0)
    assert r["host_pace"]["host_bound_rows"] == 2 * 6  # w1's rows in both stores
    out = cli("analyze", a, b).out
    assert "host 8.00 us/op" in out and "differ 1.38x in eager-op pace (8.00-11.00 us/op)" in out
    assert "12 host-bound eager rows compare hosts" in out
    assert max(len(line) for line in out.splitlines() if "host" in line) <= 80


def test_the_nodes_of_one_run_that_differ_in_pace_are_named_too(cli, tmp_path):
    import sqlite3

    a = store(cli, tmp_path, "a", rows_for({"w1": {"a": [10, 10, 10], "b": [20, 20, 20]}}))
    nodes = [{"label": "n0:cuda:0", "host_cpu": "CPU One", "ceilings": {"host_op_us": 8.0}},
             {"label": "n1:cuda:0", "host_cpu": "CPU Two", "ceilings": {"host_op_us": 12.0}}]
    with sqlite3.connect(a) as con:  # a Ray run over two nodes: each device's ceilings measured on its node
        con.execute("UPDATE runs SET provenance = ?", (json.dumps({"devices": nodes}),))
        con.execute("UPDATE attempts SET host_bound = 1 WHERE backend = 'a'")
    r = run(cli, tmp_path, a)
    (src,) = r["sources"]
    assert src["host_cpus"] == ["CPU One", "CPU Two"] and src["host_op_us"] == [8.0, 12.0]
    assert r["host_pace"]["spread"] == pytest.approx(1.5) and r["host_pace"]["host_bound_rows"] == 3
    assert (src["runs"], src["runs_paced"]) == (1, 1) and "did not record" not in cli("analyze", a).out


def test_a_pace_that_only_some_of_a_stores_runs_recorded_says_so(cli, tmp_path):
    import sqlite3

    a = store(cli, tmp_path, "a", rows_for({"w1": {"a": [10, 10, 10], "b": [20, 20, 20]}}))
    with sqlite3.connect(a) as con:  # the rows split over two runs, the later of which measured its host
        con.execute("UPDATE attempts SET run_id = 'later' WHERE repeat = 2")
        (prov,) = con.execute("SELECT provenance FROM runs").fetchone()
        con.execute("INSERT INTO runs (run_id, provenance) VALUES ('later', ?)",
                    (json.dumps(json.loads(prov) | {"ceilings": {"host_op_us": 9.0}}),))
    (src,) = run(cli, tmp_path, a)["sources"]
    assert (src["runs"], src["runs_paced"], src["host_op_us"]) == (2, 1, [9.0, 9.0])
    out = cli("analyze", a).out
    assert "host 9.00 us/op" in out and "host pace from 1 of its 2 runs (the others did not record it)" in out
    assert max(len(line) for line in out.splitlines()) <= 80
