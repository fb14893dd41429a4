"""Section `winners`: each contest's fastest contestant, and per side and mode how many leads are separated."""
from __future__ import annotations

from dataclasses import asdict, dataclass

import pandas as pd

from ..frames import records
from .basis import Basis

NAME = "winners"
ALL_SIDES = "(all)"  # the side of a row summarising every side
ALL = "all"  # the mode of a row summarising every mode
COLUMNS = ["side", "label", "device_name", "workload_key", "mode", "batch", "q_len", "kv_len", "q_heads",
           "kv_heads", "head_dim", "head_dim_v", "dtype", "causal", "causal_align", "layout", "launch", "l2",
           "backend", "kernel", "median_us", "p5_us", "p95_us", "p99_us", "repeats", "contestants", "runner_up",
           "runner_up_us", "ratio", "ratio_l95", "separation", "separated", "caveat", "host_bound", "clock_low",
           "runner_up_host_bound", "runner_up_clock_low"]


@dataclass(frozen=True)
class Separated:
    """One side and mode (or ALL_SIDES / ALL): how many of its contested leads are separated."""

    side: str
    mode: str
    contests: int  # workloads with a winner
    contested: int  # of those, with a runner-up
    separated: int  # of those, separated
    fraction: float | None  # separated / contested
    methods: dict  # separation method -> contests it decided (stats.METHOD_NOTE)
    host_bound: int  # host-bound winners
    clock_low: int  # winners timed at a low SM clock


@dataclass(frozen=True)
class Winners:
    separated: list[Separated]  # per side and mode, then over every side
    frame: pd.DataFrame  # one row per contest, the COLUMNS the contests hold

    def to_json(self) -> dict:
        rows = records(self.frame[[c for c in COLUMNS if c in self.frame.columns]]) if not self.frame.empty else []
        return {"separated": [asdict(s) for s in self.separated], "rows": rows}


def separated_summary(won: pd.DataFrame) -> list[Separated]:
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
            out.append(Separated(side, mode, int(len(g)), int(len(contested)), n_sep,
                                 n_sep / len(contested) if len(contested) else None,
                                 {k: int(v) for k, v in contested["separation"].value_counts().items()},
                                 int(g["host_bound"].sum()), int(g["clock_low"].sum())))
    return out


def compute(b: Basis, done: dict) -> Winners:
    return Winners(separated_summary(b.won), b.won)
