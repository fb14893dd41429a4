"""`advise`: the backend to use for one workload on one store, and what that choice costs on the others.

The advice is the winner of the contest (analysis/winners.py contests) of the wanted workload on the
first store; when that workload was not measured there, of the nearest measured one, which is said
with the fields that differ. Nearest: fewest differing categorical fields (mode, dtype, mask,
launch, ...), then the smallest sum of |log2| ratios of the sizes (batch, lengths, heads, dims).
On every other store and device model the same workload (or its nearest there) gives the cost of the
choice: its time there over the fastest there, or unavailable when it has no OK row there.
"""
from __future__ import annotations

import math

import pandas as pd

from ..workloads import Workload
from ..workloads.axes import NAMES, axis
from .frames import json_ready, per_backend
from .winners import contestants, contests

# sizes compare by ratio; an integer axis whose 0 means "off" (window) is a choice, not a size
SIZES = tuple(n for n in NAMES if axis(n).type is int and axis(n).default != 0)
CATEGORICAL = tuple(n for n in NAMES if n not in SIZES)
CONTEST = ["label", "device_name", "workload_key"]


def same(stored, wanted) -> bool:
    """Whether a stored field holds the wanted value: a stored causal 1 equals True, and a field the
    store leaves empty (NaN, None) equals an unset one."""
    if pd.isna(stored) and (wanted is None or pd.isna(wanted)):
        return True
    return bool(stored == wanted)


def distance(row, wanted: dict) -> tuple[int, float]:
    """(differing categorical fields, sum of |log2| size ratios)."""
    cats = sum(1 for n in CATEGORICAL if not same(row[n], wanted[n]))
    sizes = sum(abs(math.log2(float(row[n]) / wanted[n])) for n in SIZES)
    return cats, sizes


def nearest(won: pd.DataFrame, wanted: Workload) -> tuple[pd.Series, list[dict]]:
    """The contest of `won` closest to the wanted workload, and the fields in which it differs."""
    w = wanted.to_dict()
    exact = won[won["workload_key"] == wanted.key()]
    if len(exact):
        return exact.iloc[0], []
    scores = [distance(r, w) for _, r in won.iterrows()]
    best = won.iloc[min(range(len(scores)), key=lambda i: (scores[i], str(won.iloc[i]["workload_key"])))]
    differs = [{"field": n, "wanted": w[n], "measured": best[n]} for n in NAMES if not same(best[n], w[n])]
    return best, differs


def advise(df: pd.DataFrame, wanted: Workload, home: str, include_references: bool = False) -> dict:
    """The advice for `wanted` on store `home` (see the module's docstring) as JSON-ready values."""
    lines = per_backend(df, CONTEST)
    won = contests(lines, CONTEST, include_references)
    pool = contestants(lines, include_references)
    out = {"wanted": wanted.to_dict(), "home": home, "advice": [], "elsewhere": []}
    if won.empty:
        return out
    for device, mine in won[won["label"] == home].groupby("device_name", sort=True):
        row, differs = nearest(mine, wanted)
        out["advice"].append({
            "label": home, "device_name": device, "exact": not differs, "differs": differs,
            "workload": {n: row[n] for n in NAMES}, "backend": row["backend"], "kernel": row["kernel"],
            "median_us": row["median_us"], "p5_us": row["p5_us"], "p95_us": row["p95_us"], "p99_us": row["p99_us"],
            "repeats": int(row["repeats"]), "separated": bool(row["separated"]), "separation": row["separation"],
            "ratio": row["ratio"], "ratio_l95": row["ratio_l95"], "runner_up": row["runner_up"],
            "runner_up_us": row["runner_up_us"], "host_bound": bool(row["host_bound"]),
            "clock_low": bool(row["clock_low"])})
        for (label, other), theirs in won[(won["label"] != home) | (won["device_name"] != device)] \
                .groupby(["label", "device_name"], sort=True):
            there, differs_there = nearest(theirs, wanted)
            mine_there = pool[(pool["label"] == label) & (pool["device_name"] == other)
                              & (pool["workload_key"] == there["workload_key"]) & (pool["backend"] == row["backend"])]
            t = float(mine_there["median_us"].iloc[0]) if len(mine_there) else None
            out["elsewhere"].append({
                "for": device, "label": label, "device_name": other, "exact": not differs_there,
                "differs": differs_there, "fastest": there["backend"], "fastest_us": there["median_us"],
                "choice_us": t, "cost": t / there["median_us"] if t is not None else None,
                "unavailable": t is None, "separated": bool(there["separated"])})
    return json_ready(out)

