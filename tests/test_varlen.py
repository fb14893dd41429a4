"""Packed variable-length batches (Workload.lengths, workloads/varlen.py): the lengths, their cost
model, the per-sequence reference, and each backend's mapping (flex for real on CPU, FlashAttention
and FlashInfer through fake modules) or refusal."""
from __future__ import annotations

import pytest
import torch

from attnbench.backends.base import ANY, Backend
from attnbench.backends.layout import from_bhnd, to_bhnd
from attnbench.backends.reference import attention_math
from attnbench.runner import attempt
from attnbench.workloads import Workload, WorkloadError, cost
from attnbench.workloads.varlen import cu_seqlens, seq_lengths, tensor_dims

from test_new_backends import CPU, FAST, H100, _bnhd_attention, _module, backend, fake_flashinfer, run


def v_(**kw) -> Workload:
    base = dict(mode="prefill", batch=4, q_len=8, kv_len=8, q_heads=2, kv_heads=1, head_dim=16, head_dim_v=16,
                dtype="fp32", lengths="uniform", causal=True)
    return Workload(**{**base, **kw})


# ---- lengths and validation ------------------------------------------------------------------

def test_lengths_are_drawn_from_the_workload_alone():
    # fixed values: the draw depends on the workload's semantics only (not --seed, not the process)
    assert seq_lengths(v_()) == (5, 5, 5, 8) and cu_seqlens(v_()) == [0, 5, 10, 15, 23]
    assert seq_lengths(v_(lengths="longtail")) == (1, 1, 1, 8)
    assert tensor_dims(v_()) == (1, 23, 23)
    # the other axes do not change the packing: causal, dtype and layout rows compare one batch
    assert seq_lengths(v_(causal=False, dtype="bf16", layout="BNHD")) == (5, 5, 5, 8)
    assert seq_lengths(v_(lengths="fixed")) == (8,) * 4 and tensor_dims(v_(lengths="fixed")) == (4, 8, 8)
    for kind in ("uniform", "longtail"):
        w = v_(lengths=kind, batch=64, q_len=4096, kv_len=4096)
        lens = seq_lengths(w)
        assert len(lens) == 64 and max(lens) == 4096 and min(lens) >= 1
        mean = sum(lens) / 64
        assert (1500 < mean < 2600) if kind == "uniform" else (500 < mean < 1500), mean


@pytest.mark.parametrize("kw,match", [(dict(mode="decode", q_len=1, kv_len=8), "prefill only"),
                                      (dict(mode="train_fwd_bwd"), "prefill only"),
                                      (dict(kv_len=16), "self-attention"), (dict(lengths="zipf"), "lengths")])
def test_impossible_packed_workloads(kw, match):
    with pytest.raises(WorkloadError, match=match):
        v_(**kw)


# ---- cost: each sequence's own pairs ---------------------------------------------------------

def test_packed_flops_and_bytes_sum_over_the_sequences():
    w = v_(dtype="bf16")  # lengths 5, 5, 5, 8
    assert cost.forward_flops(w) == 2 * 2 * (3 * 15 + 36) * 32  # causal: L(L+1)/2 each
    assert cost.forward_flops(v_(causal=False)) == 2 * 2 * (3 * 25 + 64) * 32
    # Q and O (Hq·D each) and K, V (Hkv·(D + Dv)) of 23 tokens, 2 bytes each
    assert cost.io_bytes(w) == 23 * (2 * 16 + 1 * 32 + 2 * 16) * 2
    assert cost.input_bytes(w) == 23 * (2 * 16 + 1 * 32 + 2 * 16) * 2
    # window 2 inside each sequence: 1 + 2·(L − 1) pairs each
    assert cost.forward_flops(v_(window=2)) == 2 * 2 * (3 * 9 + 15) * 32
    one = v_(batch=1)  # one sequence: the longest, q_len
    assert cost.forward_flops(one) == cost.forward_flops(v_(batch=1, lengths="fixed"))


# ---- the reference and the check -------------------------------------------------------------

def test_reference_computes_each_sequence_on_its_own():
    q, k, v = torch.randn(1, 2, 22, 16), torch.randn(1, 1, 22, 16), torch.randn(1, 1, 22, 16)
    o = attention_math(q, k, v, True, "bottom_right", 0.25, None, (1, 7, 6, 8))
    s, e = 8, 14  # the third sequence alone
    alone = attention_math(q[:, :, s:e], k[:, :, s:e], v[:, :, s:e], True, "bottom_right", 0.25)
    assert torch.allclose(o[:, :, s:e], alone)
    assert not torch.allclose(o, attention_math(q, k, v, True, "bottom_right", 0.25))


class _OneSequence(Backend):
    """Treats the packed tensors as one sequence: attends across sequence boundaries."""

    def prepare(self, w, inputs):
        q, k, v = (to_bhnd(t, w.layout) for t in (inputs.q, inputs.k, inputs.v))
        return lambda: from_bhnd(attention_math(q, k, v, w.causal, w.causal_align, inputs.scale), w.layout)


@pytest.mark.parametrize("causal", [True, False])
def test_attending_across_sequences_is_incorrect(causal):
    w = v_(causal=causal, batch=6, q_len=32, kv_len=32)
    spec = {"op": "attempt", "workload": w.to_dict(), "device": "cpu", "seed": 0, "timing": FAST}
    res = attempt.run(spec, _OneSequence(name="one-seq", family="plugin", accepts={"lengths": ANY}),
                      attempt.WorkloadCache())
    assert res["status"] == "INCORRECT", res.get("reason")


# ---- backends --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["reference", "flex"])
@pytest.mark.parametrize("kw", [dict(), dict(causal=False), dict(lengths="longtail", batch=5, q_len=64, kv_len=64),
                                dict(window=3, layout="BNHD", batch=6, q_len=40, kv_len=40)])
def test_packed_batches_run_correct_on_cpu(name, kw):
    w = v_(**kw)
    res = run(name, w)
    assert res["status"] == "OK", res.get("reason")
    assert res["err_ratio"] is not None and res["err_ratio"] <= 16


@pytest.mark.parametrize("name", ["sdpa-math", "sdpa-flash", "compile", "jax-xla", "xformers", "flashinfer-decode"])
def test_backends_without_a_packed_kernel_refuse_with_a_reason(name):
    dev = CPU if name in ("sdpa-math", "sdpa-flash", "compile", "jax-xla") else H100
    w = v_(dtype="bf16", head_dim=64, head_dim_v=64)
    why = backend(name).supports(w, dev)
    assert why and ("packed-batch kernel" in why or "mode prefill not offered" in why), why
    assert backend(name).supports(v_(dtype="bf16", head_dim=64, head_dim_v=64, lengths="fixed"), dev) is None \
        or name == "flashinfer-decode"


def test_cudnn_frontend_takes_packed_batches():
    """cudnn-fe maps a packed batch to ragged (THD) tensors (tests/test_cudnn_fe_layouts.py)."""
    assert backend("cudnn-fe").supports(v_(dtype="bf16", head_dim=64, head_dim_v=64), H100) is None


def fake_flash_varlen(monkeypatch, module, with_max_seqlen: bool):
    """flash_attn_varlen_func on (T, H, D) tensors: each sequence between cu_seqlens on its own, causal
    bottom-right, window_size=(left, right) as FlashAttention documents."""
    calls = []

    def body(q, k, v, cu_seqlens_q, cu_seqlens_k, softmax_scale=None, causal=False, window_size=(-1, -1), **kw):
        calls.append(dict(shape=tuple(q.shape), cu_q=cu_seqlens_q.tolist(), cu_k=cu_seqlens_k.tolist(),
                          dtype=cu_seqlens_q.dtype, causal=causal, window=window_size, kw=kw))
        cu, left = cu_seqlens_q.tolist(), window_size[0]
        win = left + 1 if left is not None and left >= 0 else None
        return torch.cat([_bnhd_attention(q[None, s:e], k[None, s:e], v[None, s:e], causal, "bottom_right",
                                          softmax_scale, win)[0] for s, e in zip(cu, cu[1:])])

    if with_max_seqlen:
        def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                   softmax_scale=None, causal=False, window_size=(-1, -1), **extra):
            return body(q, k, v, cu_seqlens_q, cu_seqlens_k, softmax_scale, causal, window_size,
                        max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k, **extra)
    else:  # FA4-style: no max_seqlen in the signature
        def flash_attn_varlen_func(q, k, v, cu_seqlens_q=None, cu_seqlens_k=None, softmax_scale=None, causal=False,
                                   window_size=(None, None)):
            return body(q, k, v, cu_seqlens_q, cu_seqlens_k, softmax_scale, causal, window_size), None

    def flash_attn_func(*a, **k):
        raise AssertionError("a packed batch must not reach flash_attn_func")

    if "." in module:
        parent, child = module.split(".")
        setattr(_module(monkeypatch, parent), child, _module(monkeypatch, module, flash_attn_func=flash_attn_func,
                                                             flash_attn_varlen_func=flash_attn_varlen_func))
    else:
        _module(monkeypatch, module, flash_attn_func=flash_attn_func, flash_attn_varlen_func=flash_attn_varlen_func)
    return calls


@pytest.mark.parametrize("name,module,max_seqlen", [("fa2", "flash_attn", True), ("fa3", "flash_attn_interface", True),
                                                    ("fa4", "flash_attn.cute", False)])
@pytest.mark.parametrize("kw", [dict(), dict(layout="BNHD", causal=False), dict(window=3)])
def test_flash_attention_varlen_mapping(monkeypatch, name, module, max_seqlen, kw):
    calls = fake_flash_varlen(monkeypatch, module, max_seqlen)
    w = v_(**kw)
    res = run(name, w)
    assert res["status"] == "OK", res.get("reason")
    c = calls[0]
    assert c["shape"] == (23, 2, 16) and c["cu_q"] == c["cu_k"] == [0, 5, 10, 15, 23] and c["dtype"] == torch.int32
    assert c["causal"] is w.causal and c["window"] == ((w.window - 1, 0) if w.window else ((-1, -1) if max_seqlen
                                                                                            else (None, None)))
    if max_seqlen:
        assert c["kw"]["max_seqlen_q"] == c["kw"]["max_seqlen_k"] == 8
    assert ("dropout_p" in c["kw"]) is (name == "fa2")


def test_flash_attention_without_a_varlen_entry_point_is_unsupported(monkeypatch):
    _module(monkeypatch, "flash_attn_interface", flash_attn_func=lambda *a, **k: None)
    res = run("fa3", v_())
    assert res["status"] == "UNSUPPORTED" and "flash_attn_varlen_func" in res["reason"]


@pytest.mark.parametrize("kw", [dict(), dict(batch=1), dict(layout="BHND", window=3)])
def test_flashinfer_prefill_plans_the_packed_batch_as_ragged(monkeypatch, kw):
    log = fake_flashinfer(monkeypatch)
    w = v_(**{"layout": "BNHD", "head_dim": 64, "head_dim_v": 64, **kw})
    res = run("flashinfer-prefill", w)
    assert res["status"] == "OK", res.get("reason")
    kind, p = log[0]
    assert kind == "plan" and p["qo"] == p["kv"] == cu_seqlens(w) and p["causal"]
    assert log[1] == ("run", (sum(seq_lengths(w)), 2, 64))
    assert p["kw"].get("window_left", -1) == (w.window - 1 if w.window else -1)
