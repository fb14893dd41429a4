"""Dispatch probe (measure/dispatch.py): kernel-name families, the mismatch rule, a real CPU probe."""
from __future__ import annotations

import contextlib

import pytest
import torch

from attnbench.measure import dispatch
from attnbench.measure.dispatch import ATTENTION_FAMILIES, family_of, mismatch, probe

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
    ("Torch-Compiled Region: 0/0", "inductor"),
    ("CompiledFxGraph fxnbfjk4", "inductor"),
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


def test_attention_families_are_the_four_fused_ones():
    assert ATTENTION_FAMILIES == {"pytorch-flash-cpu", "cudnn", "pytorch-flash", "cutlass-fmha"}
    assert {f for f, _ in dispatch.FAMILY_PATTERNS} >= ATTENTION_FAMILIES


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
    many = frozenset({"triton", "unfused-gemm", "pytorch-flash"})
    assert mismatch(many, ["triton"]) is None
    assert mismatch(many, ["triton", "cudnn"]) is not None


def test_backend_declarations_cover_cpu_where_they_run():
    from attnbench.backends.registry import builtin

    for b in builtin():
        if "cpu" in b.devices:
            assert b.expected_kernels("cpu"), b.name
        assert b.expected_kernels("cuda"), b.name
        assert b.expected_kernels("tpu") == frozenset()


def _call(backend_name: str, w):
    from attnbench.backends.registry import select
    from attnbench.measure.inputs import make_inputs
    from attnbench.measure.step import make_step

    b = select([backend_name])[0]
    inputs = make_inputs(w, "cpu", 0)
    fn = b.prepare(w, inputs)
    return b, make_step(w, fn, inputs), getattr(fn, "context", None) or contextlib.nullcontext()


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
