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


HOST_PACE_SPREAD = 1.1  # runs whose hosts issue eager ops this much apart: host-bound eager rows compare hosts


def run_host(run: dict) -> tuple[set[str], list[float]]:
    """One run's host CPU models (provenance `host_cpu`) and paces (ceilings `host_op_us`: host µs to
    issue one small eager op), where recorded: the run's own, and each of its devices' (`devices`:
    several GPUs, or a Ray cluster's nodes, each measured where it runs)."""
    prov = run.get("provenance") or {}
    cpus, paces = set(), []
    if not isinstance(prov, dict):
        return cpus, paces
    for where in (prov, *(d for d in prov.get("devices") or [] if isinstance(d, dict))):
        if where.get("host_cpu"):
            cpus.add(str(where["host_cpu"]))
        pace = (where.get("ceilings") or {}).get("host_op_us")
        if pace:
            paces.append(float(pace))
    return cpus, paces


def sources(df: pd.DataFrame, runs_by_label: dict, paths: dict) -> list[dict]:
    out = []
    for label in runs_by_label:
        d = df[df["label"] == label]
        ids = set(d["run_id"])
        hosts = [run_host(r) for r in runs_by_label[label] if r.get("run_id") in ids]
        cpus = sorted(set().union(*(c for c, _ in hosts)))
        paces = [p for _, ps in hosts for p in ps]
        paced = sum(1 for _, ps in hosts if ps)  # runs from before it was recorded have none
        out.append({"label": label, "path": str(paths.get(label, "")), "attempts": int(len(d)),
                    "devices": sorted(d["device_name"].dropna().astype(str).unique().tolist()),
                    "torch_versions": sorted(d["torch_version"].dropna().astype(str).unique().tolist()),
                    "tags": sorted(d["tag"].dropna().astype(str).unique().tolist()),
                    "host_cpus": cpus, "host_op_us": [min(paces), max(paces)] if paces else None,
                    "runs": len(ids), "runs_paced": paced})
    return out


def host_pace_note(df: pd.DataFrame, srcs: list[dict]) -> dict | None:
    """Where the runs' hosts issue eager ops more than HOST_PACE_SPREAD apart: the spread and the
    host-bound eager OK rows, whose times are the host's as much as the device's (methodology 4.7)."""
    paces = [p for s in srcs if s["host_op_us"] for p in s["host_op_us"]]
    if len(paces) < 2 or max(paces) < HOST_PACE_SPREAD * min(paces):
        return None
    hb = pd.to_numeric(df.get("host_bound", pd.Series(dtype=float)), errors="coerce").fillna(0).astype(bool)
    rows = int(((df["status"] == "OK") & hb).sum())
    return {"spread": max(paces) / min(paces), "min_us": min(paces), "max_us": max(paces), "host_bound_rows": rows}


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
    srcs = sources(df, runs_by_label, paths or {})
    return {"by": by, "sources": srcs, "host_pace": host_pace_note(df, srcs), "definitions": definitions(),
            "winners": {"separated": separated_summary(won),
                        "rows": _records(won[[c for c in WINNER_COLS if c in won.columns]]) if not won.empty else []},
            "transfer": transfer_table(matched),
            "pairs": {"rows": pairs, "noise_floor": [p for p in pairs if p["noise_floor"]],
                      "changes": changes(matched)},
            "outcomes": outcomes(df), "dispatch": dispatch(df), "correctness": correctness(df),
            "efficiency": {"summary": efficiency_summary(eff), "rows": eff}}
