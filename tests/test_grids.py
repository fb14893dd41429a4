"""Named grids and YAML grids (workloads/grids.py)."""
from __future__ import annotations

import pytest

from attnbench.workloads import MODES, Workload
from attnbench.workloads.grids import GRIDS, GridError, get_grid, load_yaml_grid, parse_size

KI = 1024


@pytest.mark.parametrize("name", sorted(GRIDS))
def test_every_named_grid_builds_with_unique_workloads(name):
    ws = get_grid(name)
    assert ws and all(isinstance(w, Workload) for w in ws)
    assert len({w.key() for w in ws}) == len(ws), "duplicate workloads would collapse into one attempt"


def test_unknown_grid():
    with pytest.raises(GridError, match="unknown grid 'nope'"):
        get_grid("nope")


def test_smoke_has_all_four_modes_and_the_promised_variety():
    ws = get_grid("smoke")
    assert {w.mode for w in ws} == set(MODES)
    assert any(w.kv_heads != w.q_heads for w in ws)  # GQA
    causal = [w for w in ws if w.causal]
    assert {w.causal_align for w in causal} == {"top_left", "bottom_right"}
    assert any(w.q_len != w.kv_len for w in ws if w.mode == "prefill")
    assert all(w.launch == "eager" and w.l2 == "warm" for w in ws)  # runnable on CPU


def test_quick_matches_its_spec():
    ws = get_grid("quick")
    assert all(w.dtype == "bf16" and w.head_dim == 128 and w.head_dim_v == 128 for w in ws)
    prefill = [w for w in ws if w.mode == "prefill" and w.causal]
    assert {(w.batch, w.q_len) for w in prefill} == {(b, n) for b in (1, 4, 16)
                                                       for n in (256, 512, 1 * KI, 2 * KI, 4 * KI, 8 * KI)}
    assert len(prefill) == 18
    unmasked = [w for w in ws if w.mode == "prefill" and not w.causal]  # anchors: 16k tokens per batch
    assert {(w.batch, w.q_len) for w in unmasked} == {(16, 1 * KI), (4, 4 * KI)} and len(unmasked) == 2
    assert all(w.q_len == w.kv_len for w in prefill + unmasked)
    decode = [w for w in ws if w.mode == "decode"]
    want = {(b, n, launch) for b in (1, 8, 32, 64) for n in (512, 1 * KI, 2 * KI, 4 * KI, 8 * KI, 16 * KI)
            for launch in ("eager", "graph")}
    assert {(w.batch, w.kv_len, w.launch) for w in decode} == want
    assert len(decode) == len(want) == 48
    assert all(w.q_len == 1 and w.q_heads == 32 and w.kv_heads == 8 for w in decode)
    assert {w.mode for w in ws} <= {"prefill", "decode", "train_fwd_bwd"}
    assert all(w.launch == "eager" for w in ws if w.mode != "decode")


def test_fa3_paper_has_16k_tokens_per_batch_and_hidden_2048():
    ws = get_grid("fa3-paper")
    assert ws
    for w in ws:
        assert w.batch * w.q_len == 16 * KI, w.label()
        assert w.q_heads * w.head_dim == 2048, w.label()
        assert w.q_len == w.kv_len and w.q_heads == w.kv_heads
    assert {w.head_dim for w in ws} == {64, 128, 256}
    assert {w.q_len for w in ws} == {512, 1 * KI, 2 * KI, 4 * KI, 8 * KI, 16 * KI}
    assert {w.mode for w in ws} == {"train_fwd", "train_fwd_bwd"}
    assert {w.causal for w in ws} == {False, True}
    assert len(ws) == 2 * 3 * 6 * 2


def test_portability_covers_dtypes_dims_and_decode_launches():
    ws = get_grid("portability")
    assert {w.dtype for w in ws} == {"bf16", "fp16"}
    assert {w.head_dim for w in ws} == {64, 128}
    assert {w.launch for w in ws if w.mode == "decode"} == {"eager", "graph"}
    assert not any(w.causal for w in ws if w.mode == "decode")


@pytest.mark.parametrize("x,n", [("4k", 4096), ("4K", 4096), ("512", 512), (16384, 16384), ("1.5k", 1536),
                                 (" 2k ", 2048), ("16k", 16384)])
def test_parse_size(x, n):
    assert parse_size(x) == n


@pytest.mark.parametrize("x", ["abc", "4m", "", True, "k", None, 4.5])
def test_parse_size_rejects(x):
    with pytest.raises(GridError):
        parse_size(x)


GOOD = """\
name: mine
workloads:
  - mode: prefill
    batch: [1, 2]
    seqlen: [128, 1k]
    q_heads: 8
    kv_heads: 2
    head_dim: 64
    causal: [false, true]
  - {mode: decode, batch: 4, kv_len: 2k, q_heads: 8, head_dim: 128, launch: [eager, graph]}
  - {mode: prefill, batch: 1, q_len: 64, kv_len: 256, q_heads: 4, head_dim: 32, causal: true,
     causal_align: top_left, dtype: fp16, layout: BNHD}
"""


def test_yaml_grid_expands_blocks(write_yaml):
    name, ws = load_yaml_grid(write_yaml(GOOD))
    assert name == "mine"
    prefill = [w for w in ws if w.mode == "prefill" and w.q_len == w.kv_len]
    assert len(prefill) == 2 * 2 * 2
    assert {(w.batch, w.q_len, w.causal) for w in prefill} == {(b, n, c) for b in (1, 2) for n in (128, 1024)
                                                                for c in (False, True)}
    assert all(w.kv_heads == 2 and w.head_dim_v == 64 for w in prefill)
    decode = [w for w in ws if w.mode == "decode"]
    assert {w.launch for w in decode} == {"eager", "graph"}
    assert all(w.q_len == 1 and w.kv_len == 2048 and w.kv_heads == 8 and w.head_dim_v == 128 for w in decode)
    (odd,) = [w for w in ws if w.q_len != w.kv_len and w.mode == "prefill"]
    assert (odd.q_len, odd.kv_len, odd.causal_align, odd.dtype, odd.layout) == (64, 256, "top_left", "fp16", "BNHD")
    assert len(ws) == 8 + 2 + 1


def test_yaml_name_defaults_to_the_file_stem_and_duplicates_collapse(write_yaml):
    text = "workloads:\n  - {mode: prefill, batch: [1, 1], seqlen: 64, q_heads: 2, head_dim: 16}\n"
    name, ws = load_yaml_grid(write_yaml(text, "stem-name.yaml"))
    assert name == "stem-name"
    assert len(ws) == 1


@pytest.mark.parametrize("text,match", [
    ("workloads: [ {mode: prefill, batch: 1\n", "malformed YAML"),
    ("workloads:\n  - mode: prefill\n   batch: 1\n", "malformed YAML"),
    ("just a string\n", "non-empty 'workloads'"),
    ("name: x\n", "non-empty 'workloads'"),
    ("workloads: []\n", "non-empty 'workloads'"),
    ("workloads: {mode: prefill}\n", "non-empty 'workloads'"),
    ("workloads:\n  - [1, 2]\n", "must be a mapping"),
    ("workloads:\n  - {mode: prefill, batch: 1, seqlen: 64, q_heads: 2, head_dim: 16, heads: 4}\n",
     "unknown field"),
    ("workloads:\n  - {mode: prefill, batch: 1, seqlen: 64, q_heads: 2, head_dim: 16, seq_len: 4}\n",
     "unknown field"),
    ("workloads:\n  - {mode: prefill, batch: 1, seqlen: 64, q_len: 64, q_heads: 2, head_dim: 16}\n",
     "either seqlen"),
    ("workloads:\n  - {mode: prefill, seqlen: 64, q_heads: 2, head_dim: 16}\n", "required field 'batch'"),
    ("workloads:\n  - {batch: 1, seqlen: 64, q_heads: 2, head_dim: 16}\n", "required field 'mode'"),
    ("workloads:\n  - {mode: prefill, batch: 1, q_heads: 2, head_dim: 16}\n", "needs seqlen"),
    ("workloads:\n  - {mode: prefill, batch: 1, seqlen: 64, q_heads: 6, kv_heads: 4, head_dim: 16}\n",
     "not a multiple"),
    ("workloads:\n  - {mode: decode, batch: 1, q_len: 4, kv_len: 64, q_heads: 2, head_dim: 16}\n",
     "one query token"),
    ("workloads:\n  - {mode: prefill, batch: 0, seqlen: 64, q_heads: 2, head_dim: 16}\n", "positive"),
    ("workloads:\n  - {mode: prefill, batch: 1, seqlen: 4x, q_heads: 2, head_dim: 16}\n", "bad length"),
    ("workloads:\n  - {mode: prefill, batch: 1, seqlen: 64, q_heads: 2, head_dim: 16, dtype: fp64}\n", "dtype"),
    ("workloads:\n  - {mode: train_fwd_bwd, batch: 1, seqlen: 64, q_heads: 2, head_dim: 16, launch: graph}\n",
     "graph"),
    ("workloads:\n  - {mode: prefill, batch: 1, seqlen: 64, q_heads: 2, head_dim: 16, dropout: high}\n", None),
    ("workloads:\n  - {mode: decode, batch: 1, q_heads: 2, head_dim: 16}\n", "decode block needs kv_len"),
    ("workloads:\n  - {mode: decode, batch: 1, q_len: 1, q_heads: 2, head_dim: 16}\n", "decode block needs kv_len"),
    ("nmae: x\nworkloads:\n  - {mode: prefill, batch: 1, seqlen: 64, q_heads: 2, head_dim: 16}\n",
     "unknown top-level key"),
    ("workloads:\n  - {mode: prefill, batch: 1, seqlen: 64, q_len: 32, kv_len: 16, q_heads: 2, head_dim: 16}\n",
     "either seqlen"),
    ("workloads:\n  - {mode: prefill, batch: 1, q_len: 64, kv_len: 32, q_heads: 2, head_dim: 16, causal: true}\n",
     "no key"),
])
def test_bad_yaml_grids_raise_grid_error(write_yaml, text, match):
    with pytest.raises(GridError, match=match):
        load_yaml_grid(write_yaml(text))


def test_malformed_yaml_names_the_line(write_yaml):
    with pytest.raises(GridError, match=r"line \d+"):
        load_yaml_grid(write_yaml("workloads:\n  - mode: prefill\n   batch: 1\n"))


def test_missing_yaml_file(tmp_path):
    with pytest.raises(GridError, match="not found"):
        load_yaml_grid(tmp_path / "absent.yaml")


def test_the_features_grid_holds_each_new_axis_beside_its_default():
    """Windows (prefill and decode), every varlen kind, paged decode beside the contiguous cache in
    both launches, the append inside decode's timed step, and the fp8 forward at the anchor shapes."""
    from attnbench.workloads.grids import get_grid

    ws = get_grid("features")
    assert {w.window for w in ws if w.mode == "prefill"} >= {1024, 4096}
    assert any(w.window and w.mode == "decode" for w in ws)
    assert {w.lengths for w in ws} == {"fixed", "uniform", "longtail"}
    plain = [w for w in ws if w.mode == "decode" and not w.window]
    paged = {(w.batch, w.page_size, w.launch) for w in plain if w.decode_append == "excluded"}
    assert paged == {(b, p, launch) for b in (8, 32) for p in (0, 16, 256) for launch in ("eager", "graph")}
    # the append inside the timed step, beside the same decode without it (in paged)
    appending = {(w.batch, w.page_size, w.launch) for w in plain if w.decode_append == "included"}
    assert appending == {(32, 0, "eager"), (32, 0, "graph"), (32, 256, "eager")}
    fp8 = [(w.batch, w.q_len, w.causal) for w in ws if w.dtype == "fp8_e4m3"]
    assert sorted(fp8) == [(4, 4096, False), (4, 8192, True)]
