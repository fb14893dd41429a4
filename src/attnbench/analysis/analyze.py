"""`analyze`: winners, their separation, transfer costs and winner changes across sides, and the side tables."""
from __future__ import annotations

import pandas as pd

from .ceilings import ceilings_by_device
from .sides import BY_CHOICES, side_contests, side_lines, with_side
from .stats import METHOD_NOTE, MIN_PAIRED, N_BOOT, SEPARATION_RATIO
from .tables import _records, correctness, dispatch, efficiency, efficiency_summary, outcomes
from .transfer import MIN_RATE_N, changes, costs, pair_table, transfer_table

ALL_SIDES = "(all)"  # the side of a row summarising every side
ALL = "all"  # the mode of a row summarising every mode
WINNER_COLS = ["side", "label", "device_name", "workload_key", "mode", "batch", "q_len", "kv_len", "q_heads",
               "kv_heads", "head_dim", "head_dim_v", "dtype", "causal", "causal_align", "layout", "launch", "l2",
               "backend", "kernel", "median_us", "p5_us", "p95_us", "p99_us", "repeats", "contestants", "runner_up",
               "runner_up_us", "ratio", "ratio_l95", "separation", "separated", "caveat", "host_bound", "clock_low",
               "runner_up_host_bound", "runner_up_clock_low"]


def definitions() -> dict:
    """The rules the numbers follow, written into the JSON so that it stands alone."""
    return {"time": "median of per-repeat medians (a repeat: median of its raw samples)",
            "spread": "p5/p95/p99 of each repeat's raw samples, extreme over repeats",
            "separated": f"ratio >= {SEPARATION_RATIO} and the 95% bootstrap lower bound of the ratio > 1",
            "bootstrap": f"{N_BOOT} seeded draws; methods: " + "; ".join(f"{k}: {v}" for k, v in METHOD_NOTE.items()),
            "min_paired_repeats": MIN_PAIRED,
            "cost": "T(target, workload, source's winner) / fastest time on the target; unavailable when the "
                    "source's winner has no OK row on the target",
            "min_rate_n": MIN_RATE_N}


def separated_summary(won: pd.DataFrame) -> list[dict]:
    """Per side and mode, then over all sides: contests, those with a runner-up, how many of those are
    separated, the fraction, the separation methods used and the flagged winners."""
    out = []
    if won.empty:
        return out
    frames = [won, won.assign(side=ALL_SIDES)] if won["side"].nunique() > 1 else [won]
    for frame in frames:
        both = pd.concat([frame, frame.assign(mode=ALL)]) if frame["mode"].nunique() > 1 else frame
        for (side, mode), g in both.groupby(["side", "mode"], sort=True):
            contested = g[g["contestants"] > 1]
            n_sep = int(contested["separated"].sum())
            out.append({"side": side, "mode": mode, "contests": int(len(g)), "contested": int(len(contested)),
                        "separated": n_sep, "fraction": n_sep / len(contested) if len(contested) else None,
                        "methods": {k: int(v) for k, v in contested["separation"].value_counts().items()},
                        "host_bound": int(g["host_bound"].sum()), "clock_low": int(g["clock_low"].sum())})
    return out


def sources(df: pd.DataFrame, runs_by_label: dict, paths: dict) -> list[dict]:
    out = []
    for label in runs_by_label:
        d = df[df["label"] == label]
        out.append({"label": label, "path": str(paths.get(label, "")), "attempts": int(len(d)),
                    "devices": sorted(d["device_name"].dropna().astype(str).unique().tolist()),
                    "torch_versions": sorted(d["torch_version"].dropna().astype(str).unique().tolist()),
                    "tags": sorted(d["tag"].dropna().astype(str).unique().tolist())})
    return out


def analyze(df: pd.DataFrame, runs_by_label: dict[str, list[dict]], by: str = "label",
            include_references: bool = False, paths: dict | None = None) -> dict:
    """Every section of `analyze` as JSON-ready values; `df` holds the attempts of every store with its
    `label`, `runs_by_label` each store's runs (for the ceilings)."""
    if by not in BY_CHOICES:
        raise ValueError(f"unknown --by {by!r}; use one of {', '.join(BY_CHOICES)}")
    df = with_side(df, by)
    lines = side_lines(df, by)
    won = side_contests(lines, by, include_references)
    matched = costs(won, lines, include_references) if not won.empty else pd.DataFrame()
    ceilings = {(label, device): c for label, runs in runs_by_label.items()
                for device, c in ceilings_by_device(runs).items()}
    pairs = pair_table(matched, by_environment=by in ("label", "device_name", "device_uuid"))
    eff = efficiency(won, ceilings)
    return {"by": by, "sources": sources(df, runs_by_label, paths or {}), "definitions": definitions(),
            "winners": {"separated": separated_summary(won),
                        "rows": _records(won[[c for c in WINNER_COLS if c in won.columns]]) if not won.empty else []},
            "transfer": transfer_table(matched),
            "pairs": {"rows": pairs, "noise_floor": [p for p in pairs if p["noise_floor"]],
                      "changes": changes(matched)},
            "outcomes": outcomes(df), "dispatch": dispatch(df), "correctness": correctness(df),
            "efficiency": {"summary": efficiency_summary(eff), "rows": eff}}
