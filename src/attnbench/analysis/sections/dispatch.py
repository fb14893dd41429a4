"""Section `dispatch`: the kernel families each backend was seen to run, and how often it ran another."""
from __future__ import annotations

from dataclasses import dataclass

from ..stats import json_list
from .basis import Basis

NAME = "dispatch"


@dataclass(frozen=True)
class Dispatch:
    """Per side and backend, over attempts that reached the dispatch probe: `reached`, the kernel
    `families` seen, `mismatch_pct` (DISPATCH_MISMATCH) and `probed_pct` (the rest: the profiler failed,
    or imported rows)."""

    rows: list[dict]

    def to_json(self) -> list[dict]:
        return self.rows


def compute(b: Basis, done: dict) -> Dispatch:
    df = b.df
    reached = df[df["dispatch_status"].notna() | (df["status"] == "DISPATCH_MISMATCH")]
    out = []
    for (side, backend), g in reached.groupby(["side", "backend"], sort=True):
        fams = sorted({f for v in g["dispatch_families"] for f in json_list(v) if isinstance(f, str)})
        out.append({"side": side, "backend": backend, "reached": int(len(g)), "families": fams,
                    "mismatch_pct": 100.0 * float((g["status"] == "DISPATCH_MISMATCH").mean()),
                    "probed_pct": 100.0 * float((g["dispatch_status"] == "probed").mean())})
    return Dispatch(out)
