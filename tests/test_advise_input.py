"""`advise` on small bad inputs and on a workload it did not measure: an empty --workload is one line and
exit 2; the nearest workload is said by the fields that differ only, and its time as measured there."""
from __future__ import annotations

import pytest

from table_rows import rows_for, store

HOME = {"w1": {"a": [10, 10, 10], "b": [20, 20, 20]}}


@pytest.fixture
def home(cli, tmp_path):
    # a decode workload beside: its rows give decode_append a value, so the prefill rows' is empty (NaN)
    rows = rows_for(HOME, device="GPU-H") + rows_for({"w2": {"a": [5, 5, 5]}}, device="GPU-H", mode="decode",
                                                     causal="false")
    return store(cli, tmp_path, "home", rows)


@pytest.mark.parametrize("text", ["", "   "])
def test_an_empty_workload_is_one_line_and_exit_2(cli, home, text):
    res = cli("advise", home, "--workload", text)
    assert res.rc == 2, res.err
    assert res.err.startswith("attnbench: error: --workload is empty") and len(res.err.splitlines()) == 1, res.err
    assert res.out == ""


def test_the_nearest_lists_only_the_fields_that_differ(cli, home):
    res = cli("advise", home, "--workload", "prefill B=2 N=1024 Hq=8 Hkv=8 D=64 bf16 causal")
    assert res.rc == 0, res.err
    out = " ".join(res.out.split())
    assert "(differs: B 1 (asked 2))" in out, out  # no field whose stored value is empty (decode_append)
    assert "decode_append" not in out and "None" not in out


def test_the_nearest_time_is_said_as_measured_there_not_expected(cli, home):
    out = " ".join(cli("advise", home, "--workload", "prefill B=2 N=1024 Hq=8 Hkv=8 D=64 bf16 causal").out.split())
    assert "use a: 10.0 µs measured at B1 (p5" in out and "expected" not in out, out
    out = " ".join(cli("advise", home, "--workload", "prefill B=1 N=1024 Hq=8 Hkv=8 D=64 bf16 causal").out.split())
    assert "use a: 10.0 µs measured (p5" in out and "expected" not in out, out
