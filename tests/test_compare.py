"""`attnbench compare`: a planted slowdown is caught (exit 3), an identical store passes (exit 0)."""
from __future__ import annotations

import json

from table_rows import rows_for, store

BASE = {"w1": {"a": [10.0, 10.1, 9.9], "b": [20.0, 20.2, 19.8]}, "w2": {"a": [30.0, 30.3, 29.7]}}


def test_a_planted_15_percent_slowdown_regresses(cli, tmp_path):
    base = store(cli, tmp_path, "base", rows_for(BASE))
    slow = {"w1": {"a": [m * 1.15 for m in BASE["w1"]["a"]], "b": BASE["w1"]["b"]}, "w2": BASE["w2"]}
    new = store(cli, tmp_path, "new", rows_for(slow))
    res = cli("compare", base, new, "--json", tmp_path / "c.json")
    assert res.rc == 3, res.err
    assert "REGRESSED: 1 line(s)" in res.out
    rows = json.loads((tmp_path / "c.json").read_text())["rows"]
    (r,) = [x for x in rows if x["verdict"] == "regressed"]
    assert r["backend"] == "a" and r["kv_len"] == 1024 and abs(r["ratio"] - 1.15) < 1e-9 and r["lo"] > 1
    assert {x["verdict"] for x in rows if x is not r} == {"same"}


def test_an_identical_store_passes_and_a_faster_one_is_not_a_regression(cli, tmp_path):
    base = store(cli, tmp_path, "base", rows_for(BASE))
    res = cli("compare", base, base)
    assert res.rc == 0 and "OK: nothing regressed" in res.out
    fast = store(cli, tmp_path, "fast", rows_for({"w1": {"a": [5, 5, 5], "b": BASE["w1"]["b"]}, "w2": BASE["w2"]}))
    res = cli("compare", base, fast)
    assert res.rc == 0 and "improved 1" in res.out


def test_below_the_threshold_or_without_separation_passes(cli, tmp_path):
    base = store(cli, tmp_path, "base", rows_for(BASE))
    new = store(cli, tmp_path, "new", rows_for({**BASE, "w2": {"a": [m * 1.15 for m in BASE["w2"]["a"]]}}))
    assert cli("compare", base, new, "--threshold", "1.2").rc == 0  # 15% is under a 20% threshold
    one = {"w1": {"a": [10.0, 10.0]}}
    b1 = store(cli, tmp_path, "b1", rows_for(one, samples=1))
    n1 = store(cli, tmp_path, "n1", rows_for({"w1": {"a": [20.0, 20.0]}}, samples=1))
    res = cli("compare", b1, n1)
    assert res.rc == 0 and "slower 1" in res.out and "cannot be separated at all" in res.out


def test_a_backend_no_longer_ok_is_lost(cli, tmp_path):
    base = store(cli, tmp_path, "base", rows_for(BASE))
    new = store(cli, tmp_path, "new", rows_for({"w1": BASE["w1"]}))  # w2 not measured: missing, not lost
    res = cli("compare", base, new)
    assert res.rc == 0 and "missing 1" in res.out


def test_bad_input_exits_2(cli, tmp_path):
    base = store(cli, tmp_path, "base", rows_for(BASE))
    for argv, text in ((["compare", base, tmp_path / "absent.sqlite"], "store not found"),
                       (["compare", base, base, "--threshold", "0.9"], "--threshold must be above 1"),
                       (["compare", base], "the following arguments are required")):
        res = cli(*argv)
        assert res.rc == 2 and text in res.err, res.err
