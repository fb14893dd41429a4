"""Best backend per workload with its time, throughput and share of the measured device ceiling."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from ..measure.dispatch import ATTENTION_FAMILIES, family_of

SEPARATION_RATIO = 1.10  # a winner must be at least 10% ahead of the runner-up ...
N_BOOT = 1000  # ... and the 95% bootstrap lower bound of that ratio must exceed 1

WORKLOAD_COLS = ["device_name", "mode", "batch", "q_len", "kv_len", "q_heads", "kv_heads", "head_dim",
                 "head_dim_v", "dtype", "causal", "causal_align", "layout", "launch", "l2"]


def ceilings_by_device(runs: list[dict]) -> dict[str, dict]:
    """Latest measured ceilings per device model (copy GB/s, matmul TFLOP/s per dtype)."""
    out: dict[str, dict] = {}
    for r in runs:  # runs come oldest first; later runs overwrite
        c = (r.get("provenance") or {}).get("ceilings")
        if c and r.get("device_name"):
            out[r["device_name"]] = c
    return out


def json_list(v) -> list:
    """A JSON-list column of a row (raw samples, kernel names): stored as JSON text, already a list
    after an import, or empty."""
    return json.loads(v) if isinstance(v, str) else list(v or [])


def library_kernel(family: str | None, kernels) -> str | None:
    """The library attention kernel family a backend's time went to, when its name does not say so.

    An SDPA backend is pinned to one kernel and named after it; any other backend (compile, a
    plugin) that spent most of its device time in a library attention kernel is attributed to
    it: Inductor, for one, rewrites plain softmax(QK^T)V into an SDPA call where its pattern
    matcher recognises it, and then times cuDNN or flash, not its own code."""
    names = json_list(kernels)
    if family == "sdpa" or not names:
        return None
    fam = family_of(names[0])  # dispatch_kernels are ordered by device time, most first
    return fam if fam in ATTENTION_FAMILIES else None


def _str_or_none(v) -> str | None:
    return v if isinstance(v, str) else None


def per_backend(df: pd.DataFrame) -> pd.DataFrame:
    """One line per (workload, backend) over OK rows: median of per-repeat medians, worst p95, repeats,
    and the library attention kernel(s) it ran when its name does not say (see library_kernel)."""
    ok = df[df["status"] == "OK"]
    if ok.empty:
        return pd.DataFrame(columns=WORKLOAD_COLS + ["workload_key", "backend", "role", "median_us", "p95_us",
                                                     "repeats", "flops", "bytes", "kernel"])
    ok = ok.assign(samples=ok["samples_us"].map(json_list),
                   kernel=[library_kernel(f, k) for f, k in zip(ok["family"], ok["dispatch_kernels"])])
    g = ok.groupby(["device_name", "workload_key", "backend"], sort=False)
    pooled = g["samples"].agg(lambda col: [x for s in col for x in s])
    agg = g.agg(median_us=("median_us", "median"), p95_us=("p95_us", "max"), repeats=("repeat", "nunique"),
                role=("role", "first"), flops=("flops", "first"), bytes=("bytes", "first"),
                **{c: (c, "first") for c in WORKLOAD_COLS if c != "device_name"})
    agg["samples"] = pooled
    agg["kernel"] = g["kernel"].agg(lambda col: "/".join(sorted({k for k in col if isinstance(k, str)})) or None)
    return agg.reset_index()


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


def best_per_workload(df: pd.DataFrame, runs: list[dict], include_references: bool = False) -> pd.DataFrame:
    """Fastest contestant per workload (accuracy references excluded unless asked), runner-up ratio
    with its bootstrap lower bound, whether the winner is clear (ratio >= 1.10 and lower bound > 1),
    throughput (TFLOP/s, or modelled GB/s for decode) and % of the device's measured ceiling."""
    pb = per_backend(df)
    if not include_references:
        pb = pb[pb["role"] != "accuracy_reference"]
    ceil = ceilings_by_device(runs)
    rows = []
    for (_, key), grp in pb.groupby(["device_name", "workload_key"], sort=False):
        grp = grp.sort_values("median_us")
        best = grp.iloc[0]
        rec = {c: best[c] for c in WORKLOAD_COLS}
        rec.update(workload_key=key, best=best["backend"], best_kernel=_str_or_none(best["kernel"]), median_us=best["median_us"],
                   p95_us=best["p95_us"], repeats=int(best["repeats"]), contestants=len(grp))
        rec["clear"] = False
        if len(grp) > 1:
            rec["runner_up"] = grp.iloc[1]["backend"]
            rec["runner_up_kernel"] = _str_or_none(grp.iloc[1]["kernel"])
            rec["ratio"] = grp.iloc[1]["median_us"] / best["median_us"]
            rec["ratio_l95"] = separation(best["samples"], grp.iloc[1]["samples"])
            rec["clear"] = bool(rec["ratio"] >= SEPARATION_RATIO and (rec["ratio_l95"] or 0) > 1)
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


def status_counts(df: pd.DataFrame) -> pd.DataFrame:
    """Attempts per backend and status (the run-outcome table)."""
    if df.empty:
        return pd.DataFrame()
    return df.pivot_table(index="backend", columns="status", values="attempt_key", aggfunc="count",
                          fill_value=0)


def _seconds(start, end) -> float | None:
    if not start or not end:
        return None
    return (pd.Timestamp(end) - pd.Timestamp(start)).total_seconds()


def repeat_cv(df: pd.DataFrame) -> pd.Series:
    """Coefficient of variation (sample std / mean) of the per-repeat medians, one value per
    (device, workload, backend) with OK rows in two or more repeats."""
    ok = df[(df["status"] == "OK") & df["median_us"].notna()]
    g = ok.groupby(["device_name", "workload_key", "backend"])["median_us"]
    cv = g.std(ddof=1) / g.mean()
    return cv[g.count() >= 2].dropna()


def run_overview(df: pd.DataFrame, runs: list[dict]) -> dict:
    """How a store's sweep went: attempts per status; sweep wall time (the runs' start to finish, or
    to their last row if interrupted) over the summed timed device time (every sample × its calls);
    and how well repeats agree (CV of per-repeat medians over workload × backend)."""
    out: dict = {"attempts": int(len(df)),
                 "status": {k: int(v) for k, v in df["status"].value_counts().items()} if len(df) else {}}
    wall = 0.0
    for r in runs:
        end = r.get("finished_at")
        if not end and len(df):
            mine = df.loc[df["run_id"] == r["run_id"], "created_at"]
            end = mine.max() if len(mine) else None
        wall += _seconds(r.get("started_at"), end) or 0.0
    out["sweep_wall_s"] = wall
    ok = df[df["status"] == "OK"] if len(df) else df
    timed = 0.0
    for s, k in zip(ok.get("samples_us", []), ok.get("calls_per_sample", [])):
        timed += sum(json_list(s)) * (int(k) if pd.notna(k) else 1) / 1e6
    out["timed_s"] = timed
    out["wall_over_timed"] = wall / timed if timed > 0 else None
    cv = repeat_cv(df) if len(df) else pd.Series(dtype=float)
    out["cv"] = _cv_stats(cv)
    # eager samples carry the host's launch cost, graph samples device time only: report them apart
    out["cv_by_launch"] = {}
    if len(cv):
        launch_of = df.groupby(["device_name", "workload_key"])["launch"].first()
        launch = launch_of.loc[cv.index.droplevel("backend")].to_numpy()  # aligned with cv
        for name in sorted(set(launch)):
            out["cv_by_launch"][name] = _cv_stats(cv[launch == name])
    return out


def _cv_stats(cv: pd.Series) -> dict:
    if not len(cv):
        return {"pairs": 0}
    return {"pairs": int(len(cv)), "median": float(cv.median()), "p90": float(cv.quantile(0.9)),
            "max": float(cv.max())}
