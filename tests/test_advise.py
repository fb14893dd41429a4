"""`attnbench advise`: the recommendation on the first store, how sure it is, and its cost elsewhere."""
from __future__ import annotations

import json

import pytest

from table_rows import rows_for, store

HOME = {"w1": {"a": [10, 10, 10], "b": [20, 20, 20]}, "w2": {"a": [30, 30, 30], "b": [31, 31, 31]}}
AWAY = {"w1": {"a": [15, 15, 15], "b": [10, 10, 10]}}
W1 = "prefill B=1 N=1024 Hq=8 Hkv=8 D=64 bf16 causal"


@pytest.fixture
def stores(cli, tmp_path):
    return store(cli, tmp_path, "home", rows_for(HOME, device="GPU-H")), \
        store(cli, tmp_path, "away", rows_for(AWAY, device="GPU-A"))


def text(res) -> str:
    assert res.rc == 0, res.err
    return " ".join(res.out.split())


def test_the_winner_of_the_measured_workload_and_its_cost_elsewhere(cli, stores):
    out = text(cli("advise", *stores, "--workload", W1))
    assert "on home (GPU-H): measured" in out
    assert "use a: 10.0 µs measured (p5" in out and "lead separated: runner-up b 20.0 µs, 2.00x" in out
    assert "away GPU-A 1.50 b 10.0" in out  # a takes 15 where b takes 10


def test_an_unmeasured_workload_gets_the_nearest_said_as_such(cli, stores):
    out = text(cli("advise", *stores, "--workload", "prefill B=2 N=1024 Hq=8 D=64 bf16 causal"))
    assert "not measured; nearest measured: prefill B1 N1024" in out and "B 1 (asked 2)" in out
    assert "use a:" in out
    out = text(cli("advise", stores[0], "--workload", "prefill B=1 N=2048 Hq=8 D=64 bf16 causal"))
    assert "measured" in out and "lead not separated: runner-up b 31.0 µs, 1.03x" in out


def test_a_model_config(cli, stores, tmp_path):
    cfg = tmp_path / "m.json"
    cfg.write_text(json.dumps({"num_attention_heads": 8, "num_key_value_heads": 8, "hidden_size": 512,
                               "torch_dtype": "bfloat16"}))
    out = text(cli("advise", *stores, "--model", cfg, "--seqlen", "1k"))
    assert "workload: prefill B1 N1024 H8/8 D64 bf16 causal eager" in out and "on home (GPU-H): measured" in out


@pytest.mark.parametrize("argv,text_", [
    (["--workload", "prefil B=1"], "unknown word 'prefil'"),
    (["--workload", "prefill B=1 Hq=8 D=64"], "names no length"),
    (["--model", "{d}/absent.json"], "model config not found"),
    ([], "one of the arguments --workload --model is required"),
])
def test_bad_input_exits_2(cli, stores, tmp_path, argv, text_):
    res = cli("advise", stores[0], *(a.format(d=tmp_path) for a in argv))
    assert res.rc == 2 and text_ in res.err, res.err
