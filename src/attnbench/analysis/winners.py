"""Best backend per workload: its lead over the runner-up, its throughput and share of the device ceiling."""
from __future__ import annotations

import numpy as np
import pandas as pd

from .ceilings import ceilings_by_device
from .frames import GROUP, WORKLOAD_COLS, evidence, per_backend
from .stats import N_BOOT, SEPARATION_RATIO, noise_of, pooled_lower_bound, separate_many

__all__ = ["N_BOOT", "SEPARATION_RATIO", "best_per_workload", "caveat", "contestants", "contests", "separation",
           "throughput"]


def separation(fast: list[float], slow: list[float], seed: int = 0, n_boot: int = N_BOOT) -> float | None:
    """Lower bound of the 95% bootstrap interval of median(slow) / median(fast), resampling the raw
    samples of each backend (all repeats pooled): the fallback of stats.separate."""
    return pooled_lower_bound(fast, slow, seed, n_boot)


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


def contestants(lines: pd.DataFrame, include_references: bool = False) -> pd.DataFrame:
    """The lines that compete: accuracy references only when asked."""
    return lines if include_references else lines[lines["role"] != "accuracy_reference"]


def contests(lines: pd.DataFrame, contest_cols, include_references: bool = False) -> pd.DataFrame:
    """One row per contest (the lines sharing `contest_cols`): the winner's line (fastest OK contestant;
    ties go to the backend name that sorts first; accuracy references only when asked) with
    `contestants`, the runner-up's backend, kernel, time and flags (`runner_up*`), `ratio`, its
    bootstrap lower bound `ratio_l95`, the `separation` method, `separated` and the lead's `caveat`."""
    contest_cols = list(contest_cols)
    pb = contestants(lines, include_references)
    if pb.empty:
        return pd.DataFrame()
    pb = pb.sort_values([*contest_cols, "median_us", "backend"], kind="stable").reset_index(drop=True)
    grouped = pb.groupby(contest_cols, sort=False, dropna=False)
    rank = grouped.cumcount().to_numpy()
    size = grouped["backend"].transform("size").to_numpy()
    first = np.flatnonzero(rank == 0)
    best = pb.iloc[first].reset_index(drop=True)
    best["contestants"] = size[first]
    second = first[size[first] > 1] + 1  # sorted: the runner-up follows its winner
    has = size[first] > 1
    runner = pb.iloc[second]
    for col, src in (("runner_up", "backend"), ("runner_up_kernel", "kernel"), ("runner_up_us", "median_us"),
                     ("runner_up_host_bound", "host_bound"), ("runner_up_clock_low", "clock_low"),
                     ("runner_up_sm_clock_mhz", "sm_clock_mhz")):
        best[col] = pd.Series(runner[src].to_numpy(), index=np.flatnonzero(has)).reindex(best.index)
    # records of the winners and runners-up only: the bootstrap and the noise check read no other line
    need = np.union1d(first, second)
    recs = dict(zip(need.tolist(), pb.iloc[need].to_dict(orient="records")))
    seps = separate_many([(evidence(recs[i]), evidence(recs[j])) for i, j in zip(first[has], second)])
    for col, attr in (("ratio", "ratio"), ("ratio_l95", "lower"), ("separation", "method"), ("separated", "separated")):
        best[col] = pd.Series([getattr(s, attr) for s in seps], index=np.flatnonzero(has), dtype=object) \
            .reindex(best.index)
    best["separated"] = best["separated"].fillna(False).astype(bool)
    best["ratio"] = pd.to_numeric(best["ratio"])
    # a separated lead on numbers too noisy to carry it is not clear: the first reason is kept
    best["noise"] = [(noise_of(recs[i]) or noise_of(recs[i + 1])) if h else None for i, h in zip(first, has)]
    best["caveat"] = [caveat({"host_bound": r.host_bound, "sm_clock_mhz": r.sm_clock_mhz},
                             {"host_bound": r.runner_up_host_bound, "sm_clock_mhz": r.runner_up_sm_clock_mhz},
                             r.ratio) if h else None
                      for r, h in zip(best.itertuples(index=False), has)]
    return best


def throughput(rows: pd.DataFrame, ceilings_of) -> pd.DataFrame:
    """`metric` (TFLOP/s, or modelled GB/s for decode), `value` and `pct_ceiling` (% of the measured
    matmul rate of the row's dtype, or for decode of the measured read bandwidth: the copy's, bytes read +
    written, where a store has none) of rows holding median_us, flops, bytes, mode and
    dtype; `ceilings_of(row)` gives the row's device ceilings (a dict, empty when unknown)."""
    metric, value, pct = [], [], []
    for r in rows.to_dict(orient="records"):
        c = ceilings_of(r) or {}
        if r["mode"] == "decode":
            v, top, m = _per_s(r.get("bytes"), r["median_us"], 1e9), c.get("read_gbps") or c.get("copy_gbps"), "GB/s"
        else:
            v, top, m = _per_s(r.get("flops"), r["median_us"], 1e12), c.get(f"matmul_tflops_{r['dtype']}"), "TFLOP/s"
        metric.append(m)
        value.append(v)
        pct.append(100.0 * v / top if top and v is not None else None)
    return rows.assign(metric=metric, value=value, pct_ceiling=pct)


def _per_s(amount, median_us, unit: float) -> float | None:
    return float(amount) / (median_us * 1e-6) / unit if amount is not None and pd.notna(amount) else None


def best_per_workload(df: pd.DataFrame, runs: list[dict], include_references: bool = False) -> pd.DataFrame:
    """Fastest contestant per device model and workload (accuracy references excluded unless asked),
    runner-up ratio with its bootstrap lower bound, the `separation` method that gave it, whether the
    winner is `clear` (separated: analysis/stats.py) and the caveat on that lead (host-bound or clock),
    throughput (TFLOP/s, or modelled GB/s for decode) and % of the device's measured ceiling, the
    winner's kernel time and flags."""
    won = contests(per_backend(df), GROUP, include_references)
    if won.empty:
        return pd.DataFrame()
    out = won[[*WORKLOAD_COLS, "workload_key"]].copy()
    out["best"] = won["backend"]
    out["best_kernel"] = [_str_or_none(k) for k in won["kernel"]]
    for c in ("median_us", "p5_us", "p95_us", "p99_us", "contestants", "kernel_us", "host_bound", "clock_low",
              "stationary", "runner_up", "ratio", "ratio_l95", "separation", "caveat", "noise"):
        out[c] = won[c]
    out["repeats"] = won["repeats"].astype(int)
    out["runner_up_kernel"] = [_str_or_none(k) for k in won["runner_up_kernel"]]
    out["separated"] = won["separated"]
    out["clear"] = won["separated"] & won["noise"].isna()
    ceil = ceilings_by_device(runs)
    return throughput(out.assign(flops=won["flops"], bytes=won["bytes"]),
                      lambda r: ceil.get(r["device_name"])).drop(columns=["flops", "bytes"])
