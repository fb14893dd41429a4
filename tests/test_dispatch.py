"""Dispatch probe (measure/dispatch.py): kernel-name families, the mismatch rule, a real CPU probe."""
from __future__ import annotations

import contextlib

import pytest
import torch

from attnbench.backends.kernels import KernelFamily
from attnbench.measure.dispatch import Classifier, Probe, default_classifier, probe, summarize, undeclared_share

CLASSIFIER = default_classifier()
family_of = CLASSIFIER.family_of
ATTENTION_FAMILIES = CLASSIFIER.attention


def mismatch(expected, observed, attention=ATTENTION_FAMILIES, probe_=None, side=frozenset()):
    from attnbench.measure.dispatch import mismatch as rule

    return rule(expected, observed, attention, probe_, side)

NAMES = [
    # FlashAttention-2 inside PyTorch
    ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
     "cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, false, "
     "false, true, true, false>(pytorch_flash::Flash_fwd_params)", "pytorch-flash"),
    ("void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128>>"
     "(pytorch_flash::Flash_bwd_params)", "pytorch-flash"),
    ("void pytorch_flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<64>>(pytorch_flash::Flash_fwd_params)",
     "pytorch-flash"),
    # cuDNN
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_kernel0_0",
     "cudnn"),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64", "cudnn"),
    ("cudnn_generated_fort_native_sdpa_sm80_flash_bprop_mma_f16_knob_3_64x64x64_4x1x1_kernel0_0", "cudnn"),
    # memory-efficient (xformers / CUTLASS FMHA)
    ("fmha_cutlassF_bf16_aligned_64x128_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::bfloat16_t, "
     "cutlass::arch::Sm80, true, 64, 128, 128, true, true>::Params)", "cutlass-fmha"),
    ("fmha_cutlassB_bf16_aligned_64x64_k128_sm80(PyTorchMemEffAttention::AttentionBackwardKernel<...>::Params)",
     "cutlass-fmha"),
    # Triton (Inductor templates, FlexAttention)
    ("triton_tem_fused_flex_attention_0", "triton"),
    ("triton_tem_fused_flex_attention_backward_1", "triton"),
    ("triton_per_fused__softmax_0", "triton"),
    ("triton_poi_fused_mul_0", "triton"),
    # GEMMs of unfused attention
    ("nvjet_sm90_tst_64x8_64x16_2x4_h_bz_TNT", "unfused-gemm"),
    ("nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_NNN", "unfused-gemm"),
    ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x16_stage4_warpsize2x2x1_ffma_aligna4_alignc4_execute"
     "_kernel_trt", "unfused-gemm"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel"
     "__5x_cublas", "unfused-gemm"),
    ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn", "unfused-gemm"),
    ("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8>(Params)",
     "unfused-gemm"),
    ("volta_sgemm_128x64_tn", "unfused-gemm"),
    ("aten::bmm", "unfused-gemm"),
    ("aten::matmul", "unfused-gemm"),
    ("aten::mm", "unfused-gemm"),
    ("aten::baddbmm", "unfused-gemm"),
    # CPU operators
    ("aten::_scaled_dot_product_flash_attention_for_cpu", "pytorch-flash-cpu"),
    ("aten::_scaled_dot_product_flash_attention_for_cpu_backward", "pytorch-flash-cpu"),
    ("CompiledFxGraph fxnbfjk4", "inductor"),
    ("## Call CompiledFxGraph fjjat3qxd7zfdmniyv3uhdxbjfu6yyugtbn3b5mrmxgpmimcejd6 ##", "inductor"),
    # Dynamo's range around any frame it compiled, the eager backend's too (flex_attention uncompiled): not Inductor
    ("Torch-Compiled Region: 0/0", "other"),
    ("TorchDynamo Cache Lookup", "other"),
    # not a family
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>", "other"),
    ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float>", "other"),
    ("aten::softmax", "other"),
    ("aten::empty", "other"),
    ("Memcpy DtoD (Device -> Device)", "other"),
]


@pytest.mark.parametrize("name,family", NAMES, ids=[n[:40] for n, _ in NAMES])
def test_family_of(name, family):
    assert family_of(name) == family


def test_attention_families_are_sdpas_four_and_the_optional_libraries_own():
    from attnbench.backends.registry import builtin

    sdpa = {"pytorch-flash-cpu", "cudnn", "pytorch-flash", "cutlass-fmha"}
    ladder = {"triton-fa1", "triton-fa2", "triton-decode", "triton-hopper", "triton-fp8"}  # issue 41's own kernels
    assert ATTENTION_FAMILIES == sdpa | {"flash-attn2", "flash-attn3", "flash-attn4", "flashinfer"} | ladder
    declared: dict[str, set] = {}
    for b in builtin():
        for f in b.kernel_patterns:
            declared.setdefault(f.name, set()).add(b.name)
    assert set(declared) - {"xla"} == ATTENTION_FAMILIES  # xla: jax-xla's fusions, not an attention kernel
    assert all(n.startswith("sdpa") for f in sdpa for n in declared[f])


def test_mismatch_rules():
    flash = frozenset({"pytorch-flash"})
    assert mismatch(flash, ["pytorch-flash"]) is None
    assert mismatch(flash, ["pytorch-flash", "unfused-gemm", "triton"]) is None  # extra non-attention kernels ok
    why = mismatch(flash, ["unfused-gemm"])
    assert why and "declared ['pytorch-flash']" in why and "unfused-gemm" in why
    why = mismatch(flash, [])
    assert why and "no recognised kernel" in why
    why = mismatch(flash, ["pytorch-flash", "cutlass-fmha"])  # another attention kernel ran as well
    assert why and "undeclared attention kernel" in why and "cutlass-fmha" in why
    assert mismatch(frozenset(), ["cudnn"]) is None  # nothing declared: nothing to check
    gemm = frozenset({"unfused-gemm"})
    assert mismatch(gemm, ["unfused-gemm"]) is None
    assert "undeclared" in mismatch(gemm, ["unfused-gemm", "pytorch-flash-cpu"])
    # side families (layout conversions) may take any share, but never stand in for the declared one
    p = Probe(families=["cudnn", "xla"], shares={"cudnn": 0.4, "xla": 0.6}, status="probed")
    cudnn, xla = frozenset({"cudnn"}), frozenset({"xla"})
    assert "xla 60%" in mismatch(cudnn, p.families, ATTENTION_FAMILIES, p)
    assert mismatch(cudnn, p.families, ATTENTION_FAMILIES, p, side=xla) is None
    assert undeclared_share(cudnn, p) == 0.6 and undeclared_share(cudnn, p, xla) == 0.0
    assert "observed ['xla']" in mismatch(cudnn, ["xla"], ATTENTION_FAMILIES, side=xla)
    many = frozenset({"triton", "unfused-gemm", "pytorch-flash"})
    assert mismatch(many, ["triton"]) is None
    assert mismatch(many, ["triton", "cudnn"]) is not None


def test_backend_declarations_cover_cpu_where_they_run():
    from attnbench.backends.registry import builtin

    for b in builtin():
        if "cpu" in b.devices:
            # an explicit empty set is a decision (jax-xla: the torch profiler sees nothing of XLA on
            # CPU), documented in the backend; leaving the device out is an omission
            assert b.expected_kernels("cpu") or b.kernel_families.get("cpu") == frozenset(), b.name
        assert b.expected_kernels("cuda"), b.name
        assert b.expected_kernels("tpu") == frozenset()


def _call(backend_name: str, w):
    from attnbench.backends.registry import select
    from attnbench.measure.inputs import make_inputs
    from attnbench.measure.step import make_step

    b = select([backend_name])[0]
    from attnbench.backends.base import Prepared

    inputs = make_inputs(w, "cpu", 0)
    prepared = Prepared.of(b.prepare(w, inputs))
    return b, make_step(w, prepared, inputs), prepared.context or contextlib.nullcontext()


def _w(**kw):
    from attnbench.workloads import Workload

    base = dict(mode="prefill", batch=1, q_len=64, kv_len=64, q_heads=2, kv_heads=2, head_dim=32, head_dim_v=32,
                dtype="fp32")
    return Workload(**{**base, **kw})


@pytest.mark.parametrize("kw", [dict(), dict(causal=True), dict(mode="train_fwd_bwd")])
def test_probe_of_real_sdpa_flash_on_cpu(kw):
    b, step, ctx = _call("sdpa-flash", _w(**kw))
    with ctx:
        p = probe(step, "cpu")
    assert p.status == "probed" and p.error is None
    assert "pytorch-flash-cpu" in p.families
    assert any("_scaled_dot_product_flash_attention_for_cpu" in k for k in p.kernels)
    assert len(p.kernels) <= 20
    assert mismatch(b.expected_kernels("cpu"), p.families) is None


def test_probe_of_math_sdpa_sees_gemms_and_no_flash():
    b, step, ctx = _call("sdpa-math", _w())
    with ctx:
        p = probe(step, "cpu")
    assert "unfused-gemm" in p.families and "pytorch-flash-cpu" not in p.families
    assert mismatch(b.expected_kernels("cpu"), p.families) is None
    # declared flash, ran the math kernel: a mismatch
    assert mismatch(frozenset({"pytorch-flash-cpu"}), p.families) is not None


def test_probe_of_plain_python_step_and_failing_step():
    a = torch.randn(8, 8)
    p = probe(lambda: a @ a, "cpu")
    assert p.status == "probed" and "unfused-gemm" in p.families

    def boom():
        raise RuntimeError("kernel exploded")

    p = probe(boom, "cpu")
    assert p.status == "unprobed" and "kernel exploded" in p.error and p.families == []


# ---- families declared by a backend (a plugin's own kernels) -------------------------------------

FA_X = KernelFamily("fa-x", r"^fax_attention_kernel|flash_attn_x::", attention=True)


def test_a_plugin_declared_family_is_recognised_and_wins_over_generic_names():
    c = Classifier([FA_X])
    # "gemm" in the name would make it an unfused GEMM; the declared attention family matches first
    assert c.family_of("fax_attention_kernel_gemm_sm90") == "fa-x"
    assert c.family_of("void flash_attn_x::fwd<128>") == "fa-x"
    assert c.family_of("fax_attention_kernel") == "fa-x" and "fa-x" in c.attention
    assert default_classifier().family_of("fax_attention_kernel_gemm_sm90") == "unfused-gemm"  # undeclared


def test_two_declarations_of_one_family_match_either_pattern():
    c = Classifier([KernelFamily("lib", r"^liba_"), KernelFamily("lib", r"^libb_")])
    assert c.family_of("liba_x") == c.family_of("libb_y") == "lib"


def test_undeclared_attention_kernel_of_a_plugin_family_is_a_mismatch():
    from attnbench.measure.dispatch import mismatch as rule

    c = Classifier([FA_X] + list(CLASSIFIER_DECLARED()))
    assert rule(frozenset({"unfused-gemm"}), ["unfused-gemm", "fa-x"], c.attention) is not None
    assert rule(frozenset({"fa-x"}), ["fa-x", "triton"], c.attention) is None


def CLASSIFIER_DECLARED():
    from attnbench.backends.registry import builtin

    return [f for b in builtin() for f in b.kernel_patterns]


def test_summary_keeps_the_main_family_and_the_main_attention_family():
    from collections import Counter

    c = Classifier([FA_X] + CLASSIFIER_DECLARED())
    p = summarize(Counter({"fax_attention_kernel": 50, "nvjet_gemm": 30, "nvjet_gemm2": 30,
                           "cudnn_generated_fort_native_sdpa": 10, "elementwise": 5}), c)
    assert p.main_family == "unfused-gemm"  # 60 units of device time across two GEMM kernels
    assert p.attention_family == "fa-x" and p.families == ["cudnn", "fa-x", "unfused-gemm"]
    assert p.kernels[0] == "fax_attention_kernel"
    p = summarize(Counter({"aten::mm": 3}), c)
    assert p.main_family == "unfused-gemm" and p.attention_family is None


PLUGIN = """
from attnbench.backends.base import Backend, Prepared
from attnbench.backends.kernels import KernelFamily
from attnbench.backends.layout import from_bhnd, to_bhnd


class SoftmaxLib(Backend):
    # softmax through torch.softmax: on CPU its operator is aten::_softmax, which no built-in
    # family names; the plugin declares it as its own attention family
    def prepare(self, w, inputs):
        import torch

        q, k, v = (to_bhnd(t, w.layout) for t in (inputs.q, inputs.k, inputs.v))
        g = w.q_heads // w.kv_heads

        def step():
            kk, vv = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
            p = torch.softmax((q @ kk.transpose(-1, -2)) * inputs.scale, -1)
            return from_bhnd(p @ vv, w.layout)

        return Prepared(step=step)


BACKENDS = [SoftmaxLib(name="softmax-lib", family="plugin", modes=("prefill",), devices=("cpu",),
                       kernel_families={"cpu": frozenset({"softmax-lib", "unfused-gemm"})},
                       kernel_patterns=(KernelFamily("softmax-lib", r"^aten::_softmax$", attention=True),))]
"""


@pytest.mark.slow
def test_a_plugin_declares_its_kernel_names_end_to_end(tmp_path):
    """Through the CLI and a spawned worker: the probe recognises the plugin's own kernel family, the
    row is OK and stores the main families; the same backend declaring another family is a
    DISPATCH_MISMATCH."""
    from attnbench.cli.main import main
    from conftest import rows_of

    plugin = tmp_path / "softmaxlib.py"
    plugin.write_text(PLUGIN)
    liar = tmp_path / "liar.py"
    liar.write_text(PLUGIN.replace('frozenset({"softmax-lib", "unfused-gemm"})', 'frozenset({"pytorch-flash-cpu"})')
                    .replace('name="softmax-lib"', 'name="softmax-liar"'))
    db = tmp_path / "p.sqlite"
    assert main(["run", "--repeats", "1", "--grid", "smoke", "--where", "mode=prefill", "--where", "causal=false",
                 "--plugin", str(plugin), "--plugin", str(liar), "--backends", "softmax-lib,softmax-liar",
                 "--db", str(db), "--max-time", "0.05", "--device", "cpu"]) == 0
    rows = {r["backend"]: r for r in rows_of(db)}
    ok = rows["softmax-lib"]
    assert ok["status"] == "OK", ok["reason"]
    assert "softmax-lib" in ok["dispatch_families"] and ok["dispatch_attention_family"] == "softmax-lib"
    assert ok["dispatch_main_family"] in ("softmax-lib", "unfused-gemm")
    bad = rows["softmax-liar"]
    assert bad["status"] == "DISPATCH_MISMATCH" and "pytorch-flash-cpu" in bad["reason"]


class _FakeProfile:
    """Stands in for torch.profiler.profile: its kineto results hold the events it was built with."""

    def __init__(self, events):
        from types import SimpleNamespace

        self.profiler = SimpleNamespace(kineto_results=SimpleNamespace(events=lambda: list(events)))

    def __call__(self, activities):
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _Ev:
    """A kineto event as the profiler's results list it."""

    def __init__(self, name, kind, us, start_us=0.0, thread=1, device=0, corr=0, link=0):
        self._n, self._k, self._ns, self._t0, self._tid = name, kind, int(us * 1000), int(start_us * 1000), thread
        self._dev, self._corr, self._link = device, corr, link

    def name(self): return self._n
    def activity_type(self): return self._k
    def is_user_annotation(self): return self._k in ("user_annotation", "gpu_user_annotation")
    def duration_ns(self): return self._ns
    def start_ns(self): return self._t0
    def start_thread_id(self): return self._tid
    def device_index(self): return self._dev
    def correlation_id(self): return self._corr
    def linked_correlation_id(self): return self._link  # device work: the id of the host event that launched it


class _OldEv:
    """The same event as torch 2.11 lists it: no activity_type(), duration_ns() or start order info
    beyond start/end."""

    def __init__(self, ev, gpu_ranges_flagged=True):
        self._ev, self._flag_gpu = ev, gpu_ranges_flagged

    def name(self): return self._ev.name()

    def is_user_annotation(self):
        return self._ev.activity_type() == "user_annotation" or (
            self._flag_gpu and self._ev.activity_type() == "gpu_user_annotation")
    def start_ns(self): return self._ev.start_ns()
    def end_ns(self): return self._ev.start_ns() + self._ev.duration_ns()
    def start_thread_id(self): return self._ev.start_thread_id()
    def device_index(self): return self._ev.device_index()
    def correlation_id(self): return self._ev.correlation_id()
    def linked_correlation_id(self): return self._ev.linked_correlation_id()

    def device_type(self):
        gpu = self._ev.activity_type() in ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")
        return torch.autograd.DeviceType.CUDA if gpu else torch.autograd.DeviceType.CPU


def test_cuda_probe_weighs_kernels_by_device_time_and_ignores_user_ranges(monkeypatch):
    """Device time counts kernels, copies and memsets, one listing each; a user's profiler range on
    the GPU (named like a kernel and spanning them) is not a kernel. Per call: the total over calls."""
    import torch.profiler

    cudnn = "cudnn_generated_fort_native_sdpa_sm90_flash_fprop"
    events = [_Ev("aten::_scaled_dot_product_cudnn_attention", "cpu_op", 20.0),
              _Ev("flash_fwd_kernel", "gpu_user_annotation", 5000.0), _Ev("flash_fwd_kernel", "user_annotation", 5000.0),
              _Ev(cudnn, "kernel", 1700.0)] + [_Ev("elementwise_fill", "kernel", 3.0)] * 4 + \
        [_Ev("Memcpy DtoD", "gpu_memcpy", 10.0)]
    monkeypatch.setattr(torch.profiler, "profile", _FakeProfile(events))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    p = probe(lambda: None, "cuda")
    assert p.kernel_us == pytest.approx(1722.0)
    assert p.kernels[0] == cudnn and p.main_family == "cudnn" and p.attention_family == "cudnn"
    assert "flash_fwd_kernel" not in p.kernels and "pytorch-flash" not in p.families
    assert p.shares["cudnn"] == pytest.approx(1700 / 1722, abs=1e-3)
    assert probe(lambda: None, "cuda", calls=2).kernel_us == pytest.approx(861.0)  # the events of two calls
    # a torch whose events have no activity_type() (2.11): device type and is_user_annotation() tell
    monkeypatch.setattr(torch.profiler, "profile", _FakeProfile([_OldEv(e) for e in events]))
    old = probe(lambda: None, "cuda")
    assert old.kernel_us == pytest.approx(1722.0) and "flash_fwd_kernel" not in old.kernels
    # ... and where the range's GPU span is not flagged, its name (a host range's) gives it away
    monkeypatch.setattr(torch.profiler, "profile", _FakeProfile([_OldEv(e, False) for e in events]))
    assert probe(lambda: None, "cuda").kernel_us == pytest.approx(1722.0)
    # CPU: no device time
    assert probe(lambda: None, "cpu").kernel_us is None


def test_cuda_probe_tells_each_calls_device_time_by_the_host_event_that_launched_it(monkeypatch):
    """A kernel, copy or memset belongs to the call whose host range holds the operator (or the range
    itself, as for a graph replay) it is linked to; the range's GPU span is not work. Anything that
    cannot be told to a call leaves no split rather than a wrong one."""
    import torch.profiler

    from attnbench.measure.dispatch import CALL_RANGE

    def trace(extra=()):
        return [_Ev(CALL_RANGE, "user_annotation", 100.0, 0.0, corr=20),
                _Ev(CALL_RANGE, "user_annotation", 100.0, 100.0, corr=21),
                _Ev(CALL_RANGE, "gpu_user_annotation", 90.0, 5.0, link=20),  # the first range's span on the GPU
                _Ev("aten::x", "cpu_op", 5.0, 10.0, corr=11), _Ev("aten::y", "cpu_op", 5.0, 110.0, corr=12),
                _Ev("cudaLaunchKernel", "cuda_runtime", 2.0, 11.0, corr=90, link=11),  # a runtime call: not work
                _Ev("k_first", "kernel", 30.0, 20.0, link=11), _Ev("Memcpy DtoD", "gpu_memcpy", 2.0, 50.0, link=11),
                _Ev("k_second", "kernel", 10.0, 120.0, link=12),
                _Ev("k_replayed", "kernel", 5.0, 130.0, link=21), *extra]

    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    for events in (trace(), [_OldEv(e) for e in trace()]):  # with activity_type(), and as torch 2.11 lists them
        monkeypatch.setattr(torch.profiler, "profile", _FakeProfile(events))
        p = probe(lambda: None, "cuda", calls=2)
        assert p.call_kernel_us == [32.0, 15.0] and p.kernel_us == pytest.approx(23.5)
        assert p.to_record()["kernel_calls_us"] == [32.0, 15.0]
    for stray in (_Ev("k_late", "kernel", 1.0, 300.0, link=13),  # linked to no host event
                  _Ev("k_outside", "kernel", 1.0, 300.0, link=14)):  # to one outside every call
        events = trace([stray, _Ev("aten::z", "cpu_op", 1.0, 250.0, corr=14)])
        monkeypatch.setattr(torch.profiler, "profile", _FakeProfile(events))
        p = probe(lambda: None, "cuda", calls=2)
        assert p.call_kernel_us == [] and p.to_record()["kernel_calls_us"] is None
        assert p.kernel_us == pytest.approx(24.0)  # the mean over calls is unchanged by the split


def test_cpu_probe_weighs_operators_by_self_time():
    """An operator's time less its callees' (a wrapper that calls the flash kernel is not flash
    time); user ranges are not operators; threads nest separately."""
    from attnbench.measure.dispatch import _cpu_self_time

    events = [_Ev("aten::scaled_dot_product_attention", "cpu_op", 100.0, 0.0),
              _Ev("aten::_scaled_dot_product_flash_attention_for_cpu", "cpu_op", 90.0, 5.0),
              _Ev("aten::empty", "cpu_op", 2.0, 6.0),
              _Ev("pytorch_flash", "user_annotation", 500.0, 0.0),
              _Ev("aten::mm", "cpu_op", 40.0, 3.0, thread=2)]
    w = _cpu_self_time(events)
    assert w["aten::scaled_dot_product_attention"] == 10_000
    assert w["aten::_scaled_dot_product_flash_attention_for_cpu"] == 88_000
    assert w["aten::empty"] == 2_000 and w["aten::mm"] == 40_000 and "pytorch_flash" not in w


def test_a_real_cpu_probe_does_not_count_a_user_range_named_like_a_kernel():
    from torch.profiler import record_function

    q = torch.randn(1, 2, 64, 16)

    def fn():
        with record_function("aten::_scaled_dot_product_flash_attention_for_cpu"):
            return torch.matmul(torch.softmax(q @ q.transpose(-1, -2), -1), q)

    p = probe(fn, "cpu", calls=2)
    assert p.families == ["unfused-gemm"] and p.attention_family is None


def test_undeclared_share_and_material_mismatch():
    from attnbench.measure.dispatch import MATERIAL_SHARE, Probe, mismatch, undeclared_share

    flash = frozenset({"pytorch-flash"})
    p = Probe(families=["pytorch-flash", "unfused-gemm"], shares={"pytorch-flash": 0.5, "unfused-gemm": 0.4,
                                                                  "other": 0.1}, status="probed")
    assert undeclared_share(flash, p) == 0.4
    assert "undeclared kernels took 40%" in mismatch(flash, p.families, frozenset(), p)
    small = Probe(families=["pytorch-flash", "unfused-gemm"], status="probed",
                  shares={"pytorch-flash": 0.95, "unfused-gemm": MATERIAL_SHARE / 2, "other": 0.0})
    assert mismatch(flash, small.families, frozenset(), small) is None
    assert undeclared_share(frozenset(), p) is None  # nothing declared: nothing to hold it to



def test_a_path_undeclared_in_one_call_counts_by_that_calls_share():
    """CPU: the largest share of any one call counts, not only that of the calls together (a call
    whose declared kernel stalled dilutes the sum); a backend with no undeclared time stays clean."""
    from attnbench.measure.dispatch import MATERIAL_SHARE, Probe, mismatch, undeclared_share

    flash = frozenset({"pytorch-flash-cpu"})
    p = Probe(families=["pytorch-flash-cpu", "unfused-gemm"], status="probed", calls=3,
              shares={"pytorch-flash-cpu": 0.9, "unfused-gemm": 0.06, "other": 0.04},
              call_shares=[{"pytorch-flash-cpu": 0.97, "unfused-gemm": 0.02, "other": 0.01},
                           {"pytorch-flash-cpu": 0.7, "unfused-gemm": 0.25, "other": 0.05},
                           {"pytorch-flash-cpu": 0.8, "unfused-gemm": 0.15, "other": 0.05}])
    assert undeclared_share(flash, p) == 0.25
    why = mismatch(flash, p.families, frozenset(), p)
    assert "undeclared kernels took 25% of the time of one of 3 calls (unfused-gemm 25%" in why
    # the same calls with the GEMMs declared as side work, or with none in any call: nothing to say
    assert mismatch(flash, p.families, frozenset(), p, frozenset({"unfused-gemm"})) is None
    clean = Probe(families=["pytorch-flash-cpu"], status="probed", calls=2, shares={"pytorch-flash-cpu": 1.0},
                  call_shares=[{"pytorch-flash-cpu": 1.0}, {"pytorch-flash-cpu": 0.9, "other": 0.1}])
    assert undeclared_share(flash, clean) == 0.0 and mismatch(flash, clean.families, frozenset(), clean) is None
    # the calls together still count where they say more (a share spread thinly over every call)
    spread = Probe(families=["pytorch-flash-cpu", "unfused-gemm"], status="probed", calls=2,
                   shares={"pytorch-flash-cpu": 0.8, "unfused-gemm": 0.2}, call_shares=[{"unfused-gemm": 0.0}] * 2)
    assert undeclared_share(flash, spread) == 0.2 and "20% of the time (" in mismatch(flash, spread.families, frozenset(), spread)
    assert MATERIAL_SHARE < 0.15


def test_cpu_self_time_per_call_splits_operators_by_the_range_they_start_in():
    from attnbench.measure.dispatch import CALL_RANGE, _cpu_self_time_per_call

    events = [_Ev(CALL_RANGE, "user_annotation", 100.0, 0.0), _Ev(CALL_RANGE, "user_annotation", 100.0, 100.0),
              _Ev("aten::mm", "cpu_op", 30.0, 10.0), _Ev("aten::bmm", "cpu_op", 20.0, 50.0, thread=2),
              _Ev("aten::_scaled_dot_product_flash_attention_for_cpu", "cpu_op", 60.0, 120.0),
              _Ev("aten::mm", "cpu_op", 5.0, 130.0)]
    first, second = _cpu_self_time_per_call(events)
    assert first == {"aten::mm": 30_000, "aten::bmm": 20_000}
    assert second == {"aten::_scaled_dot_product_flash_attention_for_cpu": 55_000, "aten::mm": 5_000}
    assert _cpu_self_time_per_call(events[1:]) == []  # one range: the calls together say it all


def test_a_real_cpu_probe_gives_each_calls_shares():
    """A GEMM in the second of three calls only: that call's shares show it, the others do not."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q = torch.randn(1, 2, 64, 16)
    a = torch.randn(256, 256)
    n = []

    def step():
        n.append(1)
        out = F.scaled_dot_product_attention(q, q, q)
        return (a @ a) if len(n) == 2 else out

    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        p = probe(step, "cpu", calls=3)
    assert len(p.call_shares) == 3 and p.calls == 3
    # how large a share it takes against the flash call is the loaded host's timing: only that it shows
    assert p.call_shares[1].get("unfused-gemm", 0) > 0
    assert p.call_shares[0].get("unfused-gemm", 0) == 0 == p.call_shares[2].get("unfused-gemm", 0)
    assert undeclared_share(frozenset({"pytorch-flash-cpu"}), p) == round(p.call_shares[1]["unfused-gemm"], 4)


# ---- work on another GPU than the attempt's ---------------------------------------------------------

def test_cuda_probe_gives_the_share_of_device_time_on_each_other_gpu(monkeypatch):
    """By the profiler's device index, against the index it gives the attempt's own GPU (home_index)."""
    import torch.profiler

    from attnbench.measure import dispatch

    events = [_Ev("cudnn_generated_fort_native_sdpa_sm90", "kernel", 900.0, device=1),
              _Ev("elementwise_fill", "kernel", 30.0, device=0), _Ev("Memcpy DtoD", "gpu_memcpy", 40.0, device=2),
              _Ev("Memcpy HtoD", "gpu_memcpy", 30.0, device=-1)]  # no device named: counted nowhere else
    monkeypatch.setattr(torch.profiler, "profile", _FakeProfile(events))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(dispatch, "home_index", lambda device: 0)
    p = probe(lambda: None, "cuda:0")
    assert p.elsewhere == {1: 0.9, 2: 0.04}
    why = dispatch.elsewhere(p, "cuda:0")
    assert "94% of the calls' device time ran on another GPU" in why and "device index 1: 90%" in why
    monkeypatch.setattr(dispatch, "home_index", lambda device: 1)  # the same events, seen from GPU 1
    p = probe(lambda: None, "cuda:1")
    assert p.elsewhere == {0: 0.03, 2: 0.04} and dispatch.elsewhere(p, "cuda:1") is None  # 7%: not more than 10%
    monkeypatch.setattr(dispatch, "home_index", lambda device: None)  # the home GPU's index unknown: no check
    p = probe(lambda: None, "cuda:0")
    assert p.elsewhere == {} and dispatch.elsewhere(p, "cuda:0") is None
    assert probe(lambda: None, "cpu").elsewhere == {}  # CPU: no device indices


def test_home_index_is_the_index_the_profiler_gives_one_kernel_on_the_device(monkeypatch):
    import torch.profiler

    from attnbench.measure import dispatch

    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    tried = []
    for events, want in (([_Ev("fill", "kernel", 1.0, device=3), _Ev("Memset", "gpu_memset", 1.0, device=3),
                           _Ev("fill", "gpu_user_annotation", 1.0, device=7)], 3),
                         ([_Ev("fill", "kernel", 1.0, device=3), _Ev("fill", "kernel", 1.0, device=4)], None),
                         ([], None)):
        monkeypatch.setattr(torch.profiler, "profile", _FakeProfile(events))
        dispatch.home_index.cache_clear()
        tried.append(dispatch.home_index("cpu"))
        assert tried[-1] == want

    def broken(activities):
        raise RuntimeError("CUPTI unavailable")

    monkeypatch.setattr(torch.profiler, "profile", broken)
    dispatch.home_index.cache_clear()
    assert dispatch.home_index("cpu") is None
    dispatch.home_index.cache_clear()


def _tiny_sdpa_math_attempt() -> dict:
    """One whole attempt of sdpa-math on a tiny CPU prefill, as a worker runs it (with dispatch.probe
    as the test has patched it)."""
    from attnbench.backends.registry import builtin
    from attnbench.runner import attempt
    from attnbench.workloads import Workload

    w = Workload(mode="prefill", batch=1, q_len=32, kv_len=32, q_heads=2, kv_heads=2, head_dim=16, head_dim_v=16,
                 dtype="fp32")
    spec = {"op": "attempt", "workload": w.to_dict(), "device": "cpu", "seed": 0,
            "timing": dict(warmup_s=0.0, warmup_max_s=0.1, min_samples=3, max_samples=5, max_time_s=0.05)}
    return attempt.run(spec, {b.name: b for b in builtin()}["sdpa-math"], attempt.WorkloadCache())


@pytest.mark.parametrize("which", ["first", "late"])
def test_an_attempt_whose_work_ran_on_another_gpu_is_a_dispatch_mismatch(monkeypatch, which):
    """Either probe (before timing, after it) seeing most of the device time on another GPU fails the row."""
    from attnbench.measure import dispatch

    real, calls = dispatch.probe, []

    def probe_elsewhere(*a, **kw):
        p = real(*a, **kw)
        calls.append(p)
        if (which == "first") == (len(calls) == 1):
            p.elsewhere = {1: 0.75}
        return p

    monkeypatch.setattr(dispatch, "probe", probe_elsewhere)
    res = _tiny_sdpa_math_attempt()
    assert res["status"] == "DISPATCH_MISMATCH"
    assert "75% of the calls' device time ran on another GPU than the attempt's cpu" in res["reason"]
    assert res["reason"].startswith("after timing: ") == (which == "late")
    assert bool(res.get("samples_us")) == (which == "late")  # timed before the late probe, not before the first


def test_an_attempt_stores_the_calls_of_both_probes_in_order(monkeypatch):
    """kernel_calls_us: the probe before timing's calls, then the late probe's; none where the first
    probe could not split its calls (a list of the late calls alone would read as the first ones)."""
    from attnbench.measure import dispatch

    real = dispatch.probe
    for first, late, want in (([50.0, 40.0, 41.0], [39.0, 40.5], [50.0, 40.0, 41.0, 39.0, 40.5]),
                              ([], [39.0, 40.5], None), ([50.0, 40.0, 41.0], [], [50.0, 40.0, 41.0])):
        lists = iter([first, late])

        def probe_split(*a, **kw):
            p = real(*a, **kw)
            p.call_kernel_us = next(lists)
            return p

        monkeypatch.setattr(dispatch, "probe", probe_split)
        res = _tiny_sdpa_math_attempt()
        assert res["status"] == "OK", res.get("reason")
        assert res.get("kernel_calls_us") == want
