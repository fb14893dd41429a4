"""cudnn-fe's paged KV decode and ragged (packed varlen) prefill, through a fake `cudnn` module whose
graph computes attention from exactly what it was given: the tensors' dims and strides, the page
tables (pages gathered through them), the ragged offsets (each sequence's base), the sequence
lengths and the causal flag, as the cuDNN frontend documents them (python/pygraph/sdpa.cpp,
samples/python/53_sdpa_decode_with_paged_caches.ipynb, test/python/sdpa/fp16.py). A fake that
ignores the table, the lengths or the offsets must be INCORRECT through the real runner."""
from __future__ import annotations

import types

import pytest
import torch

from attnbench.backends.reference import attention_math
from attnbench.measure.inputs import make_inputs
from attnbench.workloads import Workload
from attnbench.workloads.paged import num_pages, page_table, pages_per_seq
from attnbench.workloads.varlen import cu_seqlens, seq_lengths

from test_new_backends import CPU, H100, _module, backend, run


class T:
    """A graph tensor: dims, strides, a ragged offset, chainable setters as the frontend's."""

    def __init__(self, dim=None, stride=None, data_type=None, like=None):
        self.dim, self.stride, self.data_type, self.like, self.ragged = dim, stride, data_type, like, None

    def set_output(self, v):
        return self

    def set_dim(self, d):
        self.dim = list(d)
        return self

    def set_stride(self, s):
        self.stride = list(s)
        return self

    def set_data_type(self, d):
        self.data_type = d
        return self

    def set_ragged_offset(self, t):
        self.ragged = t
        return self


def _view(buf, t: T, base: int, dims):
    """The (H, N, D) block of one sequence at element offset `base` of buf's storage, as t's strides say."""
    return torch.as_strided(buf, dims, t.stride[1:], buf.storage_offset() + base)


def fake_cudnn(monkeypatch, ignore: str | None = None):
    """`ignore`: "table" reads pages 0, 1, 2, ... in order; "lengths" reads every key the tensors
    hold (whole pages, or the longest length); "offsets" reads every sequence from the start;
    "band" drops the diagonal band's left bound (a window read as plain causal)."""
    log = []

    class Graph:
        def __init__(self, **kw):
            log.append(("graph", kw))

        def tensor_like(self, t):
            return T(list(t.shape), list(t.stride()), t.dtype, like=t)

        def tensor(self, dim, stride, data_type=None, **kw):
            assert not kw, kw
            return T(list(dim), list(stride), data_type)

        def sdpa(self, **kw):
            log.append(("sdpa", kw))
            self.kw, self.o = kw, T()
            return self.o, None

        def get_workspace_size(self):
            return 0

        def execute(self, pack, ws, handle=None):
            kw, o = self.kw, self.o
            q, k, v = kw["q"], kw["k"], kw["v"]
            sq = pack[kw["seq_len_q"]].view(-1).tolist() if kw.get("seq_len_q") else None
            skv = pack[kw["seq_len_kv"]].view(-1).tolist() if kw.get("seq_len_kv") else None
            b = q.dim[0]
            sq, skv = sq or [q.dim[2]] * b, skv or [None] * b  # the dense graph: no lengths
            if ignore == "lengths":
                sq, skv = [q.dim[2]] * b, [None] * b
            causal = kw.get("use_causal_mask") or kw.get("use_causal_mask_bottom_right")
            align = "bottom_right" if kw.get("use_causal_mask_bottom_right") else "top_left"
            window = kw.get("diagonal_band_left_bound")
            assert "sliding_window_length" not in kw
            if window is not None:  # the band: keys j with i + off - left < j <= i + off + right
                assert kw["diagonal_band_right_bound"] == 0 and not causal
                causal, align = True, {"TL": "top_left", "BR": "bottom_right"}[kw["diagonal_alignment"]]
                window = None if ignore == "band" else window

            def base(t, i):
                if t.ragged is not None and ignore == "offsets":
                    return 0  # every sequence read from the packed tensor's start
                if t.ragged is None:
                    return i * t.stride[0]
                return int(pack[t.ragged].view(-1)[i])

            for i in range(b):
                nq = sq[i]
                qi = _view(pack[q], q, base(q, i), (q.dim[1], nq, q.dim[3]))
                if "paged_attention_k_table" in kw:
                    n = skv[i] if skv[i] is not None else kw["paged_attention_max_seq_len_kv"]
                    kv = []
                    for t, table in ((k, kw["paged_attention_k_table"]), (v, kw["paged_attention_v_table"])):
                        rows = pack[table][i, 0, :, 0].long()
                        if ignore == "table":
                            rows = torch.arange(i * len(rows), (i + 1) * len(rows))
                        pages = [_view(pack[t], t, int(p) * t.stride[0], t.dim[1:]) for p in rows]
                        whole = torch.cat(pages, 1)  # (H, pages·P, D)
                        kv.append(whole if ignore == "lengths" else whole[:, :n])  # n keys, or the slack too
                    ki, vi = kv
                else:
                    n = skv[i] if skv[i] is not None else k.dim[2]
                    if ignore == "lengths" and k.ragged is not None:
                        n = k.dim[2]
                    ki = _view(pack[k], k, base(k, i), (k.dim[1], n, k.dim[3]))
                    vi = _view(pack[v], v, base(v, i), (v.dim[1], n, v.dim[3]))
                oi = attention_math(qi[None].float(), ki[None].float(), vi[None].float(), bool(causal), align,
                                    kw["attn_scale"], window or 0)[0]
                _view(pack[o], o, base(o, i), (o.dim[1], nq, o.dim[3])).copy_(oi)

        def __getattr__(self, name):  # validate, build_operation_graph, create_execution_plans, ...
            return lambda *a, **k: None

    ns = types.SimpleNamespace
    _module(monkeypatch, "cudnn", pygraph=Graph, create_handle=lambda: "handle", set_stream=lambda **k: None,
            data_type=ns(BFLOAT16="bf16", HALF="fp16", FLOAT="fp32"), heur_mode=ns(A="A", FALLBACK="F"),
            diagonal_alignment=ns(TOP_LEFT="TL", BOTTOM_RIGHT="BR"))
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *a: ns(cuda_stream=0))
    return log


def d_(**kw) -> Workload:
    base = dict(mode="decode", batch=2, q_len=1, kv_len=40, q_heads=4, kv_heads=2, head_dim=16, head_dim_v=16,
                dtype="bf16", page_size=16)
    return Workload(**{**base, **kw})


def v_(**kw) -> Workload:
    base = dict(mode="prefill", batch=3, q_len=24, kv_len=24, q_heads=4, kv_heads=2, head_dim=16, head_dim_v=16,
                dtype="bf16", lengths="uniform", causal=True)
    return Workload(**{**base, **kw})


def _sdpa(log):
    (c,) = [kw for kind, kw in log if kind == "sdpa"]
    return c


def _ran_ok(monkeypatch, w):
    """cudnn-fe on the fake library: supported, OK, and the keyword arguments of its one sdpa call."""
    log = fake_cudnn(monkeypatch)
    assert backend("cudnn-fe").supports(w, H100) is None
    res = run("cudnn-fe", w)
    assert res["status"] == "OK", res.get("reason")
    return _sdpa(log)


# ---- paged decode -------------------------------------------------------------------------------

@pytest.mark.parametrize("kw", [dict(), dict(layout="BNHD"), dict(kv_len=48), dict(batch=3, kv_heads=4),
                                dict(causal=True), dict(causal=True, causal_align="top_left")])
def test_paged_decode_runs_ok_and_passes_containers_tables_and_lengths(monkeypatch, kw):
    w = d_(**kw)
    c = _ran_ok(monkeypatch, w)
    p, h, d = w.page_size, w.kv_heads, w.head_dim
    # containers (num_pages, Hkv, P, D): a view of the token-major pages, their strides
    assert c["k"].dim == [num_pages(w), h, p, d] and c["k"].stride == [p * h * d, d, h * d, 1]
    assert c["v"].dim == c["k"].dim and c["v"].stride == c["k"].stride
    for name in ("paged_attention_k_table", "paged_attention_v_table"):
        t = c[name]
        assert t.dim == [w.batch, 1, pages_per_seq(w), 1] and t.like.dtype == torch.int32
        assert t.like.view(w.batch, -1).tolist() == [list(r) for r in page_table(w)]
    assert c["seq_len_q"].like.view(-1).tolist() == [1] * w.batch
    assert c["seq_len_kv"].like.view(-1).tolist() == [w.kv_len] * w.batch
    assert c["seq_len_q"].dim == [w.batch, 1, 1, 1] and c["seq_len_kv"].like.dtype == torch.int32
    assert c["paged_attention_max_seq_len_kv"] == w.kv_len and c["use_padding_mask"] is True
    assert c["q"].dim == [w.batch, w.q_heads, 1, d] and c["generate_stats"] is False
    assert c["attn_scale"] == pytest.approx(d ** -0.5)
    top = w.causal and w.causal_align == "top_left"
    assert c.get("use_causal_mask", False) is top and not c.get("use_causal_mask_bottom_right", False)


def test_paged_container_views_share_the_inputs_memory(monkeypatch):
    log = fake_cudnn(monkeypatch)
    w = d_()
    inputs = make_inputs(w, "cpu", 0)
    backend("cudnn-fe").prepare(w, inputs)
    c = _sdpa(log)
    assert c["k"].like.data_ptr() == inputs.k.data_ptr() and c["v"].like.data_ptr() == inputs.v.data_ptr()
    assert c["paged_attention_k_table"].like.data_ptr() == inputs.page_table.data_ptr()


@pytest.mark.parametrize("ignore", ["table", "lengths"])
def test_paged_decode_ignoring_the_table_or_the_lengths_is_incorrect(monkeypatch, ignore):
    fake_cudnn(monkeypatch, ignore)
    res = run("cudnn-fe", d_())
    assert res["status"] == "INCORRECT", res.get("reason")


# ---- ragged (packed varlen) prefill --------------------------------------------------------------

@pytest.mark.parametrize("kw", [dict(layout="BNHD"), dict(), dict(lengths="longtail", batch=4), dict(causal=False),
                                dict(layout="BNHD", kv_heads=4, head_dim_v=8)])
def test_ragged_prefill_runs_ok_with_offsets_and_lengths(monkeypatch, kw):
    w = v_(**kw)
    c = _ran_ok(monkeypatch, w)
    lens, cu, longest = seq_lengths(w), cu_seqlens(w), max(seq_lengths(w))
    for name, h, d in (("q", w.q_heads, w.head_dim), ("k", w.kv_heads, w.head_dim), ("v", w.kv_heads, w.head_dim_v)):
        t = c[name]
        assert t.dim == [w.batch, h, longest, d] and t.stride == [longest * h * d, d, h * d, 1]  # BSHD strides
        assert t.ragged.dim == [w.batch + 1, 1, 1, 1] and t.ragged.like.dtype == torch.int32
        assert t.ragged.like.view(-1).tolist() == [x * h * d for x in cu]
    for name in ("seq_len_q", "seq_len_kv"):
        assert c[name].like.view(-1).tolist() == list(lens) and c[name].like.dtype == torch.int32
    assert c["use_padding_mask"] is True and c["use_causal_mask"] is w.causal
    assert not c["use_causal_mask_bottom_right"]


def test_ragged_bnhd_binds_the_inputs_and_bhnd_copies_inside_the_step(monkeypatch):
    log = fake_cudnn(monkeypatch)
    w = v_(layout="BNHD")
    inputs = make_inputs(w, "cpu", 0)
    prepared = backend("cudnn-fe").prepare(w, inputs)
    assert prepared.step() is inputs.out  # written in place, BNHD
    log.clear()
    w = v_(layout="BHND")
    inputs = make_inputs(w, "cpu", 0)
    prepared = backend("cudnn-fe").prepare(w, inputs)
    c = _sdpa(log)
    assert c["q"].stride[1:] == [w.head_dim, w.q_heads * w.head_dim, 1]  # token-major buffer, not the input
    with torch.no_grad():
        out = prepared.step()
        assert out.shape == inputs.out.shape and not torch.isnan(out).any()
        inputs.q.mul_(2)  # the copy happens in the step: a changed input changes the output
        before = out.clone()
        assert not torch.equal(prepared.step(), before)


@pytest.mark.parametrize("ignore", ["offsets", "lengths"])
@pytest.mark.parametrize("layout", ["BNHD", "BHND"])
def test_ragged_prefill_ignoring_the_offsets_or_the_lengths_is_incorrect(monkeypatch, ignore, layout):
    fake_cudnn(monkeypatch, ignore)
    # not causal: with a causal mask a query never reaches past its own sequence's end, so reading
    # longer sequences than the lengths say would go unseen
    res = run("cudnn-fe", v_(layout=layout, causal=False))
    assert res["status"] == "INCORRECT", res.get("reason")


def test_ragged_offsets_widen_to_int64_past_int32():
    from attnbench.backends.cudnn_fe import _offset_dtype

    assert _offset_dtype(torch, 2 ** 31 - 1) is torch.int32 and _offset_dtype(torch, 2 ** 31) is torch.int64


# ---- refusals -----------------------------------------------------------------------------------

def test_unmapped_combinations_refuse_with_a_reason():
    b = backend("cudnn-fe")
    assert "window" in b.supports(d_(causal=True, window=8), H100)
    for w in (d_(dtype="fp8_e4m3", head_dim=16), v_(dtype="fp8_e4m3")):
        why = b.supports(w, H100)
        assert why and "fp8" in why and ("paged" in why or "ragged" in why), why
    assert "does not run on cpu" in b.supports(d_(), CPU)
    assert b.supports(d_(), H100) is None and b.supports(v_(), H100) is None


# ---- sliding windows: the diagonal band ---------------------------------------------------------

def p_(**kw) -> Workload:
    base = dict(mode="prefill", batch=2, q_len=16, kv_len=32, q_heads=4, kv_heads=2, head_dim=16, head_dim_v=16,
                dtype="bf16", causal=True, window=5)
    return Workload(**{**base, **kw})


@pytest.mark.parametrize("w", [p_(), p_(causal_align="top_left"), p_(q_len=32), p_(layout="BNHD", window=1),
                               v_(window=4), v_(window=4, layout="BNHD", lengths="longtail", batch=4)])
def test_a_window_is_the_diagonal_band_aligned_like_the_causal_mask(monkeypatch, w):
    c = _ran_ok(monkeypatch, w)
    bottom = w.causal_align == "bottom_right" and w.q_len != w.kv_len
    assert c["diagonal_band_left_bound"] == w.window and c["diagonal_band_right_bound"] == 0
    assert c["diagonal_alignment"] == ("BR" if bottom else "TL")
    assert not c.get("use_causal_mask") and not c.get("use_causal_mask_bottom_right")


@pytest.mark.parametrize("w", [p_(), v_(window=4)])
def test_a_graph_without_the_band_is_incorrect(monkeypatch, w):
    fake_cudnn(monkeypatch, "band")
    assert run("cudnn-fe", w)["status"] == "INCORRECT"


@pytest.mark.parametrize("w", [d_(page_size=0, causal=True, window=8), d_(causal=True, window=8),
                               p_(dtype="fp8_e4m3", q_len=32)])
def test_windows_in_decode_paged_or_fp8_are_refused(w):
    why = backend("cudnn-fe").supports(w, H100)
    assert why and "sliding window" in why
