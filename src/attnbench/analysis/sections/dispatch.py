"""Section `dispatch`: the kernel families each backend was seen to run, and how often it ran another."""
from __future__ import annotations

from dataclasses import dataclass

from ..dispatch_checked import unchecked
from ..stats import json_list
from .basis import Basis, RowList

NAME = "dispatch"


@dataclass(frozen=True)
class Seen:
    """One side and backend, over its attempts that reached the dispatch probe."""

    side: str
    backend: str
    reached: int  # attempts that got as far as the probe
    families: list[str]  # kernel families seen, sorted
    mismatch_pct: float  # % DISPATCH_MISMATCH
    probed_pct: float  # % actually probed (the rest: the profiler failed, or imported rows)
    unchecked: int = 0  # issue 42.2: OK rows no dispatch check stands behind (dispatch_checked 0; shown name?)


@dataclass(frozen=True)
class Dispatch(RowList):
    rows: list[Seen]


def compute(b: Basis, done: dict) -> Dispatch:
    df = b.df
    reached = df[df["dispatch_status"].notna() | (df["status"] == "DISPATCH_MISMATCH")]
    out = []
    for (side, backend), g in reached.groupby(["side", "backend"], sort=True):
        fams = sorted({f for v in g["dispatch_families"] for f in json_list(v) if isinstance(f, str)})
        out.append(Seen(side, backend, int(len(g)), fams, 100.0 * float((g["status"] == "DISPATCH_MISMATCH").mean()),
                        100.0 * float((g["dispatch_status"] == "probed").mean()), int(unchecked(g).sum())))
    return Dispatch(out)
