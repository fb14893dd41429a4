"""Correctness check against float64 (measure/correctness.py), in-process on CPU."""
from __future__ import annotations

import pytest
import torch

from attnbench.backends.layout import from_bhnd, to_bhnd
from attnbench.backends.reference import attention_math
from attnbench.measure import correctness
from attnbench.measure.inputs import make_inputs
from attnbench.workloads import Workload


def W(**kw) -> Workload:
    base = dict(mode="prefill", batch=2, q_len=48, kv_len=80, q_heads=4, kv_heads=2, head_dim=32, head_dim_v=32,
                dtype="bf16", causal=True)
    return Workload(**{**base, **kw})


def setup(w: Workload, seed: int = 0):
    inputs = make_inputs(w, "cpu", seed)
    return inputs, correctness.Reference64(w, inputs, seed)


def forward(w: Workload, inputs):
    q, k, v = (to_bhnd(t, w.layout) for t in (inputs.q, inputs.k, inputs.v))
    return from_bhnd(attention_math(q, k, v, w.causal, w.causal_align, inputs.scale), w.layout)


def fwd_bwd(w: Workload, inputs):
    o = forward(w, inputs)
    return (o, *torch.autograd.grad(o, (inputs.q, inputs.k, inputs.v), inputs.do))


def sdpa(w: Workload, inputs):
    from attnbench.backends.layout import sdpa_mask_args

    q, k, v = (to_bhnd(t, w.layout) for t in (inputs.q, inputs.k, inputs.v))
    o = torch.nn.functional.scaled_dot_product_attention(
        q, k, v, scale=inputs.scale, enable_gqa=w.kv_heads != w.q_heads,
        **sdpa_mask_args(w.q_len, w.kv_len, w.causal, w.causal_align))
    return from_bhnd(o, w.layout)


CASES = [
    dict(),
    dict(causal=False),
    dict(causal_align="top_left"),
    dict(dtype="fp16"),
    dict(dtype="fp32"),
    dict(layout="BNHD"),
    dict(kv_heads=1),
    dict(kv_heads=4, q_len=80),
    dict(mode="decode", q_len=1, causal=False, batch=3),
    dict(mode="train_fwd", q_len=80),
]


@pytest.mark.parametrize("kw", CASES, ids=[",".join(f"{k}={v}" for k, v in c.items()) or "base" for c in CASES])
def test_correct_result_passes_with_ratio_about_one(kw):
    w = W(**kw)
    inputs, ref = setup(w)
    with torch.no_grad() if w.mode != "train_fwd" else torch.enable_grad():
        out = forward(w, inputs)
    v = correctness.check(w, out, inputs, ref)
    assert v.passed, v.reason
    assert v.reason is None
    assert 0.5 <= v.err_ratio <= 1.5, v.err_ratio
    assert v.cosine > 0.999
    assert v.max_abs_err is not None and v.ref_err is not None and v.rmse is not None
    assert set(v.detail) == {"o"}


@pytest.mark.parametrize("kw", [dict(), dict(causal=False), dict(dtype="fp32"), dict(layout="BNHD"),
                                dict(mode="decode", q_len=1, causal=False)])
def test_fused_sdpa_result_passes(kw):
    w = W(**kw)
    inputs, ref = setup(w)
    with torch.no_grad():
        out = sdpa(w, inputs)
    v = correctness.check(w, out, inputs, ref)
    assert v.passed, v.reason
    assert v.err_ratio <= correctness.DEFAULT_TOL


@pytest.mark.parametrize("kw", [dict(), dict(dtype="fp16"), dict(dtype="fp32"), dict(mode="decode", q_len=1,
                                                                                      causal=False)])
def test_scaled_result_fails(kw):
    w = W(**kw)
    inputs, ref = setup(w)
    with torch.no_grad():
        out = forward(w, inputs) * 1.05
    v = correctness.check(w, out, inputs, ref)
    assert not v.passed
    tol = correctness.TOLERANCES[w.dtype]
    assert v.err_ratio > tol
    assert v.reason.startswith("o: error") and f"tolerance {tol:g}x" in v.reason


def test_tolerance_is_respected():
    w = W(dtype="fp32")
    inputs, ref = setup(w)
    with torch.no_grad():  # an unbiased error (noise), so that only the elementwise ratio decides
        out = forward(w, inputs)
        out = out + 1e-5 * torch.randn(out.shape, generator=torch.Generator().manual_seed(0))
    v = correctness.check(w, out, inputs, ref)
    assert correctness.check(w, out, inputs, ref, tol=v.err_ratio * 1.01).passed
    assert not correctness.check(w, out, inputs, ref, tol=v.err_ratio * 0.99).passed


def test_nan_in_a_slice_outside_the_sample_is_still_caught():
    # only max(B, Hkv) (batch, kv-head) slices are compared in full; the NaN check covers the whole tensor
    w = W(batch=4, kv_heads=2, q_heads=4)  # 8 slices > max(4, 2)
    inputs, ref = setup(w)
    assert len(ref.slices) == 4
    with torch.no_grad():
        out = forward(w, inputs)
    unchecked = [(b, g) for b in range(4) for g in range(2) if (b, g) not in ref.slices]
    b, g = unchecked[0]
    out[b, g * 2, 5, 3] = float("nan")
    v = correctness.check(w, out, inputs, ref)
    assert not v.passed and "NaN/Inf" in v.reason and v.reason.startswith("o: 1 of")


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_output_fails_with_the_nan_reason(bad):
    w = W()
    inputs, ref = setup(w)
    with torch.no_grad():
        out = forward(w, inputs)
    out[0, 0, 0, 0] = bad
    v = correctness.check(w, out, inputs, ref)
    assert not v.passed
    assert v.reason == f"o: 1 of {out.numel()} elements are NaN/Inf (unwritten or overflow)"


def test_half_unwritten_poisoned_buffer_fails():
    w = W(dtype="fp16")
    inputs, ref = setup(w)
    assert torch.isnan(inputs.out).all()  # the output buffer every backend is handed is poisoned
    with torch.no_grad():
        o = forward(w, inputs)
        inputs.out[:, :, : w.q_len // 2].copy_(o[:, :, : w.q_len // 2])
    v = correctness.check(w, inputs.out, inputs, ref)
    assert not v.passed and "NaN/Inf" in v.reason


def test_wrong_shape_or_count_fails():
    w = W()
    inputs, ref = setup(w)
    with torch.no_grad():
        out = forward(w, inputs)
    v = correctness.check(w, out.transpose(1, 2).contiguous(), inputs, ref)
    assert not v.passed and "shape" in v.reason
    v = correctness.check(w, (out, out), inputs, ref)
    assert not v.passed and "expected 1 tensor(s)" in v.reason
    v = correctness.check(w, out.float().numpy(), inputs, ref)
    assert not v.passed and "ndarray" in v.reason


def test_fwd_bwd_correct_gradients_pass():
    w = W(mode="train_fwd_bwd")
    inputs, ref = setup(w)
    res = fwd_bwd(w, inputs)
    v = correctness.check(w, res, inputs, ref)
    assert v.passed, v.reason
    assert set(v.detail) == {"o", "dq", "dk", "dv"}
    assert all(0.5 <= d["ratio"] <= 1.5 for d in v.detail.values()), v.detail


@pytest.mark.parametrize("which,name", [(1, "dq"), (2, "dk"), (3, "dv")])
def test_fwd_bwd_wrong_gradient_fails(which, name):
    w = W(mode="train_fwd_bwd", dtype="fp32")
    inputs, ref = setup(w)
    res = list(fwd_bwd(w, inputs))
    res[which] = res[which] * 1.05
    v = correctness.check(w, res, inputs, ref)
    assert not v.passed
    assert v.reason.startswith(f"{name}: error"), v.reason
    assert v.detail[name]["ratio"] > 3
    assert v.detail["o"]["ratio"] <= 1.5


def test_fwd_bwd_wrong_dk_in_gqa_fails():
    w = W(mode="train_fwd_bwd", q_heads=8, kv_heads=2)
    inputs, ref = setup(w)
    o, dq, dk, dv = fwd_bwd(w, inputs)
    dk = dk.clone()
    dk[:, :, :, 0] = -dk[:, :, :, 0]  # one column of dK flipped
    v = correctness.check(w, (o, dq, dk, dv), inputs, ref)
    assert not v.passed and v.reason.startswith("dk:"), v.reason


def test_fwd_bwd_missing_gradients_fail():
    w = W(mode="train_fwd_bwd")
    inputs, ref = setup(w)
    o = forward(w, inputs)
    v = correctness.check(w, o, inputs, ref)
    assert not v.passed and "expected 4 tensor(s)" in v.reason


@pytest.mark.parametrize("batch,kv_heads", [(8, 2), (2, 8), (3, 5), (1, 1), (100, 3)])
def test_pick_slices_cover_every_batch_index_and_kv_head(batch, kv_heads):
    w = W(batch=batch, kv_heads=kv_heads, q_heads=kv_heads)
    a, b = correctness.pick_slices(w, 1), correctness.pick_slices(w, 1)
    assert a == b and len(set(a)) == len(a)
    assert len(a) == min(max(batch, kv_heads), correctness.MAX_SLICES) or len(a) == batch * kv_heads
    if max(batch, kv_heads) <= correctness.MAX_SLICES:
        assert {bb for bb, _ in a} == set(range(batch)) and {g for _, g in a} == set(range(kv_heads))
    assert correctness.pick_slices(W(batch=1, kv_heads=2), 0) == [(0, 0), (0, 1)]


@pytest.mark.parametrize("kv_heads", [2, 4])
def test_a_wrong_gradient_in_any_kv_head_is_caught(kv_heads):
    # dK wrong in one KV head only: the full slices must reach it, whichever head it is
    w = W(mode="train_fwd_bwd", batch=3, kv_heads=kv_heads, q_heads=2 * kv_heads)
    inputs, ref = setup(w)
    for bad in range(kv_heads):
        o, dq, dk, dv = fwd_bwd(w, inputs)
        dk = dk.clone()
        dk[:, bad] *= 1.5
        v = correctness.check(w, (o, dq, dk, dv), inputs, ref)
        assert not v.passed and v.reason.startswith("dk"), (bad, v.reason)


@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp32"])
@pytest.mark.parametrize("kind", ["scale", "offset"])
def test_a_small_systematic_error_below_the_elementwise_tolerance_is_caught(dtype, kind):
    # 1.5% scale (or an offset of 2% of the output's RMS): elementwise within tolerance in bf16, but
    # the fitted slope (offset) is off by far more than its statistical error
    w = W(dtype=dtype, q_len=256, kv_len=256, batch=2)
    inputs, ref = setup(w)
    with torch.no_grad():
        good = forward(w, inputs)
        bad = good * 1.015 if kind == "scale" else good + 0.02 * good.float().pow(2).mean().sqrt().to(good.dtype)
    assert correctness.check(w, good, inputs, ref).passed
    v = correctness.check(w, bad, inputs, ref)
    assert not v.passed
    if dtype == "bf16":  # the elementwise ratio alone would have let it through
        assert v.err_ratio <= correctness.TOLERANCES["bf16"] and "systematic error" in v.reason, v


def test_systematic_fit_tells_noise_from_bias():
    g = torch.Generator().manual_seed(0)
    r = torch.randn(10000, generator=g, dtype=torch.float64)
    noisy = r + 1e-3 * torch.randn(10000, generator=g, dtype=torch.float64)
    fit = correctness.systematic(noisy, r)
    assert abs(fit["slope"] - 1) < 1e-4 and fit["excess"] == 0.0
    fit = correctness.systematic(noisy * 1.01, r)
    assert fit["slope"] == pytest.approx(1.01, abs=1e-4) and fit["excess"] > 0.009


def test_inputs_are_reproducible_and_never_zero():
    w = W()
    a, b = make_inputs(w, "cpu", 3), make_inputs(w, "cpu", 3)
    assert torch.equal(a.q, b.q) and torch.equal(a.k, b.k) and torch.equal(a.v, b.v)
    c = make_inputs(w, "cpu", 4)
    assert not torch.equal(a.q, c.q)
    assert a.q.abs().sum() > 0 and a.q.dtype == torch.bfloat16
    assert a.scale == pytest.approx(32 ** -0.5)
    bn = make_inputs(W(layout="BNHD"), "cpu", 3)
    assert bn.q.shape == (2, 48, 4, 32) and bn.k.shape == (2, 80, 2, 32)
    assert make_inputs(W(mode="train_fwd_bwd"), "cpu", 0).do is not None and a.do is None
    assert make_inputs(W(mode="train_fwd"), "cpu", 0).q.requires_grad and not a.q.requires_grad


@pytest.mark.parametrize("dist", ["normal", "outliers", "large-logits"])
def test_input_distributions_are_what_they_say_and_restorable(dist, monkeypatch):
    from attnbench.measure import inputs as inputs_mod
    from attnbench.measure.inputs import fingerprint, refill

    monkeypatch.setattr(inputs_mod, "REFILL_CHUNK", 1000)  # chunks inside every tensor
    w = W(batch=4, q_len=512, kv_len=512, q_heads=4, kv_heads=4, head_dim=64, dtype="fp32")
    x = make_inputs(w, "cpu", 5, dist)
    q, v = x.q.detach(), x.v.detach()
    big = (q.abs() > 6).float().mean().item()
    if dist == "outliers":  # 0.1% of N(0, 100) outliers, about 55% of them beyond 6
        assert 2e-4 < big < 1e-3 and q.abs().max() > 20
    elif dist == "large-logits":
        assert q.std().item() == pytest.approx(30 ** 0.5, rel=0.05) and v.std().item() == pytest.approx(1, rel=0.05)
    else:
        assert big < 1e-5 and q.std().item() == pytest.approx(1, rel=0.05)
    before = fingerprint(x)
    refill(x, w, 6, dist)
    assert fingerprint(x) != before
    refill(x, w, 5, dist)
    assert fingerprint(x) == before


def test_fingerprint_is_its_definition_across_chunks_and_sees_swaps_and_roundings(monkeypatch):
    """The fast fingerprint (column sums of a (rows, 997) view, one transfer) equals the plain
    definition, sum, sum of squares and the sum weighted by (i mod 997) + 1, across chunk boundaries;
    a swap of two values and a one-ulp rounding in place both change it."""
    from attnbench.measure import inputs as inputs_mod
    from attnbench.measure.inputs import fingerprint

    monkeypatch.setattr(inputs_mod, "FINGERPRINT_CHUNK", 997 * 3)  # several chunks and a tail
    w = W(batch=2, q_len=300, kv_len=300, q_heads=2, kv_heads=2, head_dim=16, dtype="bf16")
    x = make_inputs(w, "cpu", 1)
    flat = x.q.detach().reshape(-1).double()
    weights = torch.arange(flat.numel(), dtype=torch.float64).remainder(997).add(1)
    want = (flat.sum().item(), (flat * flat).sum().item(), (flat * weights).sum().item())
    assert fingerprint(x)["q"] == pytest.approx(want, rel=1e-12)
    before = fingerprint(x)
    q = x.q.detach().view(-1)
    with torch.no_grad():
        a, b = q[10].clone(), q[5000].clone()
        assert a != b
        q[10], q[5000] = b, a  # same sum and sum of squares: only the weighted sum sees it
        assert fingerprint(x)["q"] != before["q"]
        q[10], q[5000] = a, b
        assert fingerprint(x) == before
        bits = q.view(torch.int16)
        bits[7] += 1  # one ulp of bf16, in place
        assert fingerprint(x)["q"] != before["q"]


def test_fingerprint_leaves_a_float64_input_as_it_was():
    """The fingerprint squares its float64 copy in place: a float64 tensor must be copied, not squared."""
    from types import SimpleNamespace

    from attnbench.measure.inputs import INPUT_NAMES, fingerprint

    q = torch.randn(5000, dtype=torch.float64)
    before = q.clone()
    x = SimpleNamespace(**{n: None for n in (*INPUT_NAMES, "page_table")}, scale=0.125)
    x.q = q
    assert fingerprint(x) == fingerprint(x)
    assert torch.equal(q, before)
