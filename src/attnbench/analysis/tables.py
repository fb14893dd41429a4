"""The tables `analyze` prints beside its winners: outcomes, dispatch, correctness and efficiency per side."""
from __future__ import annotations

import numpy as np
import pandas as pd

from .frames import json_list
from .winners import throughput


def _records(frame: pd.DataFrame) -> list[dict]:
    # NaN is not JSON: missing values are None
    return frame.astype(object).where(frame.notna(), None).to_dict(orient="records")


def outcomes(df: pd.DataFrame) -> list[dict]:
    """Attempts per side, device model and backend, counted per status."""
    if df.empty:
        return []
    t = df.pivot_table(index=["side", "device_name", "backend"], columns="status", values="attempt_key",
                       aggfunc="count", fill_value=0)
    t["attempts"] = t.sum(axis=1)
    return _records(t.reset_index())


def dispatch(df: pd.DataFrame) -> list[dict]:
    """Per side and backend, over attempts that reached the dispatch probe: the kernel families seen,
    % DISPATCH_MISMATCH and % actually probed ('unprobed': the profiler failed, or imported rows)."""
    reached = df[df["dispatch_status"].notna() | (df["status"] == "DISPATCH_MISMATCH")]
    out = []
    for (side, backend), g in reached.groupby(["side", "backend"], sort=True):
        fams = sorted({f for v in g["dispatch_families"] for f in json_list(v) if isinstance(f, str)})
        out.append({"side": side, "backend": backend, "reached": int(len(g)), "families": fams,
                    "mismatch_pct": 100.0 * float((g["status"] == "DISPATCH_MISMATCH").mean()),
                    "probed_pct": 100.0 * float((g["dispatch_status"] == "probed").mean())})
    return out


def correctness(df: pd.DataFrame) -> list[dict]:
    """Per side, backend and dtype over OK rows: largest max-abs error, lowest cosine, largest and median
    error ratio (against the same-dtype unfused reference), and how many rows were checked (imported
    rows were not)."""
    ok = df[df["status"] == "OK"]
    out = []
    for (side, backend, dtype), g in ok.groupby(["side", "backend", "dtype"], sort=True):
        err = pd.to_numeric(g["err_ratio"], errors="coerce")
        out.append({"side": side, "backend": backend, "dtype": dtype, "rows": int(len(g)),
                    "checked": int(err.notna().sum()),
                    "max_abs_err": _num(pd.to_numeric(g["max_abs_err"], errors="coerce").max()),
                    "min_cosine": _num(pd.to_numeric(g["cosine"], errors="coerce").min()),
                    "max_err_ratio": _num(err.max()), "median_err_ratio": _num(err.median())})
    return out


def _num(v) -> float | None:
    return None if v is None or pd.isna(v) else float(v)


def efficiency(won: pd.DataFrame, ceilings: dict) -> list[dict]:
    """Per contest winner: throughput and % of the measured ceiling (winners.throughput), and its
    position on the roofline of its device: arithmetic intensity = modelled FLOP ÷ modelled byte, the
    ridge = matmul FLOP/s ÷ copy bytes/s, `bound` memory or compute by which side of the ridge it is,
    and `roofline_pct` = achieved FLOP/s ÷ min(matmul rate, intensity × copy bandwidth).
    `ceilings[(label, device_name)]` are the runs' measured ceilings (runs.provenance "ceilings")."""
    if won.empty:
        return []
    rows = won[["side", "label", "device_name", "match", "workload_key", "mode", "batch", "q_len", "kv_len",
                "q_heads", "kv_heads", "head_dim", "dtype", "causal", "launch", "backend", "median_us", "flops",
                "bytes", "host_bound", "clock_low"]]
    rows = throughput(rows, lambda r: ceilings.get((r["label"], r["device_name"])))
    out = []
    for r in rows.to_dict(orient="records"):
        c = ceilings.get((r["label"], r["device_name"])) or {}
        peak, bw = c.get(f"matmul_tflops_{r['dtype']}"), c.get("copy_gbps")
        flops, nbytes = r["flops"], r["bytes"]
        intensity = flops / nbytes if nbytes and pd.notna(nbytes) and nbytes > 0 else None
        ridge = peak * 1e12 / (bw * 1e9) if peak and bw else None
        roof = None
        if intensity is not None and peak and bw:
            achieved = flops / (r["median_us"] * 1e-6)
            roof = 100.0 * achieved / min(peak * 1e12, intensity * bw * 1e9)
        r.update(intensity=intensity, ridge=ridge, roofline_pct=roof,
                 bound=None if intensity is None or ridge is None else ("memory" if intensity < ridge else "compute"))
        out.append(r)
    return _records(pd.DataFrame(out))


def efficiency_summary(rows: list[dict]) -> list[dict]:
    """Per side and mode: winners with a ceiling, median % of ceiling and of the roofline."""
    if not rows:
        return []
    f = pd.DataFrame(rows)
    out = []
    for (side, mode), g in f.groupby(["side", "mode"], sort=True):
        pct = pd.to_numeric(g["pct_ceiling"], errors="coerce").dropna()
        roof = pd.to_numeric(g["roofline_pct"], errors="coerce").dropna()
        out.append({"side": side, "mode": mode, "winners": int(len(g)), "with_ceiling": int(len(pct)),
                    "metric": g["metric"].iloc[0], "median_pct_ceiling": _num(pct.median() if len(pct) else np.nan),
                    "median_roofline_pct": _num(roof.median() if len(roof) else np.nan),
                    "memory_bound": int((g["bound"] == "memory").sum())})
    return out
