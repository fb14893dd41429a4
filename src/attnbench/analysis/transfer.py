"""Does a winner travel: the cost of one side's choice on another, and how often the winner changes.

For a source side g, a target side h and a matched workload c (analysis/sides.py), the transfer
cost is C = T(h, c, b*_g) ÷ min_b T(h, c, b), b*_g being g's winner and T a line's time
(analysis/stats.py). C ≥ 1, and 1 when g's winner is also h's. When b*_g has no OK row on h it is
*unavailable*: counted apart, never a ratio. Costs are summarised over every matched workload and,
apart, over those where g's lead is separated.

A pair of sides changes winner on a matched workload when their winners differ; the rate is given
over every matched workload and over those separated on both sides (a change between two separated
winners is a real one). Fewer than MIN_RATE_N separated workloads are too few to read as a rate.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .winners import contestants

MIN_RATE_N = 5
# cost bins of the distribution: (upper bound, label); 1 exactly is the same winner
COST_BINS = ((1.0, "1"), (1.05, "<=1.05"), (1.10, "<=1.10"), (1.25, "<=1.25"), (1.5, "<=1.5"), (2.0, "<=2"),
             (np.inf, ">2"))
_W = ["side", "match", "mode", "backend", "median_us", "separated", "host_bound", "clock_low", "device_name",
      "torch_version", "label", "batch", "q_len", "kv_len", "q_heads", "kv_heads", "head_dim", "dtype", "causal",
      "launch", "l2"]
_SHOWN = ["mode", "batch", "q_len", "kv_len", "q_heads", "kv_heads", "head_dim", "dtype", "causal", "launch", "l2"]


def matched(won: pd.DataFrame) -> pd.DataFrame:
    """Every (g contest, h contest) of two different sides with the same match key: g's winner (`_g`
    columns) beside h's (`_h`)."""
    w = won[[c for c in _W if c in won.columns]]
    both = w.merge(w, on="match", suffixes=("_g", "_h"))
    return both[both["side_g"] != both["side_h"]].reset_index(drop=True)


def costs(won: pd.DataFrame, lines: pd.DataFrame, include_references: bool = False) -> pd.DataFrame:
    """matched() with `cost` (NaN where g's winner is unavailable on h) and `unavailable`."""
    m = matched(won)
    pool = contestants(lines, include_references)
    on_h = pool[["side", "match", "backend", "median_us", "label", "device_name"]].rename(
        columns={"side": "side_h", "backend": "backend_g", "median_us": "t_choice", "label": "label_h",
                 "device_name": "device_name_h"})
    # the same contest on h: side, match, and (for sides that hold neither) its own store and device
    m = m.merge(on_h, on=["side_h", "match", "backend_g", "label_h", "device_name_h"], how="left")
    m["cost"] = m["t_choice"] / m["median_us_h"]
    m["unavailable"] = m["cost"].isna()
    return m


def _distribution(c: pd.Series) -> dict:
    """Costs per bin of COST_BINS: a bin holds the costs above the previous bound up to its own."""
    out, lower = {}, -np.inf
    for upper, label in COST_BINS:
        out[label] = int(((c > lower) & (c <= upper)).sum())
        lower = upper
    return out


def _summary(m: pd.DataFrame) -> dict:
    c = m["cost"].dropna()
    return {"n": int(len(m)), "unavailable": int(m["unavailable"].sum()), "compared": int(len(c)),
            "median": float(c.median()) if len(c) else None, "p95": float(c.quantile(0.95)) if len(c) else None,
            "max": float(c.max()) if len(c) else None, "distribution": _distribution(c),
            "host_bound": int((m["host_bound_g"] | m["host_bound_h"]).sum()),
            "clock_low": int((m["clock_low_g"] | m["clock_low_h"]).sum())}


def _by_mode(m: pd.DataFrame, keys: list[str]):
    """(key values, mode, frame) for every group of `keys`, per mode and over all modes ('all')."""
    for k, grp in m.groupby(keys, sort=True):
        if grp["mode_g"].nunique() > 1:  # one mode's "all" would repeat it
            yield k, "all", grp
        for mode, sub in grp.groupby("mode_g", sort=True):
            yield k, mode, sub


def transfer_table(m: pd.DataFrame) -> list[dict]:
    """Per ordered pair of sides (source, target) and mode: cost over every matched workload, and apart
    over those where the source's winner is separated."""
    out = []
    if m.empty:
        return out
    for (g, h), mode, grp in _by_mode(m, ["side_g", "side_h"]):
        out.append({"source": g, "target": h, "mode": mode, "all": _summary(grp),
                    "separated": _summary(grp[grp["separated_g"]])})
    return out


def pooled_table(m: pd.DataFrame, side: str = "(all)") -> list[dict]:
    """The costs of every ordered pair pooled, per mode and over all modes, as transfer_table's rows
    with `side` for source and target and `pairs` the ordered pairs pooled: a study's one figure of how
    far a winner travels. Only with two or more ordered pairs (one pair's row is the pool)."""
    if m.empty or m[["side_g", "side_h"]].drop_duplicates().shape[0] < 2:
        return []
    out = []
    modes = [("all", m)] if m["mode_g"].nunique() > 1 else []
    for mode, grp in modes + list(m.groupby("mode_g", sort=True)):
        out.append({"source": side, "target": side, "mode": mode, "all": _summary(grp),
                    "separated": _summary(grp[grp["separated_g"]]),
                    "pairs": int(grp[["side_g", "side_h"]].drop_duplicates().shape[0])})
    return out


def _same(m: pd.DataFrame, col: str) -> bool:
    def text(c: pd.Series) -> pd.Series:  # missing on both sides is the same (unknown) value
        return c.astype(object).where(c.notna(), "-").astype(str)

    return f"{col}_g" in m.columns and bool((text(m[f"{col}_g"]) == text(m[f"{col}_h"])).all())


def pair_table(m: pd.DataFrame, by_environment: bool = True) -> list[dict]:
    """Per unordered pair of sides and mode: the winner-change rate over matched workloads and over
    those separated on both sides, with n; `too_small` below MIN_RATE_N separated workloads;
    `same_model` when every compared workload ran on one device model on both sides, and
    `noise_floor` when the toolkit was the same too and the sides are stores or GPUs
    (`by_environment`): they differ by nothing the analysis can name, so their change rate is the
    method's own."""
    out = []
    if m.empty:
        return out
    m = m[m["side_g"] < m["side_h"]]
    for (a, b), mode, grp in _by_mode(m, ["side_g", "side_h"]):
        changed = grp["backend_g"] != grp["backend_h"]
        sep = grp["separated_g"] & grp["separated_h"]
        n_sep = int(sep.sum())
        same_model = _same(grp, "device_name")
        out.append({"a": a, "b": b, "mode": mode, "shared": int(len(grp)), "changed": int(changed.sum()),
                    "rate": float(changed.mean()) if len(grp) else None, "separated": n_sep,
                    "changed_separated": int((changed & sep).sum()),
                    "rate_separated": float((changed & sep).sum() / n_sep) if n_sep else None,
                    "too_small": n_sep < MIN_RATE_N, "same_model": same_model,
                    "noise_floor": by_environment and same_model and _same(grp, "torch_version"),
                    "host_bound": int((grp["host_bound_g"] | grp["host_bound_h"]).sum()),
                    "clock_low": int((grp["clock_low_g"] | grp["clock_low_h"]).sum())})
    return out


def changes(m: pd.DataFrame) -> list[dict]:
    """Every matched workload whose winner differs between two sides (each unordered pair once): both
    winners, whether each was separated, and the cost of a's winner on b."""
    if m.empty:
        return []
    d = m[(m["side_g"] < m["side_h"]) & (m["backend_g"] != m["backend_h"])]
    out = []
    for r in d.to_dict(orient="records"):
        rec = {"a": r["side_g"], "b": r["side_h"], **{c: r[f"{c}_g"] for c in _SHOWN if f"{c}_g" in r},
               "winner_a": r["backend_g"], "winner_b": r["backend_h"], "separated_a": bool(r["separated_g"]),
               "separated_b": bool(r["separated_h"]), "cost_a_on_b": None if pd.isna(r["cost"]) else float(r["cost"])}
        out.append({k: (v.item() if hasattr(v, "item") else v) for k, v in rec.items()})
    return out
