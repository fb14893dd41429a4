"""Correctness of a model step against the float64 model, before anything is timed.

A short probe of the step's own kind runs on the backend's model and on the same weights with the
unfused reference attention, in the step's dtype and in float64. The verdict is the project's
ratio (measure/correctness.py): the backend's error over the same-dtype reference's, per tensor,
max-abs and RMS alike. The probe exercises the step's semantics: prefill writes the cache; decode
prefills PROBE_TOKENS - 1 positions, appends one and is compared with the full-sequence forward's
last position; training compares the output and the gradient of the input (through every
layer's attention backward)."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..measure.correctness import EPS, tolerance
from .steps import StepSpec, hidden_states

PROBE_TOKENS = 128  # tokens per sequence of the probe (fewer when the step has fewer)


@dataclass
class ModelVerdict:
    passed: bool
    reason: str | None
    err_ratio: float
    max_abs_err: float
    detail: dict = field(default_factory=dict)  # tensor -> {max_abs, ratio, ref_max_abs}


def probe_len(spec: StepSpec) -> int:
    return max(2, min(spec.seqlen, PROBE_TOKENS))


def run_probe(model, spec: StepSpec, x, dy=None) -> list:
    """The probe's result on `model`: [y] (prefill: through the cache; decode: the appended token),
    or [y, dL/dx] for training with the given output gradient dy."""
    import torch

    from .decoder import KVCache

    n = x.shape[1]
    if spec.step == "train":
        xr = x.detach().clone().requires_grad_(True)
        y = model(xr)
        (dx,) = torch.autograd.grad(y, xr, dy)
        return [y.detach(), dx]
    cache = KVCache(model.cfg, x.shape[0], n, model.dtype, model.device)
    with torch.no_grad():
        if spec.step == "prefill":
            return [model(x, 0, cache)]
        model(x[:, :n - 1], 0, cache)
        return [model(x[:, n - 1:], n - 1, cache)]


def reference64(model64, spec: StepSpec, x64, dy64=None) -> list:
    """The float64 answer without any cache: the full forward (its last position for decode)."""
    import torch

    if spec.step == "train":
        xr = x64.detach().clone().requires_grad_(True)
        y = model64(xr)
        (dx,) = torch.autograd.grad(y, xr, dy64)
        return [y.detach(), dx]
    with torch.no_grad():
        y = model64(x64)
    return [y[:, -1:]] if spec.step == "decode" else [y]


@dataclass
class Yardstick:
    """The probe's inputs, its float64 answer and the same-dtype reference's errors, computed once
    per (step, dtype) and shared by every backend (their weights are the same)."""

    x: object
    dy: object
    ref64: list
    ref_low: list


def yardstick(model, model64, model_low_ref, spec: StepSpec, seed: int) -> Yardstick:
    """model64: float64 weights with reference attention; model_low_ref: the step's dtype with the
    reference attention."""
    import torch

    n = probe_len(spec)
    x = hidden_states(model.cfg, 1, n, model.dtype, model.device, seed + 17)
    dy = hidden_states(model.cfg, 1, n, model.dtype, model.device, seed + 29) if spec.step == "train" else None
    ref64 = reference64(model64, spec, x.to(torch.float64), None if dy is None else dy.to(torch.float64))
    return Yardstick(x, dy, ref64, run_probe(model_low_ref, spec, x, dy))


def check(model, spec: StepSpec, ys: Yardstick, dtype: str, tol: float | None = None) -> ModelVerdict:
    """The backend model's probe against float64, judged by the same-dtype reference's error."""
    import torch

    got = run_probe(model, spec, ys.x, ys.dy)
    eps, bound = EPS[dtype], tolerance(dtype, tol)
    worst, worst_abs, detail = 0.0, 0.0, {}
    for name, x, hi, lo in zip(("y", "dx"), got, ys.ref64, ys.ref_low):
        if tuple(x.shape) != tuple(hi.shape):
            return ModelVerdict(False, f"{name} has shape {tuple(x.shape)}, expected {tuple(hi.shape)}",
                                float("inf"), float("inf"))
        if not torch.isfinite(x).all().item():
            return ModelVerdict(False, f"{name}: NaN/Inf in the model's output", float("inf"), float("inf"))
        d, dl = x.double() - hi, lo.double() - hi
        scale_max, scale_rms = hi.abs().max().item(), hi.pow(2).mean().sqrt().item()
        r_max = d.abs().max().item() / max(dl.abs().max().item(), eps * scale_max, 1e-30)
        r_rms = d.pow(2).mean().sqrt().item() / max(dl.pow(2).mean().sqrt().item(), eps * scale_rms, 1e-30)
        ratio = max(r_max, r_rms)
        ratio = float("inf") if ratio != ratio else ratio
        detail[name] = {"max_abs": d.abs().max().item(), "ratio": round(ratio, 4),
                        "ref_max_abs": dl.abs().max().item()}
        worst, worst_abs = max(worst, ratio), max(worst_abs, detail[name]["max_abs"])
    if worst <= bound:
        return ModelVerdict(True, None, worst, worst_abs, detail)
    name = max(detail, key=lambda k: detail[k]["ratio"])
    return ModelVerdict(False, f"{spec.step} probe {name}: error {detail[name]['max_abs']:.3g} is "
                               f"{detail[name]['ratio']:.3g}x the same-dtype reference model's "
                               f"({detail[name]['ref_max_abs']:.3g}); tolerance {bound:g}x",
                        worst, worst_abs, detail)
