"""Workload validation, identity (key) and immutability (workloads/__init__.py)."""
from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from attnbench.workloads import Workload, WorkloadError, validate

BASE = dict(mode="prefill", batch=2, q_len=128, kv_len=256, q_heads=8, kv_heads=2, head_dim=64, head_dim_v=64)


def W(**kw) -> Workload:
    return Workload(**{**BASE, **kw})


def test_valid_workload_and_derived_fields():
    w = W()
    assert validate(w) == []
    assert w.gqa_group == 4 and w.attention_kind == "GQA"
    assert W(kv_heads=8).attention_kind == "MHA"
    assert W(kv_heads=1).attention_kind == "MQA"
    assert W(mode="train_fwd_bwd").needs_grad and not W().needs_grad and not W(mode="train_fwd").needs_grad
    d = W(mode="decode", q_len=1)
    assert d.decode_append == "excluded" and W().decode_append is None


@pytest.mark.parametrize("bad,match", [
    (dict(q_heads=8, kv_heads=3), "not a multiple"),
    (dict(q_heads=4, kv_heads=8), "not a multiple"),
    (dict(mode="decode", q_len=2), "one query token"),
    (dict(mode="decode", q_len=128), "one query token"),
    (dict(mode="inference"), "mode"),
    (dict(dtype="fp8"), "dtype"),
    (dict(dtype="float32"), "dtype"),
    (dict(accum="bf16"), "accum"),
    (dict(causal_align="top_right"), "causal_align"),
    (dict(layout="NHBD"), "layout"),
    (dict(launch="graphs"), "launch"),
    (dict(l2="hot"), "l2"),
    (dict(causal="yes"), "causal"),
    (dict(causal=1), "causal"),
    (dict(dropout=1.0), "dropout"),
    (dict(dropout=-0.1), "dropout"),
    (dict(batch=0), "batch"),
    (dict(batch=-1), "batch"),
    (dict(q_len=0), "q_len"),
    (dict(kv_len=0), "kv_len"),
    (dict(q_heads=0), "q_heads"),
    (dict(kv_heads=0), "kv_heads"),
    (dict(head_dim=0), "head_dim"),
    (dict(head_dim_v=-64), "head_dim_v"),
    (dict(batch=2.0), "batch"),
    (dict(batch=True), "batch"),
    (dict(q_len="128"), "q_len"),
    (dict(mode="train_fwd_bwd", launch="graph"), "graph"),
])
def test_impossible_workloads_raise(bad, match):
    with pytest.raises(WorkloadError, match=match):
        W(**bad)


def test_graph_launch_allowed_for_forward_modes():
    for mode, q in (("train_fwd", 128), ("prefill", 128), ("decode", 1)):
        assert W(mode=mode, q_len=q, launch="graph").launch == "graph"


def test_workload_error_is_a_value_error_and_names_the_workload():
    with pytest.raises(ValueError) as e:
        W(q_heads=7)
    assert "prefill B2" in str(e.value)


def test_frozen():
    w = W()
    with pytest.raises(dataclasses.FrozenInstanceError):
        w.batch = 4  # type: ignore[misc]
    assert w.batch == 2


def test_key_is_stable_and_equal_for_equal_workloads():
    assert W().key() == W().key()
    assert len(W().key()) == 16
    assert hash(W()) == hash(W()) and W() == W()


def test_key_is_pinned():
    # Resuming across versions relies on the key: this value must only change on purpose.
    w = Workload(mode="prefill", batch=1, q_len=128, kv_len=128, q_heads=4, kv_heads=2, head_dim=32,
                 head_dim_v=32, dtype="bf16")
    assert w.key() == "729aafb233fa95ea"


def _key_in_fresh_process(w: Workload) -> str:
    code = f"from attnbench.workloads import Workload; print(Workload(**{w.to_dict()!r}).key())"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def test_key_is_the_same_in_another_process():
    w = W(causal=True, causal_align="top_left", dtype="fp16")
    assert _key_in_fresh_process(w) == w.key()


ALTERNATIVES = {
    "mode": "train_fwd", "batch": 3, "q_len": 64, "kv_len": 512, "q_heads": 16, "kv_heads": 8, "head_dim": 128,
    "head_dim_v": 32, "dtype": "fp16", "causal": False, "causal_align": "top_left", "dropout": 0.1, "layout": "BNHD",
    "launch": "graph", "l2": "cold", "window": 16, "lengths": "uniform", "page_size": 16, "decode_append": "included",
    "fresh_inputs": True,  # issue 42.2
}


def test_every_field_changes_the_key():
    fields = {f.name for f in dataclasses.fields(Workload)} - {"accum"}  # accum has a single legal value
    assert fields == set(ALTERNATIVES)
    base = W(causal=True, causal_align="bottom_right")
    keys = {base.key()}
    for name, value in ALTERNATIVES.items():
        if name == "lengths":  # a packed batch is self-attention: compared at kv_len == q_len
            square = W(causal=True, kv_len=128)
            assert W(causal=True, kv_len=128, lengths=value).key() not in {square.key(), base.key()}
            keys.add(W(causal=True, kv_len=128, lengths=value).key())
            continue
        if name in ("page_size", "decode_append"):  # a paged cache, an append: a decode workload's
            dense = W(mode="decode", q_len=1)
            assert W(mode="decode", q_len=1, **{name: value}).key() not in {dense.key(), base.key()}
            keys.add(W(mode="decode", q_len=1, **{name: value}).key())
            continue
        other = W(**{"causal": True, name: value})
        assert other != base
        assert other.key() != base.key(), name
        keys.add(other.key())
    assert len(keys) == len(ALTERNATIVES) + 1


def test_to_dict_from_dict_round_trip_and_unknown_fields():
    w = W(causal=True, layout="BNHD")
    assert Workload.from_dict(w.to_dict()) == w
    assert Workload.from_dict(w.to_dict()).key() == w.key()
    with pytest.raises(WorkloadError, match="unknown workload field"):
        Workload.from_dict({**w.to_dict(), "seqlen": 5})


def test_label_mentions_the_semantics():
    lab = W(causal=True, causal_align="top_left", layout="BNHD").label()
    for part in ("prefill", "B2", "Nq128", "Nkv256", "H8/2", "D64/64", "bf16", "causal-top_left", "BNHD"):
        assert part in lab


def test_equal_workloads_have_equal_keys():
    a, b = W(dropout=0.0), W(dropout=0)  # YAML `dropout: 0` gives the int
    assert a == b
    assert a.key() == b.key()
    assert isinstance(b.dropout, float)


def test_alignment_of_an_unmasked_workload_is_normalised():
    # without a mask the alignment means nothing: one spelling, one key
    a, b = W(causal=False, causal_align="top_left"), W(causal=False, causal_align="bottom_right")
    assert a.causal_align == "bottom_right" and a == b and a.key() == b.key()
    assert W(causal=True, causal_align="top_left").causal_align == "top_left"
    with pytest.raises(WorkloadError, match="causal_align"):
        W(causal=False, causal_align="sideways")  # a bad value is still reported, not normalised away


def test_non_numeric_dropout_is_a_workload_error():
    with pytest.raises(WorkloadError):
        W(dropout="0.1")


def test_bottom_right_with_queries_that_see_no_key_is_rejected():
    # the first q_len - kv_len queries would attend no key: the float64 reference is NaN there
    with pytest.raises(WorkloadError, match="no key"):
        W(q_len=256, kv_len=128, causal=True, causal_align="bottom_right")
    assert W(q_len=128, kv_len=128, causal=True, causal_align="bottom_right").q_len == 128
    assert W(q_len=256, kv_len=128, causal=False).q_len == 256  # unmasked: fine


def test_top_left_with_more_queries_than_keys_is_fine():
    # top-left: every query sees at least key 0
    assert W(q_len=256, kv_len=128, causal=True, causal_align="top_left").q_len == 256


def test_keys_of_workloads_before_the_new_axes_are_unchanged():
    """Resume of older stores: a workload with every later axis (window, ...) at its default keeps the
    key it had before those axes existed (values computed with the code of that time)."""
    assert W(causal=True).key() == "e777018ee8a29d68"
    decode = Workload(mode="decode", batch=8, q_len=1, kv_len=4096, q_heads=32, kv_heads=8, head_dim=128,
                      head_dim_v=128, launch="graph")
    assert decode.key() == "7a283b381733da56"
    assert W(causal=True, window=64).key() != W(causal=True).key()


@pytest.mark.parametrize("kw,match", [(dict(window=-1), "non-negative"), (dict(window=True, causal=True), "integer"),
                                      (dict(window=8), "causal workloads only")])
def test_bad_windows_are_workload_errors(kw, match):
    with pytest.raises(WorkloadError, match=match):
        W(**kw)


def test_window_is_an_axis_everywhere():
    from attnbench.workloads import axes
    from attnbench.workloads.grids import expand_block

    assert axes.parse_where("window=0,4k") == ("window", {0, 4096})
    ws = expand_block({"mode": "prefill", "batch": 1, "q_heads": 4, "head_dim": 64, "seqlen": "1k", "causal": True,
                       "window": [0, 256]})
    assert [w.window for w in ws] == [0, 256]
    assert axes.select(ws, {"window": {256}}) == ws[1:]
    assert "window256" in ws[1].label() and "window" not in ws[0].label()
