"""Correctness before timing: outputs and gradients against a float64 reference.

The verdict is a ratio: the backend's error over the error of the unfused reference computed in
the workload's own dtype on the same inputs. A kernel as accurate as plain PyTorch in that dtype
scores about 1; a wrong or partly unwritten one scores orders of magnitude more (or NaN)."""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from ..backends.layout import to_bhnd
from ..backends.reference import attention_math
from ..workloads import Workload

EPS = {"fp32": 1.2e-7, "bf16": 7.8e-3, "fp16": 9.8e-4}
MAX_SLICES = 4  # (batch, kv-head group) slices checked against float64; the whole output is checked for NaN
DEFAULT_TOL = 3.0
NAMES = ("o", "dq", "dk", "dv")


@dataclass
class Verdict:
    passed: bool
    reason: str | None
    max_abs_err: float | None = None
    rmse: float | None = None
    cosine: float | None = None
    err_ratio: float | None = None
    ref_err: float | None = None
    detail: dict = field(default_factory=dict)


def pick_slices(w: Workload, seed: int) -> list[tuple[int, int]]:
    pairs = [(b, g) for b in range(w.batch) for g in range(w.kv_heads)]
    if len(pairs) <= MAX_SLICES:
        return pairs
    return sorted(random.Random(seed).sample(pairs, MAX_SLICES))


def _slice(w: Workload, tensors, sides: str, b: int, g: int):
    """Slices of one (batch, kv-group), BHND: 'q' tensors give (1, G, Nq, .), 'k' tensors (1, 1, Nkv, .)."""
    gq = w.gqa_group
    pick = {"q": slice(g * gq, (g + 1) * gq), "k": slice(g, g + 1)}
    return [to_bhnd(t, w.layout)[b:b + 1, pick[side]] for t, side in zip(tensors, sides)]


def _run_math(w: Workload, q, k, v, do, scale: float, dtype):
    """Reference math in `dtype` on one slice; returns [O, dQ, dK, dV] (grads for fwd+bwd only)."""
    import torch

    leaves = [t.detach().to(dtype).requires_grad_(w.needs_grad) for t in (q, k, v)]
    with torch.enable_grad():
        o = attention_math(*leaves, w.causal, w.causal_align, scale)
        if not w.needs_grad:
            return [o.detach()]
        grads = torch.autograd.grad(o, leaves, do.to(dtype))
    return [o.detach(), *grads]


class Reference64:
    """float64 and same-dtype reference results for the sampled slices of one workload."""

    def __init__(self, w: Workload, inputs, seed: int):
        import torch

        self.w = w
        self.slices = pick_slices(w, seed)
        low = inputs.q.dtype
        self.ref, self.low_err = [], []
        for b, g in self.slices:
            q, k, v, *do = _slice(w, [inputs.q, inputs.k, inputs.v] + ([inputs.do] if w.needs_grad else []),
                                  "qkkq", b, g)
            do = do[0] if do else None
            r64 = _run_math(w, q, k, v, do, inputs.scale, torch.float64)
            rlo = _run_math(w, q, k, v, do, inputs.scale, low)
            self.ref.append(r64)
            self.low_err.append([_errors(lo, hi) for lo, hi in zip(rlo, r64)])


def _errors(x, ref) -> dict:
    import torch

    d = x.double() - ref
    ref_rms = ref.pow(2).mean().sqrt().item()
    cos = torch.nn.functional.cosine_similarity(x.double().flatten(), ref.flatten(), dim=0).item()
    return {"max_abs": d.abs().max().item(), "rmse": d.pow(2).mean().sqrt().item(), "cos": cos,
            "ref_max": ref.abs().max().item(), "ref_rms": ref_rms}


def check(w: Workload, result, inputs, ref: Reference64, tol: float = DEFAULT_TOL) -> Verdict:
    """result: O, or (O, dQ, dK, dV), in the workload's layout."""
    import torch

    outs = list(result) if isinstance(result, (tuple, list)) else [result]
    want = 4 if w.needs_grad else 1
    if len(outs) != want:
        return Verdict(False, f"expected {want} tensor(s) from the step, got {len(outs)}")
    expect_shapes = [inputs.out.shape, inputs.q.shape, inputs.k.shape, inputs.v.shape]
    for name, t, s in zip(NAMES, outs, expect_shapes):
        if not isinstance(t, torch.Tensor) or tuple(t.shape) != tuple(s):
            got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            return Verdict(False, f"{name} has shape {got}, expected {tuple(s)}")
        if not torch.isfinite(t).all().item():
            bad = (~torch.isfinite(t)).sum().item()
            return Verdict(False, f"{name}: {bad} of {t.numel()} elements are NaN/Inf (unwritten or overflow)")
    eps = EPS[w.dtype]
    worst, detail = 0.0, {}
    max_abs, cosine, rmse_o, ref_err = 0.0, 1.0, 0.0, 0.0
    for (b, g), r64, lerr in zip(ref.slices, ref.ref, ref.low_err):
        got = _slice(w, outs, "qqkk", b, g)  # O, dQ, dK, dV
        for name, x, hi, le in zip(NAMES, got, r64, lerr):
            e = _errors(x, hi)
            r_max = e["max_abs"] / max(le["max_abs"], eps * le["ref_max"], 1e-30)
            r_rms = e["rmse"] / max(le["rmse"], eps * le["ref_rms"], 1e-30)
            ratio = max(r_max, r_rms)
            if ratio != ratio:  # NaN
                ratio = float("inf")
            worst = max(worst, ratio)
            max_abs = max(max_abs, e["max_abs"])
            cosine = min(cosine, e["cos"])
            d = detail.setdefault(name, {"max_abs": 0.0, "ratio": 0.0, "ref_max_abs": 0.0})
            d["max_abs"] = max(d["max_abs"], e["max_abs"])
            d["ratio"] = max(d["ratio"], ratio)
            d["ref_max_abs"] = max(d["ref_max_abs"], le["max_abs"])
            if name == "o":
                rmse_o = max(rmse_o, e["rmse"])
                ref_err = max(ref_err, le["max_abs"])
    passed = worst <= tol
    reason = None
    if not passed:
        name = max(detail, key=lambda n: detail[n]["ratio"])
        reason = (f"{name}: error {detail[name]['max_abs']:.3g} is {detail[name]['ratio']:.3g}x the same-dtype "
                  f"reference's ({detail[name]['ref_max_abs']:.3g}); tolerance {tol:g}x")
    return Verdict(passed, reason, max_abs, rmse_o, cosine, worst, ref_err, detail)
