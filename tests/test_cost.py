"""FLOP and HBM-byte models (workloads/cost.py) against brute force and the documented formulas."""
from __future__ import annotations

import itertools

import pytest

from attnbench.workloads import DTYPE_BYTES, Workload
from attnbench.workloads import cost


def brute_pairs(q_len: int, kv_len: int, causal: bool, align: str) -> int:
    if not causal:
        return q_len * kv_len
    off = kv_len - q_len if align == "bottom_right" else 0
    return sum(1 for i in range(q_len) for j in range(kv_len) if j <= i + off)


LENS = [1, 2, 3, 5, 7, 8, 16, 17, 31, 64]


@pytest.mark.parametrize("align", ["top_left", "bottom_right"])
@pytest.mark.parametrize("causal", [False, True])
def test_unmasked_pairs_matches_brute_force(causal, align):
    for q, kv in itertools.product(LENS, LENS):  # square, q < kv and q > kv
        assert cost.unmasked_pairs(q, kv, causal, align) == brute_pairs(q, kv, causal, align), (q, kv)


def test_unmasked_pairs_agrees_with_the_mask_the_backends_use():
    from attnbench.backends.layout import keep_mask

    for q, kv, align in itertools.product([1, 3, 16, 40], [1, 4, 16, 33], ["top_left", "bottom_right"]):
        assert cost.unmasked_pairs(q, kv, True, align) == int(keep_mask(q, kv, align, "cpu").sum()), (q, kv)


@pytest.mark.parametrize("kv", [1, 2, 100, 4096])
def test_single_query_token(kv):
    # top-left: query 0 attends key 0 only; bottom-right: the last query attends every key
    assert cost.unmasked_pairs(1, kv, True, "top_left") == 1
    assert cost.unmasked_pairs(1, kv, True, "bottom_right") == kv
    assert cost.unmasked_pairs(1, kv, False, "top_left") == kv


def test_square_causal_is_n_n_plus_1_over_2_for_both_alignments():
    for n in (1, 2, 9, 128, 1000):
        assert cost.unmasked_pairs(n, n, True, "top_left") == n * (n + 1) // 2
        assert cost.unmasked_pairs(n, n, True, "bottom_right") == n * (n + 1) // 2


def test_non_square_values():
    # q=4, kv=8: top-left rows see 1,2,3,4 keys; bottom-right rows see 5,6,7,8 keys
    assert cost.unmasked_pairs(4, 8, True, "top_left") == 10
    assert cost.unmasked_pairs(4, 8, True, "bottom_right") == 26
    # q=8, kv=4: top-left rows see 1,2,3,4,4,4,4,4; bottom-right rows 0,0,0,0,1,2,3,4
    assert cost.unmasked_pairs(8, 4, True, "top_left") == 26
    assert cost.unmasked_pairs(8, 4, True, "bottom_right") == 10


def W(**kw) -> Workload:
    base = dict(mode="prefill", batch=2, q_len=128, kv_len=128, q_heads=8, kv_heads=8, head_dim=64, head_dim_v=64)
    base.update(kw)
    return Workload(**base)


@pytest.mark.parametrize("causal,align", [(False, "bottom_right"), (True, "top_left"), (True, "bottom_right")])
@pytest.mark.parametrize("q,kv", [(128, 128), (64, 256), (1, 300)])
def test_forward_flops_formula(causal, align, q, kv):
    mode = "decode" if q == 1 else "prefill"
    w = W(mode=mode, batch=3, q_len=q, kv_len=kv, q_heads=12, kv_heads=4, head_dim=64, head_dim_v=96,
          causal=causal, causal_align=align)
    p = brute_pairs(q, kv, causal, align)
    assert cost.forward_flops(w) == 2 * 3 * 12 * p * (64 + 96)


def test_forward_flops_known_number():
    # B=4, H=32, N=1024, D=128 non-causal: 4 * B * H * N^2 * D
    w = W(batch=4, q_len=1024, kv_len=1024, q_heads=32, kv_heads=32, head_dim=128, head_dim_v=128)
    assert cost.forward_flops(w) == 4 * 4 * 32 * 1024 * 1024 * 128
    # causal square halves it (plus the diagonal)
    wc = W(batch=4, q_len=1024, kv_len=1024, q_heads=32, kv_heads=32, head_dim=128, head_dim_v=128, causal=True)
    assert cost.forward_flops(wc) == 2 * 4 * 32 * (1024 * 1025 // 2) * 256


def test_gqa_counts_query_heads():
    mha = W(q_heads=32, kv_heads=32)
    for hkv in (8, 4, 1):
        assert cost.forward_flops(W(q_heads=32, kv_heads=hkv)) == cost.forward_flops(mha)
    assert cost.forward_flops(W(q_heads=16, kv_heads=16)) * 2 == cost.forward_flops(mha)


def test_fwd_bwd_is_three_and_a_half_times_forward():
    for causal in (False, True):
        fwd = W(mode="train_fwd", causal=causal)
        both = W(mode="train_fwd_bwd", causal=causal)
        assert cost.flops(fwd) == cost.forward_flops(fwd)
        assert cost.flops(both) == 3.5 * cost.forward_flops(both)
        assert cost.flops(W(mode="prefill", causal=causal)) == cost.forward_flops(fwd)


@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])
def test_decode_bytes(dtype):
    s = DTYPE_BYTES[dtype]
    w = W(mode="decode", batch=8, q_len=1, kv_len=4096, q_heads=32, kv_heads=8, head_dim=128, head_dim_v=128,
          dtype=dtype)
    kv = 2 * 8 * 8 * 4096 * 128 * s
    assert cost.decode_kv_bytes(w) == kv
    q_and_o = 2 * 8 * 32 * 1 * 128 * s
    assert cost.io_bytes(w) == kv + q_and_o
    assert cost.bound(w) == "bytes"


def test_decode_kv_bytes_with_distinct_value_dim():
    w = W(mode="decode", batch=2, q_len=1, kv_len=100, q_heads=4, kv_heads=2, head_dim=64, head_dim_v=32,
          dtype="fp32")
    assert cost.decode_kv_bytes(w) == 2 * 2 * 100 * (64 + 32) * 4


def test_io_bytes_prefill_and_none_for_fwd_bwd():
    w = W(batch=2, q_len=100, kv_len=300, q_heads=8, kv_heads=2, head_dim=64, head_dim_v=32, dtype="bf16")
    q = 2 * 8 * 100 * 64
    kv = 2 * 2 * 300 * (64 + 32)
    o = 2 * 8 * 100 * 32
    assert cost.io_bytes(w) == (q + kv + o) * 2
    assert cost.bound(w) == "flops"
    assert cost.io_bytes(W(mode="train_fwd_bwd")) is None


def test_input_and_score_bytes():
    w = W(batch=2, q_len=10, kv_len=20, q_heads=4, kv_heads=2, head_dim=8, head_dim_v=8, dtype="fp16")
    n = 2 * 4 * 10 * 8 + 2 * 2 * 20 * 16 + 2 * 4 * 10 * 8
    assert cost.input_bytes(w) == n * 2
    assert cost.input_bytes(W(mode="train_fwd_bwd", batch=2, q_len=10, kv_len=20, q_heads=4, kv_heads=2,
                                head_dim=8, head_dim_v=8, dtype="fp16")) == 2 * n * 2
    assert cost.score_matrix_bytes(w) == 2 * 4 * 10 * 20 * 4


def brute_window_pairs(q, kv, align, window):
    off = kv - q if align == "bottom_right" else 0
    return sum(1 for i in range(q) for j in range(kv) if i + off - window < j <= i + off)


@pytest.mark.parametrize("align", ["top_left", "bottom_right"])
def test_windowed_pairs_match_brute_force_and_the_mask(align):
    from attnbench.backends.layout import keep_mask

    for q, kv in [(1, 1), (1, 9), (4, 8), (8, 8), (7, 13), (13, 7)]:
        if align == "bottom_right" and q > kv:
            continue
        for window in (1, 2, 3, 5, 8, 20):
            want = brute_window_pairs(q, kv, align, window)
            assert cost.unmasked_pairs(q, kv, True, align, window) == want, (q, kv, window)
            assert int(keep_mask(q, kv, align, "cpu", window).sum()) == want


def test_windowed_pairs_flops_and_bytes_exact_small_cases():
    # 4x4, window 2: row 0 sees 1 key, rows 1-3 see 2 -> 7 pairs
    assert cost.unmasked_pairs(4, 4, True, "bottom_right", 2) == 7
    # 4 queries against 8 keys bottom-right, window 3: every query sees 3 keys -> 12
    assert cost.unmasked_pairs(4, 8, True, "bottom_right", 3) == 12
    # top-left, window 2: 1 + 2 + 2 + 2
    assert cost.unmasked_pairs(4, 8, True, "top_left", 2) == 7
    w = Workload(mode="prefill", batch=2, q_len=4, kv_len=8, q_heads=4, kv_heads=2, head_dim=16, head_dim_v=8,
                 dtype="fp16", causal=True, window=3)
    assert cost.forward_flops(w) == 2 * 2 * 4 * 12 * (16 + 8)
    # keys some query attends: 8 - 4 - 3 + 1 = 2 .. 7 -> 6 of the 8
    assert cost.kv_read_len(w) == 6
    assert cost.io_bytes(w) == 2 * (2 * 4 * 4 * 16 + 2 * 2 * 6 * (16 + 8) + 2 * 4 * 4 * 8)
    tl = Workload(mode="prefill", batch=1, q_len=4, kv_len=8, q_heads=1, kv_heads=1, head_dim=8, head_dim_v=8,
                  causal=True, causal_align="top_left", window=2)
    assert cost.kv_read_len(tl) == 4  # keys 0..3: no query reaches keys 4..7


def test_windowed_decode_reads_only_the_window():
    w = Workload(mode="decode", batch=2, q_len=1, kv_len=256, q_heads=8, kv_heads=2, head_dim=64, head_dim_v=64,
                 dtype="bf16", causal=True, window=64)
    assert cost.unmasked_pairs(1, 256, True, "bottom_right", 64) == 64
    assert cost.forward_flops(w) == 2 * 2 * 8 * 64 * 128
    assert cost.decode_kv_bytes(w) == 2 * 2 * 64 * 128 * 2
    assert cost.io_bytes(w) == 2 * (2 * 8 * 64 + 2 * 2 * 64 * 128 + 2 * 8 * 64)
    full = Workload(**{**w.to_dict(), "window": 0})
    assert cost.io_bytes(full) > cost.io_bytes(w) and cost.kv_read_len(full) == 256
