"""The optional libraries' backends (issue 12): availability hints, declared capabilities, kernel-name
families, and the argument mapping of each prepare() through a fake module that implements the
library's documented conventions (layout, causal alignment, scale) with plain torch. jax-xla runs
for real on CPU when jax is installed."""
from __future__ import annotations

import sys
import types

import pytest
import torch

from attnbench.backends import registry
from attnbench.backends.base import DeviceInfo
from attnbench.backends.reference import attention_math
from attnbench.measure.dispatch import default_classifier, mismatch
from attnbench.runner import attempt
from attnbench.workloads import Workload

NEW = ("fa4", "fa2", "fa3", "flashinfer-prefill", "flashinfer-decode", "cudnn-fe", "jax-xla", "jax-cudnn", "xformers")
# backend -> (modules whose absence is simulated, what its hint must name)
ABSENT = {
    "fa4": (("flash_attn", "flash_attn.cute"), "attnbench[fa4]"),
    "fa2": (("flash_attn",), "from source"),
    "fa3": (("flash_attn_interface",), "from source"),
    "flashinfer-prefill": (("flashinfer",), "attnbench[flashinfer]"),
    "flashinfer-decode": (("flashinfer",), "attnbench[flashinfer]"),
    "cudnn-fe": (("cudnn",), "attnbench[cudnn]"),
    "jax-xla": (("jax", "jax.nn"), "attnbench[jax]"),
    "jax-cudnn": (("jax", "jax.nn"), "attnbench[jax]"),
    "xformers": (("xformers", "xformers.ops"), "attnbench[xformers]"),
}
H100 = DeviceInfo("cuda", "NVIDIA H100", (9, 0))
A100 = DeviceInfo("cuda", "NVIDIA A100", (8, 0))
CPU = DeviceInfo("cpu")
FAST = dict(warmup_s=0.0, warmup_max_s=0.1, min_samples=3, max_samples=5, max_time_s=0.05)


def backend(name):
    return {b.name: b for b in registry.builtin()}[name]


def w_(**kw) -> Workload:
    base = dict(mode="prefill", batch=2, q_len=32, kv_len=32, q_heads=4, kv_heads=2, head_dim=16, head_dim_v=16,
                dtype="fp32")
    return Workload(**{**base, **kw})


def run(name: str, w: Workload) -> dict:
    spec = {"op": "attempt", "workload": w.to_dict(), "device": "cpu", "seed": 0, "timing": FAST}
    return attempt.run(spec, backend(name), attempt.WorkloadCache())


# ---- registry, availability, versions -----------------------------------------------------------

def test_every_new_backend_is_registered_and_lists_after_the_builtins():
    names = [b.name for b in registry.builtin()]
    assert set(NEW) <= set(names)
    assert names.index("compile") < min(names.index(n) for n in NEW)


@pytest.mark.parametrize("name", NEW)
def test_availability_without_the_library_is_one_line_naming_what_to_install(name, monkeypatch):
    modules, extra = ABSENT[name]
    for m in modules:
        monkeypatch.setitem(sys.modules, m, None)  # `import m` raises ModuleNotFoundError
    why = backend(name).availability()
    assert why and "\n" not in why and extra in why, why
    assert backend(name).recorded_version() is None or name.startswith("jax")  # jax is installed here


def test_the_modules_import_no_optional_library():
    import subprocess

    code = ("import sys, attnbench.backends.registry as r; r.builtin(); "
            "print(sorted(m for m in ('flash_attn', 'flash_attn_interface', 'flashinfer', 'cudnn', 'jax', 'xformers')"
            " if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr


def test_builtins_record_torch_as_their_version():
    v = backend("sdpa-flash").recorded_version()
    assert v == torch.__version__ and backend("flex").recorded_version() == v


# ---- declared capabilities ----------------------------------------------------------------------

def test_min_capability_and_device():
    bf16 = w_(dtype="bf16", head_dim=64, head_dim_v=64)
    for name in ("fa4", "fa3"):
        assert "compute capability >= 9.0" in backend(name).supports(bf16, A100)
        assert backend(name).supports(bf16, H100) is None
        assert "does not run on cpu" in backend(name).supports(bf16, CPU)
    for name in ("fa2", "flashinfer-prefill", "cudnn-fe", "jax-cudnn", "xformers"):
        assert backend(name).supports(bf16, A100) is None, name
    assert backend("jax-xla").supports(bf16, CPU) is None


def test_dtypes_head_dims_and_gqa():
    fp32 = w_(head_dim=64, head_dim_v=64)
    for name in ("fa4", "fa2", "fa3", "flashinfer-prefill", "cudnn-fe", "jax-cudnn"):
        assert "dtype fp32 not offered" in backend(name).supports(fp32, H100), name
    assert backend("xformers").supports(fp32, H100) is None
    big = w_(dtype="bf16", head_dim=512, head_dim_v=512)
    for name in ("fa4", "fa2", "fa3"):
        assert "head_dim 512 > 256" in backend(name).supports(big, H100)
    odd = w_(dtype="bf16", head_dim=96, head_dim_v=96)
    assert "(64, 128, 256)" in backend("flashinfer-prefill").supports(odd, H100)
    mla = w_(dtype="bf16", head_dim=192, head_dim_v=128)
    assert "head_dim_v == head_dim" in backend("jax-xla").supports(mla, H100)
    gqa = w_(dtype="bf16", head_dim=128, head_dim_v=128, q_heads=32, kv_heads=8)
    for name in NEW:
        if name != "flashinfer-decode":
            assert backend(name).supports(gqa, H100) is None, name


def test_modes_and_causal_alignment():
    top = w_(dtype="bf16", head_dim=64, head_dim_v=64, causal=True, causal_align="top_left", q_len=16, kv_len=32)
    for name in ("fa4", "fa2", "fa3", "flashinfer-prefill"):
        assert "bottom-right only" in backend(name).supports(top, H100), name
    for name in ("cudnn-fe", "jax-xla", "jax-cudnn", "xformers"):  # top-left is one of their flags
        assert backend(name).supports(top, H100) is None, name
    bottom = w_(dtype="bf16", head_dim=64, head_dim_v=64, causal=True, q_len=16, kv_len=32)
    assert "takes no mask" in backend("jax-cudnn").supports(bottom, H100)
    assert backend("jax-xla").supports(bottom, H100) is None
    square = w_(dtype="bf16", head_dim=64, head_dim_v=64, causal=True, causal_align="top_left")
    assert backend("fa4").supports(square, H100) is None  # both alignments coincide at Nq == Nkv
    train = w_(dtype="bf16", head_dim=64, head_dim_v=64, mode="train_fwd")
    for name in ("cudnn-fe", "jax-xla", "flashinfer-prefill"):
        assert "not offered" in backend(name).supports(train, H100)
    assert backend("fa4").supports(train, H100) is None
    decode = w_(dtype="bf16", head_dim=128, head_dim_v=128, mode="decode", q_len=1, kv_len=512)
    assert backend("flashinfer-decode").supports(decode, H100) is None
    assert "not offered" in backend("flashinfer-prefill").supports(decode, H100)
    graph = w_(dtype="bf16", head_dim=64, head_dim_v=64, launch="graph")
    assert "not graph-capturable" in backend("jax-xla").supports(graph, H100)


# ---- kernel families ----------------------------------------------------------------------------

KERNEL_NAMES = [
    ("kernel_cutlass_kernel_flash_attncuteflash_fwd_sm90FlashAttentionForwardSm90_object_at__tensor0000o1_0",
     "flash-attn4"),
    ("flash_fwd_sm100_bf16_head_dim128_tile128x128_threads384_causal_kernel_cutlass_kernel_flash_attncuteflash_"
     "fwd_sm100FlashAttentionForwardSm100_object_at__tensor0000o11101213_0", "flash-attn4"),
    ("kernel_cutlass_kernel_flash_attncuteflash_bwd_preprocessFlashAttentionBackwardPreprocess_object_at_0",
     "flash-attn4"),
    ("void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>, "
     "false, true, false, false, true, true, false>(flash::Flash_fwd_params)", "flash-attn2"),
    ("void flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128>>(flash::Flash_bwd_params)",
     "flash-attn2"),
    ("void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<flash::CollectiveMainloopFwdSm90"
     "<2, cute::tuple<cute::C<1>>, cute::tuple<cute::C<128>>, 128, cutlass::bfloat16_t, float>>>>(...)",
     "flash-attn3"),
    ("void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnBwdSm90<...>>>(...)", "flash-attn3"),
    ("void flashinfer::SinglePrefillWithKVCacheKernel<flashinfer::KernelTraits<...>, (flashinfer::MaskMode)1>(...)",
     "flashinfer"),
    ("void flashinfer::BatchPrefillWithRaggedKVCacheKernel<...>(flashinfer::BatchPrefillRaggedParams<...>)",
     "flashinfer"),
    ("void flashinfer::BatchDecodeWithPagedKVCacheKernel<(flashinfer::PosEncodingMode)0, 2u, 4u, 8u>(...)",
     "flashinfer"),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_kernel0_0", "cudnn"),
    ("fmha_cutlassF_f16_aligned_64x128_rf_sm80(AttentionKernel<cutlass::half_t, cutlass::arch::Sm80, true, 64, "
     "128, 128, true, true>::Params)", "cutlass-fmha"),  # xformers' own: the family it shares with SDPA
    ("loop_multiply_fusion", "xla"),
    ("input_reduce_fusion_1", "xla"),
    ("gemm_fusion_dot_3", "xla"),
]


@pytest.mark.parametrize("name,family", KERNEL_NAMES, ids=[n[:40] for n, _ in KERNEL_NAMES])
def test_new_kernel_names_classify_to_their_family(name, family):
    assert default_classifier().family_of(name) == family


def test_the_new_patterns_do_not_take_sdpas_kernels():
    from test_dispatch import NAMES  # SDPA's, the generic families' and unrecognised names

    for name, family in NAMES:
        assert default_classifier().family_of(name) == family, name


def test_new_attention_families_are_told_apart_from_sdpas():
    c = default_classifier()
    assert {"flash-attn2", "flash-attn3", "flash-attn4", "flashinfer"} <= c.attention
    # a backend declaring FA4 that ran PyTorch's FA2 (or the reverse) is a mismatch
    assert mismatch(frozenset({"flash-attn4"}), ["pytorch-flash"], c.attention)
    assert mismatch(frozenset({"pytorch-flash"}), ["flash-attn2"], c.attention)
    assert mismatch(frozenset({"flash-attn2"}), ["flash-attn2", "unfused-gemm"], c.attention) is None
    assert backend("cudnn-fe").expected_kernels("cuda") == backend("sdpa-cudnn").expected_kernels("cuda")


def test_jax_xla_declares_no_cpu_family_so_the_probe_cannot_fail_it():
    b = backend("jax-xla")
    assert "cpu" in b.kernel_families and b.expected_kernels("cpu") == frozenset()
    assert mismatch(b.expected_kernels("cpu"), [], default_classifier().attention) is None


# ---- jax-xla, for real, on CPU ------------------------------------------------------------------

@pytest.mark.parametrize("kw", [
    dict(),
    dict(causal=True, q_len=16, kv_len=32),  # bottom-right: a mask
    dict(causal=True, causal_align="top_left", q_len=16, kv_len=32),  # JAX's is_causal
    dict(layout="BNHD", dtype="bf16", causal=True),
    dict(mode="decode", q_len=1, kv_len=64, causal=True),
    dict(mode="train_fwd_bwd", causal=True),
])
def test_jax_xla_runs_ok_and_correct_on_cpu(kw):
    pytest.importorskip("jax")
    res = run("jax-xla", w_(**kw))
    assert res["status"] == "OK", res.get("reason")
    assert res["err_ratio"] is not None and res["hard_err_ratio"] is not None
    assert res["dispatch_status"] == "probed" and res["dispatch_families"] == []


# ---- argument mapping, through fake libraries ---------------------------------------------------

def _bhnd_attention(q, k, v, causal, align, scale, window=None):
    """Reference on (B, H, N, D) tensors, K/V heads expanded for GQA."""
    return attention_math(q, k, v, causal, align, scale, window)


def _bnhd_attention(q, k, v, causal, align, scale, window=None):
    t = lambda x: x.transpose(1, 2)  # noqa: E731
    return t(_bhnd_attention(t(q), t(k), t(v), causal, align, scale, window))


def _module(monkeypatch, name, **attrs):
    mod = types.ModuleType(name)
    for k, v in attrs.items():
        setattr(mod, k, v)
    monkeypatch.setitem(sys.modules, name, mod)
    return mod


def _gather_pages(k_pages, pages, n):
    """One sequence's cache from a paged pool (num_pages, page_size, H, D): its pages in order, n tokens."""
    return k_pages[pages].reshape(-1, k_pages.shape[2], k_pages.shape[3])[:n]


def _paged_decode(q, k_cache, v_cache, table, seqlens, scale, causal, window_size):
    """Decode against a paged cache, gathered through the table it is given, or a contiguous
    (B, N, H, D) cache when the table is None: q (B, 1, Hq, D) -> O."""
    left = window_size[0]
    outs = []
    for b in range(q.shape[0]):
        n = int(seqlens[b])
        if table is None:
            kb, vb = k_cache[b:b + 1, :n], v_cache[b:b + 1, :n]
        else:
            kb, vb = (_gather_pages(c, table[b].long(), n)[None] for c in (k_cache, v_cache))
        outs.append(_bnhd_attention(q[b:b + 1], kb, vb, causal, "bottom_right", scale, left + 1 if left >= 0 else None))
    return torch.cat(outs)


def _append_kv(k_cache, v_cache, k, v, table, seqlens):
    """FlashAttention's documented append: k, v (B, seqlen_new, Hkv, D) written into the cache starting
    at cache_seqlens (through the table when paged); the new lengths."""
    out = []
    for b, n in enumerate(int(x) for x in seqlens):
        for i in range(k.shape[1]):
            pos = n + i
            if table is None:
                k_cache[b, pos], v_cache[b, pos] = k[b, i], v[b, i]
            else:
                page, at = int(table[b, pos // k_cache.shape[1]]), pos % k_cache.shape[1]
                k_cache[page, at], v_cache[page, at] = k[b, i], v[b, i]
        out.append(n + k.shape[1])
    return out


def fake_flash(monkeypatch, module: str, returns_lse: bool):
    """A flash_attn_func: (B, N, H, D) tensors, causal aligned bottom-right, as FlashAttention documents;
    FlashAttention-2 and -3 also get flash_attn_with_kvcache over a paged cache (pages (num_pages,
    page_size, Hkv, D)), its table named block_table (FA2) or page_table (FA3) as each documents, or a
    contiguous one, with the documented in-place append of k=, v= at cache_seqlens."""
    calls = []

    def kvcache(table_name, q, k_cache, v_cache, cache_seqlens, table, softmax_scale, causal, window_size, k=None,
                v=None):
        calls.append(dict(kvcache=table_name, shape=tuple(q.shape), k_shape=tuple(k_cache.shape), table=table,
                          seqlens=cache_seqlens.clone(), scale=softmax_scale, causal=causal, window_size=window_size,
                          k_new=None if k is None else tuple(k.shape), v_new=None if v is None else tuple(v.shape)))
        seqlens = cache_seqlens.tolist()
        if k is not None:
            seqlens = _append_kv(k_cache, v_cache, k, v, table, seqlens)
        o = _paged_decode(q, k_cache, v_cache, table, seqlens, softmax_scale, causal, window_size)
        return (o, None) if returns_lse else o

    def fa2_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None, cache_seqlens=None,
                         cache_batch_idx=None, cache_leftpad=None, block_table=None, softmax_scale=None, causal=False,
                         window_size=(-1, -1)):
        return kvcache("block_table", q, k_cache, v_cache, cache_seqlens, block_table, softmax_scale, causal,
                       window_size, k, v)

    def fa3_with_kvcache(q, k_cache, v_cache, k=None, v=None, qv=None, rotary_cos=None, rotary_sin=None,
                         cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None, page_table=None,
                         softmax_scale=None, causal=False, window_size=(-1, -1)):
        return kvcache("page_table", q, k_cache, v_cache, cache_seqlens, page_table, softmax_scale, causal,
                       window_size, k, v)

    extra = {"flash_attn": {"flash_attn_with_kvcache": fa2_with_kvcache},
             "flash_attn_interface": {"flash_attn_with_kvcache": fa3_with_kvcache}}.get(module, {})

    def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, **kw):
        calls.append(dict(shape=tuple(q.shape), k_shape=tuple(k.shape), scale=softmax_scale, causal=causal, kw=kw))
        left, right = kw.get("window_size", (-1, -1))  # keys left and right of the diagonal; -1: all
        assert right in (-1, 0), "the fake implements causal windows only"
        o = _bnhd_attention(q, k, v, causal, "bottom_right", softmax_scale, left + 1 if left >= 0 else None)
        return (o, None) if returns_lse else o

    if "." in module:
        parent, child = module.split(".")
        pkg = _module(monkeypatch, parent)
        setattr(pkg, child, _module(monkeypatch, module, flash_attn_func=flash_attn_func))
    else:
        _module(monkeypatch, module, flash_attn_func=flash_attn_func, **extra)
    return calls


@pytest.mark.parametrize("name,module,lse", [("fa4", "flash_attn.cute", True), ("fa2", "flash_attn", False),
                                             ("fa3", "flash_attn_interface", False)])
@pytest.mark.parametrize("kw", [dict(causal=True, q_len=16, kv_len=32), dict(layout="BNHD"),
                                dict(mode="train_fwd_bwd", causal=True), dict(mode="train_fwd")])
def test_flash_attention_mapping(monkeypatch, name, module, lse, kw):
    calls = fake_flash(monkeypatch, module, lse)
    w = w_(**kw)
    assert backend(name).availability() is None
    res = run(name, w)
    assert res["status"] == "OK", res.get("reason")
    c = calls[0]
    assert c["shape"] == (w.batch, w.q_len, w.q_heads, w.head_dim)  # BNHD whatever the workload's layout
    assert c["k_shape"] == (w.batch, w.kv_len, w.kv_heads, w.head_dim)  # GQA: K/V heads as they are
    assert c["causal"] is w.causal and c["scale"] == pytest.approx(w.head_dim ** -0.5)
    assert "window_size" not in c["kw"]  # no window axis yet: the library's default (none)


def fake_xformers(monkeypatch):
    calls = []

    class LowerTriangularMask:  # top-left, as xformers documents
        pass

    class LowerTriangularFromBottomRightMask:
        pass

    class LowerTriangularFromBottomRightLocalAttentionMask(LowerTriangularFromBottomRightMask):
        def __init__(self, window_size):
            self.window_size = window_size

    class FwOp:
        pass

    class BwOp:
        pass

    def memory_efficient_attention(q, k, v, attn_bias=None, p=0.0, scale=None, op=None):
        calls.append(dict(shape=tuple(q.shape), k_shape=tuple(k.shape), k_stride=k.stride(), bias=attn_bias,
                          scale=scale, op=op))
        if q.dim() == 5:  # BMGHK -> BMHK
            q, k, v = (t.flatten(2, 3) for t in (q, k, v))
        align = "top_left" if isinstance(attn_bias, LowerTriangularMask) else "bottom_right"
        o = _bnhd_attention(q, k, v, attn_bias is not None, align, scale, getattr(attn_bias, "window_size", None))
        return o.unflatten(2, (calls[-1]["shape"][2], calls[-1]["shape"][3])) if len(calls[-1]["shape"]) == 5 else o

    bias_mod = types.SimpleNamespace(LowerTriangularMask=LowerTriangularMask,
                                     LowerTriangularFromBottomRightMask=LowerTriangularFromBottomRightMask,
                                     LowerTriangularFromBottomRightLocalAttentionMask=(
                                         LowerTriangularFromBottomRightLocalAttentionMask))
    fmha = _module(monkeypatch, "xformers.ops.fmha", attn_bias=bias_mod,
                   cutlass=types.SimpleNamespace(FwOp=FwOp, BwOp=BwOp))
    ops = _module(monkeypatch, "xformers.ops", memory_efficient_attention=memory_efficient_attention, fmha=fmha)
    _module(monkeypatch, "xformers", ops=ops, __version__="0.0.fake")
    return calls, (LowerTriangularMask, LowerTriangularFromBottomRightMask, FwOp, BwOp)


@pytest.mark.parametrize("kw,bias", [(dict(causal=True, q_len=16, kv_len=32), 1),
                                     (dict(causal=True, causal_align="top_left", q_len=16, kv_len=32), 0),
                                     (dict(mode="train_fwd_bwd"), None), (dict(kv_heads=4), None)])
def test_xformers_mapping(monkeypatch, kw, bias):
    calls, classes = fake_xformers(monkeypatch)
    w = w_(**kw)
    res = run("xformers", w)
    assert res["status"] == "OK", res.get("reason")
    c = calls[0]
    g = w.q_heads // w.kv_heads
    if g > 1:  # BMGHK, K/V broadcast over the group without a copy
        assert c["shape"] == (w.batch, w.q_len, w.kv_heads, g, w.head_dim) and c["k_stride"][3] == 0
    else:
        assert c["shape"] == (w.batch, w.q_len, w.q_heads, w.head_dim)
    assert (c["bias"] is None) if bias is None else isinstance(c["bias"], classes[bias])
    assert c["op"] == (classes[2], classes[3]) and c["scale"] == pytest.approx(w.head_dim ** -0.5)


def fake_flashinfer(monkeypatch):
    """FlashInfer's documented conventions: NHD (N, H, D) or HND tensors, causal bottom-right."""
    log = []

    def window(kw):  # window_left keys left of the diagonal (-1, the default: no window)
        left = kw.get("window_left", -1)
        return left + 1 if left >= 0 else None

    def single_prefill_with_kv_cache(q, k, v, causal=False, kv_layout="NHD", sm_scale=None, **kw):
        log.append(("single", dict(q=tuple(q.shape), causal=causal, kv_layout=kv_layout, scale=sm_scale, kw=kw)))
        return _bnhd_attention(q[None], k[None], v[None], causal, "bottom_right", sm_scale, window(kw))[0]

    class Ragged:
        def __init__(self, ws, kv_layout="NHD"):
            self.kv_layout = kv_layout

        def plan(self, qo_indptr, kv_indptr, hq, hkv, d, causal=False, sm_scale=None, **kw):
            self.p = dict(qo=qo_indptr.tolist(), kv=kv_indptr.tolist(), heads=(hq, hkv, d), causal=causal, scale=sm_scale,
                          kw=kw)
            log.append(("plan", self.p))

        def run(self, q, k, v):
            log.append(("run", tuple(q.shape)))
            qo, kvp = self.p["qo"], self.p["kv"]
            outs = [_bnhd_attention(q[None, qo[i]:qo[i + 1]], k[None, kvp[i]:kvp[i + 1]], v[None, kvp[i]:kvp[i + 1]],
                                    self.p["causal"], "bottom_right", self.p["scale"], window(self.p["kw"]))[0]
                    for i in range(len(qo) - 1)]
            return torch.cat(outs)

    class Decode:
        def __init__(self, ws, kv_layout="NHD"):
            self.kv_layout = kv_layout

        def plan(self, indptr, indices, last_page_len, hq, hkv, d, page_size, sm_scale=None, **kw):
            self.p = dict(indptr=indptr.tolist(), indices=indices.tolist(), last=last_page_len.tolist(),
                          heads=(hq, hkv, d), page_size=page_size, scale=sm_scale, layout=self.kv_layout, kw=kw)
            log.append(("plan", self.p))

        def run(self, q, cache):
            log.append(("run", tuple(q.shape)))
            k, v = cache
            if self.kv_layout == "HND":  # (pages, H, page_size, D) -> (pages, page_size, H, D)
                k, v = k.transpose(1, 2), v.transpose(1, 2)
            assert k.shape[1] == self.p["page_size"], "the cache's pages are not the planned page size"
            win = window(self.p["kw"])  # decode: one query at the newest key, a window keeps the newest keys
            indptr, indices, size = self.p["indptr"], self.p["indices"], self.p["page_size"]
            outs = []
            for b in range(q.shape[0]):  # sequence b: pages indices[indptr[b]:indptr[b+1]], the last partly filled
                pages = torch.tensor(indices[indptr[b]:indptr[b + 1]])
                n = (len(pages) - 1) * size + self.p["last"][b]
                kb, vb = (_gather_pages(c, pages, n)[None] for c in (k, v))
                outs.append(_bnhd_attention(q[b:b + 1, None], kb, vb, win is not None, "bottom_right", self.p["scale"],
                                            win)[:, 0])
            return torch.cat(outs)

    _module(monkeypatch, "flashinfer", single_prefill_with_kv_cache=single_prefill_with_kv_cache,
            BatchPrefillWithRaggedKVCacheWrapper=Ragged, BatchDecodeWithPagedKVCacheWrapper=Decode)
    return log


@pytest.mark.parametrize("kw", [dict(batch=1, causal=True, q_len=16, kv_len=32), dict(causal=True, q_len=16, kv_len=32),
                                dict(layout="BHND", causal=True, q_len=16, kv_len=32)])
def test_flashinfer_prefill_mapping(monkeypatch, kw):
    log = fake_flashinfer(monkeypatch)
    w = w_(**{"layout": "BNHD", **kw})
    res = run("flashinfer-prefill", w)
    assert res["status"] == "OK", res.get("reason")
    if w.batch == 1:
        kind, c = log[0]
        assert kind == "single" and c["q"] == (w.q_len, w.q_heads, w.head_dim) and c["causal"] and c["kv_layout"] == "NHD"
    else:
        kinds = [k for k, _ in log]
        assert kinds[0] == "plan" and kinds.count("plan") == 1  # planned once, in prepare: never in the step
        p = log[0][1]
        assert p["qo"] == [0, 16, 32] and p["kv"] == [0, 32, 64] and p["heads"] == (4, 2, 16) and p["causal"]
        assert log[1] == ("run", (w.batch * w.q_len, w.q_heads, w.head_dim))


@pytest.mark.parametrize("layout,kv_layout", [("BNHD", "NHD"), ("BHND", "HND")])
def test_flashinfer_decode_mapping(monkeypatch, layout, kv_layout):
    log = fake_flashinfer(monkeypatch)
    w = w_(mode="decode", q_len=1, kv_len=64, layout=layout, causal=True)
    res = run("flashinfer-decode", w)
    assert res["status"] == "OK", res.get("reason")
    kinds = [k for k, _ in log]
    assert kinds.count("plan") == 1 and kinds[0] == "plan"
    p = log[0][1]
    assert p["layout"] == kv_layout and p["page_size"] == 64 and p["indptr"] == [0, 1, 2] and p["last"] == [64, 64]
    assert p["scale"] == pytest.approx(16 ** -0.5) and log[1] == ("run", (2, 4, 16))


def fake_cudnn(monkeypatch):
    log = []

    class T:
        def __init__(self, like=None):
            self.like = like

        def __getattr__(self, name):  # set_output, set_dim, set_stride, set_data_type: chainable
            return lambda *a, **k: self

    class Graph:
        def __init__(self, **kw):
            log.append(("graph", kw))

        def tensor_like(self, t):
            return T(t)

        def sdpa(self, **kw):
            log.append(("sdpa", kw))
            return T(), T()

        def sdpa_backward(self, **kw):
            log.append(("sdpa_backward", kw))
            return T(), T(), T()

        def get_workspace_size(self):
            return 0

        def __getattr__(self, name):  # validate, build_operation_graph, ...
            return lambda *a, **k: None

    ns = types.SimpleNamespace
    _module(monkeypatch, "cudnn", pygraph=Graph, create_handle=lambda: "handle", set_stream=lambda **k: None,
            data_type=ns(BFLOAT16="bf16", HALF="fp16", FLOAT="fp32"), heur_mode=ns(A="A", FALLBACK="F"))
    return log


@pytest.mark.parametrize("kw,top,bottom", [(dict(causal=True, q_len=16, kv_len=32), False, True),
                                           (dict(causal=True, causal_align="top_left", q_len=16, kv_len=32), True, False),
                                           (dict(causal=True), True, False), (dict(), False, False),
                                           (dict(mode="train_fwd_bwd", causal=True, q_len=16, kv_len=32), False, True)])
def test_cudnn_frontend_graph_arguments(monkeypatch, kw, top, bottom):
    from attnbench.measure.inputs import make_inputs

    log = fake_cudnn(monkeypatch)
    w = w_(dtype="bf16", **kw)
    inputs = make_inputs(w, "cpu", 0)
    prepared = backend("cudnn-fe").prepare(w, inputs)
    (sdpa,) = [c for k, c in log if k == "sdpa"]
    assert sdpa["use_causal_mask"] is top and sdpa["use_causal_mask_bottom_right"] is bottom
    assert sdpa["attn_scale"] == pytest.approx(w.head_dim ** -0.5) and sdpa["generate_stats"] is w.needs_grad
    assert sdpa["q"].like.shape == (w.batch, w.q_heads, w.q_len, w.head_dim)  # (B, H, N, D) dims, any strides
    backward = [c for k, c in log if k == "sdpa_backward"]
    assert (prepared.backward is not None) is w.needs_grad and len(backward) == int(w.needs_grad)
    if backward:
        assert backward[0]["use_causal_mask_bottom_right"] is bottom


@pytest.mark.parametrize("name,module", [("fa4", "flash_attn.cute"), ("fa2", "flash_attn"),
                                         ("fa3", "flash_attn_interface")])
def test_flash_attend_maps_the_window_and_refuses_top_left(monkeypatch, name, module):
    from attnbench.backends.base import Rejected
    from attnbench.backends.layout import keep_mask

    calls = []

    def flash_attn_func(q, k, v, softmax_scale=None, causal=False, window_size=(-1, -1)):
        calls.append(dict(shape=tuple(q.shape), causal=causal, window=window_size, scale=softmax_scale))
        left, _ = window_size
        t = lambda x: x.transpose(1, 2)  # noqa: E731
        keep = keep_mask(q.shape[1], k.shape[1], "bottom_right", q.device, left + 1 if left >= 0 else None)
        s = (t(q) @ t(k).transpose(-1, -2) * softmax_scale).masked_fill(~keep, float("-inf"))
        return t(torch.softmax(s, -1) @ t(v))

    fake_flash(monkeypatch, module, False)
    monkeypatch.setattr(sys.modules[module], "flash_attn_func", flash_attn_func)
    b = backend(name)
    q, k, v = torch.randn(1, 2, 8, 16), torch.randn(1, 2, 12, 16), torch.randn(1, 2, 12, 16)
    o = b.attend(q, k, v, causal=True, window=3)
    assert calls[-1] == dict(shape=(1, 8, 2, 16), causal=True, window=(2, 0), scale=16 ** -0.5)
    assert torch.allclose(o, attention_math(q, k, v, True, "bottom_right", 16 ** -0.5, 3), atol=1e-5)
    b.attend(q, k, v, causal=False)
    assert calls[-1]["window"] == (-1, -1) and calls[-1]["causal"] is False  # no window_size passed
    with pytest.raises(Rejected, match="bottom-right only"):
        b.attend(q, k, v, causal=True, causal_align="top_left")


@pytest.mark.parametrize("kw", [dict(causal=False), dict(causal=True), dict(causal=True, causal_align="top_left"),
                                dict(causal=True, window=3)])
def test_jax_xla_attend_on_cpu(kw):
    pytest.importorskip("jax")
    from attnbench.backends.base import Rejected

    q, k, v = torch.randn(1, 4, 8, 16), torch.randn(1, 2, 12, 16), torch.randn(1, 2, 12, 16)
    o = backend("jax-xla").attend(q, k, v, **kw)
    ref = attention_math(q, k, v, kw["causal"], kw.get("causal_align", "bottom_right"), 16 ** -0.5, kw.get("window"))
    assert o.shape == (1, 4, 8, 16) and torch.allclose(o, ref, atol=1e-5)
    with pytest.raises(Rejected, match="no torch autograd"):
        backend("jax-xla").attend(q.requires_grad_(), k, v)


def test_a_refusal_is_unsupported_and_an_argument_bug_is_an_error(monkeypatch):
    def refuses(q, k, v, **kw):
        raise AssertionError("head_dim must be divisible by 8")

    _module(monkeypatch, "flash_attn_interface", flash_attn_func=refuses)
    res = run("fa3", w_())
    assert res["status"] == "UNSUPPORTED" and "FlashAttention-3 refused" in res["reason"]

    def wrong_call(q, k, v):  # a keyword attnbench passes that the library does not take
        return q

    _module(monkeypatch, "flash_attn_interface", flash_attn_func=wrong_call)
    res = run("fa3", w_())
    assert res["status"] == "ERROR" and "TypeError" in res["reason"], res["reason"]


def test_every_row_records_its_backends_version():
    from attnbench import record
    from attnbench.runner.sink import planned_columns

    assert record.BY_NAME["backend_version"].origin == record.PLAN
    w = w_()
    for name, want in (("sdpa-flash", torch.__version__), ("compile", torch.__version__), ("fa4", None)):
        a = types.SimpleNamespace(key="k", backend=backend(name), workload=w, repeat=0)
        if name == "fa4":
            a.backend.version = lambda: None  # not installed here
        assert planned_columns(a)["backend_version"] == want
    b = backend("jax-xla")
    calls = []
    b.version = lambda: calls.append(1) or "0.0.fake"
    assert [b.recorded_version() for _ in range(3)] == ["0.0.fake"] * 3 and calls == [1]  # asked once


def test_xformers_attend_and_capability(monkeypatch):
    from attnbench.backends.base import Rejected

    calls, _ = fake_xformers(monkeypatch)
    b = backend("xformers")
    q, k, v = torch.randn(1, 4, 8, 16), torch.randn(1, 2, 12, 16), torch.randn(1, 2, 12, 16)
    o = b.attend(q, k, v, causal=True)
    assert o.shape == (1, 4, 8, 16) and calls[-1]["shape"] == (1, 8, 2, 2, 16)  # BMGHK
    assert torch.allclose(o, attention_math(q, k, v, True, "bottom_right", 16 ** -0.5), atol=1e-5)
    b.attend(q, k, v, causal=True, window=3)
    assert calls[-1]["bias"].window_size == 3
    with pytest.raises(Rejected, match="bottom-right only"):
        b.attend(q, k, v, causal=True, causal_align="top_left", window=3)
    blackwell = DeviceInfo("cuda", "B200", (10, 0))
    assert "up to compute capability 9.0" in b.supports(w_(dtype="bf16"), blackwell)


@pytest.mark.slow
def test_jax_release_drops_its_pool_and_the_next_call_still_runs():
    """Between workloads jax's compiled functions and client (its memory pool) are dropped; a later
    workload compiles and runs again; a backend never used releases nothing."""
    jax = pytest.importorskip("jax")
    b = backend("jax-xla")
    q, k, v = torch.randn(1, 2, 8, 16), torch.randn(1, 2, 8, 16), torch.randn(1, 2, 8, 16)
    before = b.attend(q, k, v)
    client = jax.devices()[0].client
    b.release()
    assert "_attend_fns" not in b.__dict__ and jax.devices()[0].client is not client
    assert torch.allclose(b.attend(q, k, v), before)
    b.release()
    client = jax.devices()[0].client
    b.release()  # nothing ran since: the client stays
    backend("jax-cudnn").release()  # never used in this process
    assert jax.devices()[0].client is client


# ---- the sliding-window axis (Workload.window) --------------------------------------------------

WINDOWED = [dict(causal=True, window=8), dict(causal=True, q_len=16, kv_len=32, window=5),
            dict(mode="decode", q_len=1, kv_len=64, causal=True, window=16, layout="BNHD")]


@pytest.mark.parametrize("name,module,lse", [("fa4", "flash_attn.cute", True), ("fa2", "flash_attn", False),
                                             ("fa3", "flash_attn_interface", False)])
@pytest.mark.parametrize("kw", WINDOWED[:2] + [dict(mode="train_fwd_bwd", causal=True, window=8)])
def test_flash_attention_maps_the_window_to_window_size(monkeypatch, name, module, lse, kw):
    calls = fake_flash(monkeypatch, module, lse)
    w = w_(**kw)
    res = run(name, w)
    assert res["status"] == "OK", res.get("reason")  # the fake applies window_size: the check agrees
    assert all(c["kw"]["window_size"] == (w.window - 1, 0) and c["causal"] for c in calls)


def test_flash_attention_ignoring_the_window_is_incorrect(monkeypatch):
    calls = fake_flash(monkeypatch, "flash_attn", False)
    lib = sys.modules["flash_attn"]
    inner = lib.flash_attn_func
    lib.flash_attn_func = lambda q, k, v, **kw: inner(q, k, v, **{n: x for n, x in kw.items() if n != "window_size"})
    res = run("fa2", w_(causal=True, window=8))
    assert res["status"] == "INCORRECT" and calls, res.get("reason")


@pytest.mark.parametrize("kw", [dict(batch=1, **WINDOWED[1]), WINDOWED[1], dict(layout="BHND", **WINDOWED[0])])
def test_flashinfer_prefill_maps_the_window_to_window_left(monkeypatch, kw):
    log = fake_flashinfer(monkeypatch)
    w = w_(**{"layout": "BNHD", **kw})
    res = run("flashinfer-prefill", w)
    assert res["status"] == "OK", res.get("reason")
    kind, c = log[0]
    assert kind == ("single" if w.batch == 1 else "plan") and c["kw"]["window_left"] == w.window - 1


def test_flashinfer_decode_maps_the_window_to_window_left(monkeypatch):
    log = fake_flashinfer(monkeypatch)
    w = w_(**WINDOWED[2])
    res = run("flashinfer-decode", w)
    assert res["status"] == "OK", res.get("reason")
    assert log[0][0] == "plan" and log[0][1]["kw"]["window_left"] == 15
    log.clear()
    assert run("flashinfer-decode", w_(mode="decode", q_len=1, kv_len=64, causal=True))["status"] == "OK"
    assert "window_left" not in log[0][1]["kw"]  # no window: the library's default


def test_xformers_maps_the_window_to_its_local_mask_and_refuses_top_left(monkeypatch):
    calls, _ = fake_xformers(monkeypatch)
    res = run("xformers", w_(**WINDOWED[1]))
    assert res["status"] == "OK", res.get("reason")
    assert type(calls[0]["bias"]).__name__ == "LowerTriangularFromBottomRightLocalAttentionMask"
    assert calls[0]["bias"].window_size == 5
    top_left = w_(causal=True, causal_align="top_left", q_len=16, kv_len=32, window=5)
    assert "bottom-right only" in backend("xformers").supports(top_left, H100)


@pytest.mark.parametrize("name", ["jax-cudnn"])
def test_backends_without_a_mapped_window_refuse_it_with_a_reason(name):
    w = w_(dtype="bf16", **WINDOWED[0])
    why = backend(name).supports(w, H100)
    assert why and "window" in why
    assert backend(name).supports(w_(dtype="bf16", causal=True), H100) is None


@pytest.mark.parametrize("name", ["reference", "sdpa-math", "sdpa-flash", "flex", "jax-xla"])
@pytest.mark.parametrize("kw", WINDOWED + [dict(causal=True, causal_align="top_left", q_len=16, kv_len=32, window=5),
                                           dict(causal=True, window=1), dict(mode="train_fwd_bwd", causal=True, window=8)])
def test_windowed_workloads_run_correct_on_every_cpu_path(name, kw):
    if name == "jax-xla":
        pytest.importorskip("jax")
    w = w_(**kw)
    why = backend(name).supports(w, CPU)
    if why:  # what may refuse on CPU, and only for its known reason
        assert (name, w.mode) in {("flex", "train_fwd_bwd"), ("jax-xla", "train_fwd")}, why
        return
    res = run(name, w)
    assert res["status"] == "OK", res.get("reason")
    assert res["err_ratio"] is not None and res["err_ratio"] <= 16


def test_a_backend_that_ignores_the_window_is_incorrect_on_cpu():
    from attnbench.backends.base import Backend
    from attnbench.backends.layout import from_bhnd, to_bhnd

    class NoWindow(Backend):
        def prepare(self, w, inputs):
            q, k, v = (to_bhnd(t, w.layout) for t in (inputs.q, inputs.k, inputs.v))
            return lambda: from_bhnd(attention_math(q, k, v, w.causal, w.causal_align, inputs.scale), w.layout)

    w = w_(causal=True, window=8)
    spec = {"op": "attempt", "workload": w.to_dict(), "device": "cpu", "seed": 0, "timing": FAST}
    res = attempt.run(spec, NoWindow(name="no-window", family="plugin"), attempt.WorkloadCache())
    assert res["status"] == "INCORRECT", res.get("reason")
