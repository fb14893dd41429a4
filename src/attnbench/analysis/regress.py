"""`compare`: per device model × workload × backend, NEW's time over BASE's with a bootstrap interval.

A line is compared when it is OK in both stores (times as in analysis/stats.py). Its verdict:

- `regressed`: ratio ≥ threshold and the interval's lower end > 1 (the slowdown is separated);
- `slower`: ratio ≥ threshold without that separation (or with no interval at all);
- `improved` / `faster`: the same the other way (ratio ≤ 1 / threshold, upper end < 1);
- `same`: otherwise.

A line OK in BASE whose attempts in NEW all ended otherwise is `lost`; one NEW did not measure at all
is `missing` (a smaller grid is not a regression); one only NEW has OK is `new`. The interval
resamples each store's process repeats when both have ≥ 3, else their pooled raw samples
(stats.ratio_interval); with one sample per repeat and fewer repeats there is none, and the verdict
says `not separable`.
"""
from __future__ import annotations

import pandas as pd

from .frames import GROUP, evidence, json_ready, per_backend
from .stats import NONE, ratio_interval

KEY = [*GROUP, "backend"]
SHOWN = ["device_name", "mode", "batch", "q_len", "kv_len", "q_heads", "kv_heads", "head_dim", "dtype", "causal",
         "launch", "l2"]


def _verdict(ratio: float, lo, hi, threshold: float) -> str:
    if ratio >= threshold:
        return "regressed" if lo is not None and lo > 1.0 else "slower"
    if ratio <= 1.0 / threshold:
        return "improved" if hi is not None and hi < 1.0 else "faster"
    return "same"


def compare(base: pd.DataFrame, new: pd.DataFrame, threshold: float = 1.05) -> list[dict]:
    """One record per line of either store (see the module's docstring), worst first."""
    lb, ln = per_backend(base).set_index(KEY), per_backend(new).set_index(KEY)
    out = []
    for key in lb.index.intersection(ln.index):
        b, n = lb.loc[key], ln.loc[key]
        ratio = float(n["median_us"] / b["median_us"])
        lo, hi, method = ratio_interval(evidence(b), evidence(n))
        out.append({**_shown(b), "backend": key[-1], "base_us": float(b["median_us"]), "new_us": float(n["median_us"]),
                    "ratio": ratio, "lo": lo, "hi": hi, "method": method,
                    "verdict": _verdict(ratio, lo, hi, threshold), "separable": method != NONE,
                    "host_bound": bool(b["host_bound"] or n["host_bound"]),
                    "clock_low": bool(b["clock_low"] or n["clock_low"])})
    # every status NEW's attempts of a line ended in, one pass over NEW
    new_statuses = new.groupby(KEY, sort=False)["status"].agg(lambda s: sorted(set(s))).to_dict() if len(new) else {}
    for key in lb.index.difference(ln.index):
        b = lb.loc[key]
        lost = key in new_statuses
        statuses = new_statuses.get(key, [])
        out.append({**_shown(b), "backend": key[-1], "base_us": float(b["median_us"]), "new_us": None, "ratio": None,
                    "lo": None, "hi": None, "method": None, "verdict": "lost" if lost else "missing",
                    "new_status": statuses, "separable": None, "host_bound": bool(b["host_bound"]),
                    "clock_low": bool(b["clock_low"])})
    for key in ln.index.difference(lb.index):
        n = ln.loc[key]
        out.append({**_shown(n), "backend": key[-1], "base_us": None, "new_us": float(n["median_us"]), "ratio": None,
                    "lo": None, "hi": None, "method": None, "verdict": "new", "separable": None,
                    "host_bound": bool(n["host_bound"]), "clock_low": bool(n["clock_low"])})
    order = {"lost": 0, "regressed": 1, "slower": 2}
    out.sort(key=lambda r: (order.get(r["verdict"], 3), -(r["ratio"] or 0)))
    return json_ready(out)


def _shown(line) -> dict:
    return {c: line[c] for c in SHOWN if c in line.index}


def verdict(rows: list[dict]) -> dict:
    """How many lines got each verdict, and how many slower ones could not be separated at all."""
    counts = {k: 0 for k in ("regressed", "slower", "same", "faster", "improved", "lost", "missing", "new")}
    for r in rows:
        counts[r["verdict"]] += 1
    counts["compared"] = sum(counts[k] for k in ("regressed", "slower", "same", "faster", "improved"))
    counts["not_separable"] = sum(1 for r in rows if r["separable"] is False and r["verdict"] == "slower")
    return counts
