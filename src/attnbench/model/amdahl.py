"""The Amdahl prediction of a backend's end-to-end speedup, beside the measured one, and the gap.

With f the baseline's attention share of its step and s a backend's kernel-level speedup over the
baseline (from `attnbench run` rows of the same attention shape on the same device model), the
step should speed up by 1 / ((1 − f) + f / s). The measured speedup is T_step(baseline) /
T_step(backend). Where they differ, the evidence that says why is stored next to them: the
kernel speedup as the profiler saw it inside the step, each kernel's time in the step over its
isolated time, and the share attention takes beyond its kernels (by difference minus profiler)."""
from __future__ import annotations

import statistics

from ..workloads import Workload

AGREE = 0.05  # |measured / predicted − 1| within this: the prediction holds
MATCH = ("mode", "batch", "q_len", "kv_len", "q_heads", "kv_heads", "head_dim", "head_dim_v", "dtype", "launch")


def amdahl(f: float, s: float) -> float:
    """1 / ((1 − f) + f / s) for a share f in [0, 1] sped up s > 0 times."""
    if not 0.0 <= f <= 1.0:
        raise ValueError(f"share f must be in [0, 1], got {f}")
    if not s > 0:
        raise ValueError(f"speedup s must be positive, got {s}")
    return 1.0 / ((1.0 - f) + f / s)


def clamp01(x: float) -> float:
    return min(1.0, max(0.0, x))


def kernel_medians(frame, w: Workload, device_name: str | None = None) -> dict[str, float]:
    """Backend -> median over its OK rows (repeats) of median_us, for attempts of the attention
    workload `w` (any layout, L2 warm; decode: masked or not, the same at Nq = 1) on `device_name`."""
    if frame is None or len(frame) == 0:
        return {}
    sel = (frame["status"] == "OK") & (frame["l2"] == "warm")
    for k in MATCH:
        sel &= frame[k] == getattr(w, k)
    if w.mode != "decode":
        sel &= frame["causal"].astype(bool) == w.causal
    if device_name is not None:
        sel &= frame["device_name"] == device_name
    rows = frame[sel]
    return {b: float(statistics.median(g["median_us"])) for b, g in rows.groupby("backend")}


def choose_share(f_profiler: float | None, f_difference: float | None) -> tuple[float | None, str | None]:
    """The f the prediction uses: the profiler's (a kernel-time share, as s is a kernel-time
    ratio), else the difference's, clamped to [0, 1]."""
    if f_profiler is not None:
        return clamp01(f_profiler), "profiler"
    if f_difference is not None:
        return clamp01(f_difference), "difference"
    return None, None


def compare(row: dict, base: dict, kernels: dict[str, float], calls: int) -> dict:
    """Derived columns of `row` against the baseline's row `base` (both OK), with the isolated
    kernel medians `kernels` (backend -> µs per call) and `calls` attention calls per step."""
    out = {"baseline": base["backend"], "measured_speedup": base["median_us"] / row["median_us"]}
    f, source = choose_share(base.get("share_profiler"), base.get("share_diff"))
    out.update(f_used=f, f_source=source)
    kb, kr = kernels.get(base["backend"]), kernels.get(row["backend"])
    out.update(kernel_us=kr, kernel_baseline_us=kb)
    ex: dict = {}
    if kb and kr:
        out["kernel_speedup"] = kb / kr
        if f is not None:
            out["predicted_speedup"] = amdahl(f, out["kernel_speedup"])
            out["gap"] = out["measured_speedup"] / out["predicted_speedup"] - 1
    for who, r, k in (("baseline", base, kb), ("backend", row, kr)):
        if r.get("attn_kernel_us") is not None and k:  # the kernel's time inside the step over its isolated time
            ex[f"{who}_in_step_over_isolated"] = r["attn_kernel_us"] / (k * calls)
    if base.get("attn_kernel_us") and row.get("attn_kernel_us"):
        ex["in_step_kernel_speedup"] = base["attn_kernel_us"] / row["attn_kernel_us"]
        if f is not None:
            ex["predicted_from_in_step"] = amdahl(f, ex["in_step_kernel_speedup"])
    if base.get("share_diff") is not None and base.get("share_profiler") is not None:
        ex["beyond_kernels_share"] = base["share_diff"] - base["share_profiler"]
    if base.get("noop_us") and row.get("noop_us"):  # attention's whole cost in each step, by difference
        a_b, a_r = base["median_us"] - base["noop_us"], row["median_us"] - row["noop_us"]
        if a_b > 0 and a_r > 0:
            ex["in_step_attention_speedup"] = a_b / a_r
    ex["why"] = explain(out, ex)
    out["explain"] = ex
    return out


def explain(out: dict, ex: dict) -> str:
    """One line on why measured and predicted differ (or that they agree), from the evidence in `ex`."""
    gap = out.get("gap")
    if gap is None:
        return "no prediction: " + ("no attention share" if out.get("f_used") is None else
                                    "no kernel-level rows of this shape for both backends")
    if abs(gap) <= AGREE:
        return f"agrees within {AGREE:.0%}"
    parts = []
    s_in, p_in = ex.get("in_step_kernel_speedup"), ex.get("predicted_from_in_step")
    if s_in is not None:
        held = abs(out["measured_speedup"] / p_in - 1) <= AGREE
        parts.append(f"inside the step the kernel sped up {s_in:.2f}x, not {out['kernel_speedup']:.2f}x"
                     + (" (traffic, cache state or layout the kernel benchmark does not see); with it the "
                        f"prediction is {p_in:.2f}x" if held else f" (prediction from it {p_in:.2f}x)"))
    s_att = ex.get("in_step_attention_speedup")
    if s_att is not None:
        parts.append(f"attention as a whole (kernels, conversions, launches; by difference) sped up {s_att:.2f}x")
    beyond = ex.get("beyond_kernels_share")
    if beyond is not None and beyond > AGREE / 5:
        parts.append(f"{beyond:.1%} of the baseline step is attention outside its kernels")
    return "; ".join(parts) or "unexplained: no profiler or no-op evidence"
