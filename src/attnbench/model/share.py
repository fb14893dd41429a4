"""Attention's share f of a model step, two ways.

Profiler: one step under the dispatch probe (measure/dispatch.py); its time per kernel family is
read, and attention's is the time of the families the backend declares, less those the step runs
without attention (the no-op step's: GEMMs, elementwise), which no name can tell apart. On CUDA
the families' device time is divided by the timed step (launch gaps and host time stay in the
denominator); on CPU, a share of the operators' self time. A backend whose declared families are
all the model's own (the unfused references: GEMMs) has no profiler share.

By difference: (T_step − T_noop) / T_step, where the no-op step is the same step with attention
replaced by decoder.noop_attend (Q stands for O). It holds everything attention costs in the step:
its kernels, the conversions around them, its launches. Noise can make it negative or above 1:
stored as measured, clamped only where it feeds the Amdahl prediction."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..measure import dispatch


@dataclass
class ProfileShare:
    families: list[str] = field(default_factory=list)  # recognised families the step ran
    attributed: list[str] = field(default_factory=list)  # the families counted as attention's
    family_share: float | None = None  # attention families' share of profiled kernel (CPU: operator) time
    attn_kernel_us: float | None = None  # their device time per step (CUDA)
    step_kernel_us: float | None = None  # all kernels' device time per step (CUDA)
    mismatch: str | None = None  # what dispatch.mismatch says about the declared families
    note: str | None = None  # why there is no share


def model_families(noop_step, device: str, classifier) -> set[str]:
    """Families the step runs with attention removed: never attention's."""
    p = dispatch.probe(noop_step, device, classifier)
    return set(p.families) if p.status == "probed" else set()


def profile_share(step, device: str, backend, classifier, own: set[str]) -> ProfileShare:
    """One step under the profiler: which families ran and what share of the time is attention's."""
    p = dispatch.probe(step, device, classifier)
    out = ProfileShare(families=list(p.families))
    if p.status != "probed":
        out.note = f"unprobed: {p.error}"
        return out
    dev = device.split(":")[0]
    expected = backend.expected_kernels(dev)
    out.mismatch = dispatch.mismatch(expected, p.families, classifier.attention)  # model GEMMs are not foreign
    out.attributed = sorted((expected & set(p.families)) - own)
    if not expected:
        out.note = "the backend declares no kernel families"
    elif not out.attributed:
        out.note = f"its kernel families {sorted(expected)} are the model's own: no name tells them apart"
    else:
        shares = getattr(p, "shares", {}) or {}
        out.family_share = sum(shares.get(f, 0.0) for f in out.attributed)
        if p.kernel_us:
            out.step_kernel_us = p.kernel_us
            out.attn_kernel_us = out.family_share * p.kernel_us
    return out


def profiler_share(ps: ProfileShare, step_us: float | None, device: str) -> float | None:
    """f from the profile: attention kernels' device time over the timed step (CUDA), or their
    share of the operators' self time (CPU)."""
    if ps.family_share is None:
        return None
    if device.startswith("cuda"):
        return ps.attn_kernel_us / step_us if ps.attn_kernel_us is not None and step_us else None
    return ps.family_share


def share_by_difference(step_us: float, noop_us: float) -> float:
    """(T − T_noop) / T, unclamped: noise may put it below 0 or (never by much) above 1."""
    if not step_us or step_us <= 0:
        raise ValueError(f"step time must be positive, got {step_us}")
    return (step_us - noop_us) / step_us
