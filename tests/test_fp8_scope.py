"""A declared fp8 scheme judges only the rows it quantises: cudnn-fe's bf16 rows (no quantisation) keep the
16-bit tolerance and their gradient checks; a quantising backend's gradients keep their bound under the contract."""
from __future__ import annotations

import pytest
import torch

from attnbench.backends.registry import builtin
from attnbench.measure import correctness, fp8_contract
from attnbench.measure.inputs import make_inputs
from attnbench.workloads import Workload


def _w(**kw):
    base = dict(mode="prefill", batch=1, q_len=32, kv_len=32, q_heads=2, kv_heads=2, head_dim=16, head_dim_v=16,
                dtype="bf16")
    return Workload(**{**base, **kw})


def test_cudnn_fe_bf16_rows_are_not_judged_by_its_fp8_scheme():
    fe = {b.name: b for b in builtin()}["cudnn-fe"]
    assert fe.fp8_scheme is not None  # it declares one, for its fp8 rows
    assert fp8_contract.scheme_of(fe, _w(dtype="bf16")) is None
    assert fp8_contract.scheme_of(fe, _w(dtype="fp8_e4m3")) is not None


def test_wrong_gradients_fail_under_a_scheme_that_judges_the_output():
    w = _w(mode="train_fwd_bwd")
    inp = make_inputs(w, "cpu", 0)
    ref = correctness.Reference64(w, inp, 0)
    q, k, v = (getattr(inp, n).detach().double().requires_grad_() for n in "qkv")
    o = torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=inp.scale)
    o.backward(inp.do.double())
    grads = [t.grad.to(torch.bfloat16) for t in (q, k, v)]
    out = o.detach().to(torch.bfloat16)
    scheme = fp8_contract.parse_scheme("e4m3,tensor,p-e4m3x448,o-e4m3")
    assert correctness.check(w, (out, *grads), inp, ref, scheme=scheme).passed
    bad = [grads[0], grads[1] * 1.3, grads[2]]
    v_ = correctness.check(w, (out, *bad), inp, ref, scheme=scheme)
    assert not v_.passed and v_.reason.startswith("dk:"), v_.reason


def test_a_float8_cast_beside_a_16_bit_attention_kernel_is_no_proof_of_fp8():
    from attnbench.measure import dispatch

    f16 = "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_kernel0_0"
    cast = "void at::native::float8_copy_kernel_cuda<c10::Float8_e4m3fn>(at::TensorIteratorBase&)"
    probe = dispatch.Probe(kernels=[f16, cast], status="probed")
    why = dispatch.not_fp8("fp8_e4m3", probe, "cuda:0")
    assert why and "ran in 16-bit" in why
    real = "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f8_knob_32_64x256x128_4x1x1_cga1x1x1_kernel0_0"
    assert dispatch.not_fp8("fp8_e4m3", dispatch.Probe(kernels=[real, "Memset (Device)"], status="probed"),
                            "cuda:0") is None



def test_fresh_inputs_from_a_file_are_refused_in_one_line(cli, tmp_path):
    """A file's values are the same on every refill: "fresh" inputs from it would not be new."""
    res = cli("run", "--grid", "smoke", "--backends", "reference", "--inputs", f"file:{tmp_path / 'acts.npz'}",
              "--fresh-inputs", "--db", tmp_path / "s.sqlite")
    lines = res.err.strip().splitlines()
    assert res.rc == 2 and len(lines) == 1 and "fresh inputs" in lines[0], res.err
    assert not list(tmp_path.iterdir())
