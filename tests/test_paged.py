"""Paged KV caches for decode (Workload.page_size, issue 12): the page table drawn from the workload
alone, pages (num_pages, page_size, Hkv, D) and a fingerprinted int32 table as inputs, the reference
gathering them back, the cost model's table bytes, the axis' key, validation, filters, YAML and
schema, and each backend's mapping through the fake libraries of tests/test_new_backends.py (which
gather through the table they are given): a kernel that ignores the table or the cache length is
INCORRECT, one that writes the table is caught, and every backend without a paged path refuses."""
from __future__ import annotations

import functools
import sys

import pytest
import torch

from attnbench.backends import registry
from attnbench.backends.base import ANY, Backend
from attnbench.backends.layout import dense_kv
from attnbench.backends.reference import attention_math
from attnbench.measure.inputs import fingerprint, make_inputs
from attnbench.runner import attempt
from attnbench.workloads import Workload, WorkloadError, cost
from attnbench.workloads.axes import parse_filters, select
from attnbench.workloads.grids import load_yaml_grid
from attnbench.workloads.paged import last_page_len, num_pages, page_table, pages_per_seq

from test_new_backends import A100, CPU, H100, _paged_decode, backend, fake_flash, fake_flashinfer, run


def d_(**kw) -> Workload:
    base = dict(mode="decode", batch=2, q_len=1, kv_len=40, q_heads=4, kv_heads=2, head_dim=16, head_dim_v=16,
                dtype="fp32", page_size=16)
    return Workload(**{**base, **kw})


# ---- the axis -----------------------------------------------------------------------------------

def test_page_size_is_for_decode_only_and_non_negative():
    with pytest.raises(WorkloadError, match="defined for decode only"):
        Workload(mode="prefill", batch=1, q_len=8, kv_len=8, q_heads=1, kv_heads=1, head_dim=8, head_dim_v=8,
                 page_size=16)
    with pytest.raises(WorkloadError, match="non-negative integer"):
        d_(page_size=-1)
    assert "paged16" in d_().label() and "paged" not in d_(page_size=0).label()


def test_keys_are_unchanged_at_page_size_0_and_differ_when_paged():
    import hashlib
    import json

    dense = d_(page_size=0)
    # the key of a contiguous-cache workload is the hash of the fields it had before these axes existed
    d = dense.to_dict()
    for name in ("window", "lengths", "page_size", "decode_append", "fresh_inputs"):
        del d[name]
    assert dense.key() == hashlib.sha1(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]
    assert len({dense.key(), d_(page_size=16).key(), d_(page_size=32).key()}) == 3


def test_the_page_table_is_a_deterministic_shuffle_with_no_page_in_place():
    w = d_(batch=3, kv_len=40, page_size=16)  # 3 pages per sequence, the last holding 8 tokens
    assert (pages_per_seq(w), num_pages(w), last_page_len(w)) == (3, 9, 8)
    table = page_table(w)
    flat = [p for row in table for p in row]
    assert sorted(flat) == list(range(9))  # every physical page used once
    assert all(p != i for i, p in enumerate(flat))  # none where a contiguous cache would keep it
    assert page_table(d_(batch=3, kv_len=40, page_size=16, dtype="bf16", layout="BNHD")) == table  # shape alone
    assert last_page_len(d_(kv_len=48, page_size=16)) == 16  # a dividing page size fills every page


def test_where_and_yaml_take_page_size(tmp_path):
    ws = [d_(page_size=0), d_(page_size=16), d_(page_size=32)]
    assert select(ws, parse_filters(["page_size=16"])) == [ws[1]]
    assert select(ws, parse_filters(["page_size=0,32"])) == [ws[0], ws[2]]
    p = tmp_path / "g.yaml"
    p.write_text("name: paged\nworkloads:\n  - {mode: decode, batch: 2, q_heads: 8, kv_heads: 2, head_dim: 64,\n"
                 "     kv_len: [1k, 1000], page_size: [0, 16, 256]}\n")
    name, got = load_yaml_grid(p)
    assert name == "paged" and sorted({(w.kv_len, w.page_size) for w in got}) == [
        (1000, 0), (1000, 16), (1000, 256), (1024, 0), (1024, 16), (1024, 256)]


def test_cost_counts_the_page_table_and_leaves_flops_alone():
    w = d_()  # B2 Hq4 Hkv2 D16 fp32, kv_len 40 in pages of 16: 3 pages per sequence
    dense = d_(page_size=0)
    assert cost.forward_flops(w) == cost.forward_flops(dense) == 2 * 2 * 4 * 40 * 32
    # per sequence q 4·16 + o 4·16 + kv 2·40·32 = 2688 values of 4 bytes; the table 2·3 int32
    assert cost.io_bytes(dense) == 2 * 2688 * 4 == 21504
    assert cost.page_table_bytes(w) == 24 and cost.io_bytes(w) == 21504 + 24
    # memory: every page whole (6 pages of 16 tokens, 56 slack slots included) and the table
    assert cost.input_bytes(w) == (2 * 64 + 6 * 16 * 2 * 32 + 2 * 64) * 4 + 24 == 25624


# ---- inputs and the reference -------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["BHND", "BNHD"])
def test_inputs_are_pages_and_the_reference_gathers_them(layout):
    w = d_(layout=layout)
    inp = make_inputs(w, "cpu", 0)
    assert tuple(inp.k.shape) == (6, 16, 2, 16) and tuple(inp.v.shape) == (6, 16, 2, 16)
    assert inp.page_table.dtype == torch.int32 and inp.page_table.tolist() == [list(r) for r in page_table(w)]
    k, v = dense_kv(w, inp)
    want_k = torch.stack([torch.cat([inp.k[p] for p in row])[:40] for row in page_table(w)])  # (B, N, H, D)
    assert torch.equal(k, want_k if layout == "BNHD" else want_k.transpose(1, 2))
    ref = {b.name: b for b in registry.builtin()}["reference"]
    assert ref.supports(w, CPU) is None
    o = ref.prepare(w, inp)()
    t = (lambda x: x.transpose(1, 2)) if layout == "BNHD" else (lambda x: x)
    assert torch.allclose(t(o), attention_math(t(inp.q), t(k), t(v), False, "bottom_right", inp.scale))


def test_the_page_table_is_fingerprinted():
    inp = make_inputs(d_(), "cpu", 0)
    before = fingerprint(inp)
    assert "page_table" in before
    inp.page_table[0, 0] += 1
    assert fingerprint(inp)["page_table"] != before["page_table"]


def test_the_reference_is_ok_on_a_paged_cache():
    res = run("reference", d_())
    assert res["status"] == "OK", res.get("reason")


class _Contiguous(Backend):
    """Reads the pool as if it were a contiguous cache (B, Nkv, H, D): the page table ignored."""

    def prepare(self, w, inputs):
        def step():
            flat = inputs.k.reshape(-1, w.kv_heads, w.head_dim)
            k = flat[:w.batch * w.kv_len].reshape(w.batch, w.kv_len, w.kv_heads, w.head_dim).transpose(1, 2)
            v = inputs.v.reshape(-1, w.kv_heads, w.head_dim_v)[:w.batch * w.kv_len]
            v = v.reshape(w.batch, w.kv_len, w.kv_heads, w.head_dim_v).transpose(1, 2)
            return attention_math(inputs.q, k, v, False, "bottom_right", inputs.scale)
        return step


def test_a_kernel_ignoring_the_page_table_is_incorrect():
    b = _Contiguous(name="contiguous", family="plugin", accepts={"page_size": ANY})
    spec = {"op": "attempt", "workload": d_(kv_len=48).to_dict(), "device": "cpu", "seed": 0,
            "timing": dict(warmup_s=0.0, warmup_max_s=0.1, min_samples=3, max_samples=5, max_time_s=0.05)}
    res = attempt.run(spec, b, attempt.WorkloadCache())
    assert res["status"] == "INCORRECT", res.get("reason")


# ---- refusals -----------------------------------------------------------------------------------

def test_backends_without_a_paged_path_refuse_with_a_reason():
    w16 = d_(dtype="bf16", head_dim=64, head_dim_v=64)
    paged_ok = {"reference", "fa2", "fa3", "fa4", "flashinfer-decode", "cudnn-fe", "triton-decode"}
    for b in registry.builtin():
        if b.name in paged_ok:
            continue
        dev = H100 if "cuda" in b.devices and "cpu" not in b.devices else CPU
        why = b.supports(w16, dev)
        assert why is not None, b.name
        if "decode" in b.modes and w16.dtype in b.dtypes:
            assert "no paged KV cache path" in why, (b.name, why)
    assert backend("fa4").supports(w16, H100) is None
    assert "no paged KV cache path" in backend("sdpa-math").supports(d_(), CPU)
    assert backend("flashinfer-decode").supports(w16, A100) is None
    assert backend("fa3").supports(w16, H100) is None
    assert backend("cudnn-fe").supports(w16, A100) is None  # its paged graph (tests/test_cudnn_fe_layouts.py)
    # FlashAttention-2's paged cache takes page sizes divisible by 256 (flash_api.cpp)
    assert "divisible by 256" in backend("fa2").supports(w16, A100)
    page256 = d_(dtype="bf16", head_dim=64, head_dim_v=64, kv_len=600, page_size=256)
    assert backend("fa2").supports(page256, A100) is None
    assert backend("fa2").supports(d_(dtype="bf16", head_dim=64, head_dim_v=64, page_size=0), A100) is None


# ---- FlashAttention-2/3 through flash_attn_with_kvcache -----------------------------------------

FA = [("fa2", "flash_attn", 256, 600), ("fa3", "flash_attn_interface", 16, 40)]


@pytest.mark.parametrize("name,module,page,kv_len", FA)
@pytest.mark.parametrize("kw", [dict(), dict(layout="BNHD"), dict(causal=True, window=8), dict(batch=3, kv_heads=4)])
def test_flash_attention_paged_mapping(monkeypatch, name, module, page, kv_len, kw):
    calls = fake_flash(monkeypatch, module, False)
    w = d_(page_size=page, kv_len=kv_len, **kw)
    res = run(name, w)
    assert res["status"] == "OK", res.get("reason")
    c = calls[0]
    assert c["kvcache"] == ("block_table" if name == "fa2" else "page_table")
    assert c["shape"] == (w.batch, 1, w.q_heads, w.head_dim)
    assert c["k_shape"] == (num_pages(w), page, w.kv_heads, w.head_dim)  # the pages, as they are
    assert c["table"].dtype == torch.int32 and c["table"].tolist() == [list(r) for r in page_table(w)]
    assert c["seqlens"].dtype == torch.int32 and c["seqlens"].tolist() == [kv_len] * w.batch
    assert c["causal"] is w.causal and c["scale"] == pytest.approx(w.head_dim ** -0.5)
    assert c["window_size"] == ((w.window - 1, 0) if w.window else (-1, -1))
    assert not any("kvcache" not in c for c in calls)  # never the dense flash_attn_func


def fake_fa4_paged(monkeypatch, ignore: str | None = None):
    """FlashAttention-4's flash_attn_varlen_func as its paged path documents it: q (B, Nq, Hq, D)
    without cu_seqlens_q, pages (num_pages, page_size, Hkv, D), page_table (B, pages) int32,
    seqused_k (B,) int32; `ignore` = "table" reads pages in order, "used" reads whole pages."""
    fake_flash(monkeypatch, "flash_attn.cute", True)
    calls = []

    def flash_attn_varlen_func(q, k, v, qv=None, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None,
                               max_seqlen_k=None, seqused_q=None, seqused_k=None, page_table=None,
                               softmax_scale=None, causal=False, window_size=(None, None), return_lse=False):
        assert cu_seqlens_k is None and page_table.dtype == torch.int32 and seqused_k.dtype == torch.int32
        calls.append(dict(shape=tuple(q.shape), k_shape=tuple(k.shape), table=page_table.clone(),
                          used=seqused_k.tolist(), causal=causal, window_size=window_size, scale=softmax_scale))
        table = torch.arange(page_table.numel(), dtype=torch.int32).view(page_table.shape) if ignore == "table" \
            else page_table
        used = [page_table.shape[1] * k.shape[1]] * q.shape[0] if ignore == "used" else seqused_k.tolist()
        left = -1 if window_size[0] is None else window_size[0]
        return _paged_decode(q, k, v, table, used, softmax_scale, causal, (left, 0)), None

    sys.modules["flash_attn.cute"].flash_attn_varlen_func = flash_attn_varlen_func
    return calls


@pytest.mark.parametrize("kw", [dict(), dict(layout="BNHD"), dict(causal=True, window=8), dict(batch=3, kv_heads=4)])
def test_fa4_paged_mapping(monkeypatch, kw):
    calls = fake_fa4_paged(monkeypatch)
    w = d_(page_size=16, kv_len=40, **kw)
    res = run("fa4", w)
    assert res["status"] == "OK", res.get("reason")
    c = calls[0]
    assert c["shape"] == (w.batch, 1, w.q_heads, w.head_dim)
    assert c["k_shape"] == (num_pages(w), 16, w.kv_heads, w.head_dim)  # the pages, as they are
    assert c["table"].tolist() == [list(r) for r in page_table(w)] and c["used"] == [40] * w.batch
    assert c["causal"] is w.causal and c["scale"] == pytest.approx(w.head_dim ** -0.5)
    assert c["window_size"] == ((w.window - 1, 0) if w.window else (None, None))


@pytest.mark.parametrize("ignore", ["table", "used"])
def test_fa4_paged_ignoring_the_table_or_the_length_is_incorrect(monkeypatch, ignore):
    fake_fa4_paged(monkeypatch, ignore)
    assert run("fa4", d_(page_size=16, kv_len=40))["status"] == "INCORRECT"


@pytest.mark.parametrize("name,module,page,kv_len", FA)
def test_flash_attention_ignoring_the_table_or_the_length_is_incorrect(monkeypatch, name, module, page, kv_len):
    fake_flash(monkeypatch, module, False)
    lib = sys.modules[module]
    inner = lib.flash_attn_with_kvcache
    key = "block_table" if name == "fa2" else "page_table"

    @functools.wraps(inner)  # the library's signature: the table keeps its name
    def identity_table(q, k_cache, v_cache, **kw):  # reads pages 0, 1, 2, ... in order
        kw[key] = torch.arange(kw[key].numel(), dtype=torch.int32).view(kw[key].shape)
        return inner(q, k_cache, v_cache, **kw)

    lib.flash_attn_with_kvcache = identity_table
    assert run(name, d_(page_size=page, kv_len=kv_len))["status"] == "INCORRECT"

    @functools.wraps(inner)
    def whole_pages(q, k_cache, v_cache, **kw):  # reads the last page's slack as cached tokens
        kw["cache_seqlens"] = torch.full_like(kw["cache_seqlens"], kw[key].shape[1] * page)
        return inner(q, k_cache, v_cache, **kw)

    lib.flash_attn_with_kvcache = whole_pages
    assert run(name, d_(page_size=page, kv_len=kv_len))["status"] == "INCORRECT"


def test_a_kernel_writing_the_page_table_is_caught(monkeypatch):
    fake_flash(monkeypatch, "flash_attn_interface", False)
    lib = sys.modules["flash_attn_interface"]
    inner = lib.flash_attn_with_kvcache

    @functools.wraps(inner)
    def writes(q, k_cache, v_cache, **kw):
        o = inner(q, k_cache, v_cache, **kw)
        kw["page_table"].copy_(kw["page_table"].flip(0))  # after reading it right: the output is correct
        return o

    lib.flash_attn_with_kvcache = writes
    res = run("fa3", d_())
    assert res["status"] == "INCORRECT" and "page_table" in res["reason"], res.get("reason")


def test_a_flash_build_without_a_paged_entry_is_unsupported(monkeypatch):
    fake_flash(monkeypatch, "flash_attn_interface", False)
    del sys.modules["flash_attn_interface"].flash_attn_with_kvcache
    res = run("fa3", d_())
    assert res["status"] == "UNSUPPORTED" and "flash_attn_with_kvcache" in res["reason"]
    fake_flash(monkeypatch, "flash_attn_interface", False)
    sys.modules["flash_attn_interface"].flash_attn_with_kvcache = lambda q, k_cache, v_cache, cache_seqlens=None: q
    res = run("fa3", d_())
    assert res["status"] == "UNSUPPORTED" and "block_table or page_table" in res["reason"]


# ---- FlashInfer batch decode --------------------------------------------------------------------

@pytest.mark.parametrize("kw", [dict(), dict(layout="BNHD"), dict(kv_len=48), dict(causal=True, window=8),
                                dict(batch=3, page_size=8, kv_len=20)])
def test_flashinfer_decode_plans_the_page_table(monkeypatch, kw):
    log = fake_flashinfer(monkeypatch)
    w = d_(**kw)
    res = run("flashinfer-decode", w)
    assert res["status"] == "OK", res.get("reason")
    kinds = [k for k, _ in log]
    assert kinds[0] == "plan" and kinds.count("plan") == 1  # planned once, in prepare: never in the step
    p = log[0][1]
    per = pages_per_seq(w)
    assert p["layout"] == "NHD" and p["page_size"] == w.page_size  # the pages are NHD whatever the layout
    assert p["indptr"] == [b * per for b in range(w.batch + 1)]
    assert p["indices"] == [q for row in page_table(w) for q in row]
    assert p["last"] == [last_page_len(w)] * w.batch
    assert p["heads"] == (w.q_heads, w.kv_heads, w.head_dim) and p["scale"] == pytest.approx(w.head_dim ** -0.5)
    assert p["kw"].get("window_left", -1) == (w.window - 1 if w.window else -1)
    assert log[1] == ("run", (w.batch, w.q_heads, w.head_dim))


def test_flashinfer_ignoring_the_indices_or_the_last_page_is_incorrect(monkeypatch):
    fake_flashinfer(monkeypatch)
    decode = sys.modules["flashinfer"].BatchDecodeWithPagedKVCacheWrapper
    plan = decode.plan

    def in_order(self, indptr, indices, last_page_len, *a, **kw):
        return plan(self, indptr, torch.arange(indices.numel(), dtype=torch.int32), last_page_len, *a, **kw)

    decode.plan = in_order
    assert run("flashinfer-decode", d_())["status"] == "INCORRECT"

    def full_last(self, indptr, indices, last_page_len, hq, hkv, d, page_size, **kw):
        return plan(self, indptr, indices, torch.full_like(last_page_len, page_size), hq, hkv, d, page_size, **kw)

    decode.plan = full_last
    assert run("flashinfer-decode", d_())["status"] == "INCORRECT"


def test_the_dense_decode_mapping_is_unchanged_at_page_size_0(monkeypatch):
    log = fake_flashinfer(monkeypatch)
    w = d_(page_size=0, kv_len=64, layout="BHND")
    assert run("flashinfer-decode", w)["status"] == "OK"
    p = log[0][1]
    assert p["layout"] == "HND" and p["page_size"] == 64 and p["indptr"] == [0, 1, 2] and p["indices"] == [0, 1]
    assert p["last"] == [64, 64]


# ---- show's tables ------------------------------------------------------------------------------

def test_tables_show_page_size_only_where_it_varies():
    import pandas as pd

    from attnbench.report.columns import workload_columns

    def frame(*ws):
        return pd.DataFrame([w.to_dict() for w in ws])

    titles = lambda rows: [c.title() for c in workload_columns(rows)]  # noqa: E731
    assert "page" not in titles(frame(d_(page_size=0), d_(page_size=0, batch=4)))
    assert "page" not in titles(frame(d_(page_size=16), d_(page_size=16, batch=4)))
    cols = workload_columns(frame(d_(page_size=0), d_(page_size=16)))
    (page,) = [c for c in cols if c.title() == "page"]
    assert page.right and [page.text(r) for r in [d_(page_size=0).to_dict(), d_().to_dict()]] == ["0", "16"]


# ---- end to end: run, store, show --where -------------------------------------------------------

@pytest.mark.slow
def test_run_stores_paged_rows_and_show_filters_them(tmp_path, capsys):
    from attnbench.cli.main import main
    from attnbench.store.db import Store

    grid, db = tmp_path / "g.yaml", tmp_path / "d.sqlite"
    grid.write_text("name: paged\nworkloads:\n  - {mode: decode, batch: 2, q_heads: 4, kv_heads: 2, head_dim: 16,\n"
                    "     kv_len: 40, dtype: fp32, page_size: [0, 16]}\n")
    assert main(["run", "--repeats", "1", "--config", str(grid), "--backends", "sdpa-math", "--db", str(db),
                 "--device", "cpu", "--max-time", "0.02"]) == 0
    s = Store(db, create=False)
    rows = {r["page_size"]: r for r in s.attempts() if r["backend"] == "sdpa-math"}
    s.close()
    assert rows[0]["status"] == "OK" and rows[0]["workload_key"] == d_(page_size=0).key()
    assert rows[16]["status"] == "UNSUPPORTED" and "no paged KV cache path" in rows[16]["reason"]
    assert rows[16]["workload_key"] == d_().key() and rows[16]["bytes"] == cost.io_bytes(d_())
    capsys.readouterr()
    for where, want in (("page_size=16", "1 attempts (UNSUPPORTED 1)"), ("page_size=0", "1 attempts (OK 1)")):
        assert main(["show", "--db", str(db), "--where", where]) == 0
        out = capsys.readouterr()
        assert want in out.out + out.err, (where, out)
    assert main(["show", "--db", str(db), "--where", "page_size=x"]) == 2
    assert "bad page_size 'x': use an integer" in capsys.readouterr().err
