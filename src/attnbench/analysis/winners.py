"""Best backend per workload: its lead over the runner-up, its throughput and share of the device ceiling."""
from __future__ import annotations

import numpy as np
import pandas as pd

from .ceilings import ceilings_by_device
from .frames import WORKLOAD_COLS, per_backend

SEPARATION_RATIO = 1.10  # a winner must be at least 10% ahead of the runner-up ...
N_BOOT = 1000  # ... and the 95% bootstrap lower bound of that ratio must exceed 1


def separation(fast: list[float], slow: list[float], seed: int = 0, n_boot: int = N_BOOT) -> float | None:
    """Lower bound of the 95% bootstrap interval of median(slow) / median(fast), resampling the raw
    samples of each backend (all repeats pooled)."""
    if len(fast) < 2 or len(slow) < 2:
        return None
    rng = np.random.default_rng(seed)
    a, b = np.asarray(fast), np.asarray(slow)
    ma = np.median(rng.choice(a, (n_boot, a.size)), axis=1)
    mb = np.median(rng.choice(b, (n_boot, b.size)), axis=1)
    return float(np.percentile(mb / ma, 2.5))


def _str_or_none(v) -> str | None:
    return v if isinstance(v, str) else None


def caveat(best, runner_up, ratio: float) -> str | None:
    """Why a lead may not be the kernels': "host-bound" when either side's eager time is mostly the
    host's (runner/gates.py HOST_BOUND_RATIO), "clock" when the two ran at SM clocks further apart
    than the lead itself."""
    if bool(best.get("host_bound")) or bool(runner_up.get("host_bound")):
        return "host-bound"
    a, b = best.get("sm_clock_mhz"), runner_up.get("sm_clock_mhz")
    if a and b and pd.notna(a) and pd.notna(b) and abs(a - b) / min(a, b) >= ratio - 1:
        return "clock"
    return None


def best_per_workload(df: pd.DataFrame, runs: list[dict], include_references: bool = False) -> pd.DataFrame:
    """Fastest contestant per workload (accuracy references excluded unless asked), runner-up ratio
    with its bootstrap lower bound, whether the winner is clear (ratio >= 1.10 and lower bound > 1)
    and the caveat on that lead (host-bound or clock), throughput (TFLOP/s, or modelled GB/s for
    decode) and % of the device's measured ceiling, the winner's kernel time and flags."""
    pb = per_backend(df)
    if not include_references:
        pb = pb[pb["role"] != "accuracy_reference"]
    ceil = ceilings_by_device(runs)
    rows = []
    for (_, key), grp in pb.groupby(["device_name", "workload_key"], sort=False):
        grp = grp.sort_values("median_us")
        best = grp.iloc[0]
        rec = {c: best[c] for c in WORKLOAD_COLS}
        rec.update(workload_key=key, best=best["backend"], best_kernel=_str_or_none(best["kernel"]),
                   median_us=best["median_us"], p95_us=best["p95_us"], repeats=int(best["repeats"]),
                   contestants=len(grp), kernel_us=best.get("kernel_us"), host_bound=bool(best.get("host_bound")),
                   stationary=best.get("stationary"))
        rec["clear"] = False
        rec["caveat"] = None
        if len(grp) > 1:
            rec["runner_up"] = grp.iloc[1]["backend"]
            rec["runner_up_kernel"] = _str_or_none(grp.iloc[1]["kernel"])
            rec["ratio"] = grp.iloc[1]["median_us"] / best["median_us"]
            rec["ratio_l95"] = separation(best["samples"], grp.iloc[1]["samples"])
            rec["clear"] = bool(rec["ratio"] >= SEPARATION_RATIO and (rec["ratio_l95"] or 0) > 1)
            rec["caveat"] = caveat(best, grp.iloc[1], rec["ratio"])
        c = ceil.get(best["device_name"], {})
        if best["mode"] == "decode":
            rec["metric"] = "GB/s"
            rec["value"] = best["bytes"] / (best["median_us"] * 1e-6) / 1e9
            top = c.get("copy_gbps")  # seed convention; a read-only kernel can exceed it (>100%)
        else:
            rec["metric"] = "TFLOP/s"
            rec["value"] = best["flops"] / (best["median_us"] * 1e-6) / 1e12
            top = c.get(f"matmul_tflops_{best['dtype']}")
        rec["pct_ceiling"] = 100.0 * rec["value"] / top if top else None
        rows.append(rec)
    return pd.DataFrame(rows)
