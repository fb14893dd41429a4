"""Section `correctness`: how far each backend's OK rows are from float64, per side and dtype."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from .basis import Basis, RowList

NAME = "correctness"


def number(v) -> float | None:
    return None if v is None or pd.isna(v) else float(v)


@dataclass(frozen=True)
class Checked:
    """One side, backend and dtype, over its OK rows."""

    side: str
    backend: str
    dtype: str
    rows: int  # OK rows
    checked: int  # of those, checked against float64 (imported rows were not)
    max_abs_err: float | None  # the largest
    min_cosine: float | None  # the lowest
    max_err_ratio: float | None  # error over the same-dtype unfused reference's: the largest
    median_err_ratio: float | None


@dataclass(frozen=True)
class Correctness(RowList):
    rows: list[Checked]


def compute(b: Basis, done: dict) -> Correctness:
    ok = b.df[b.df["status"] == "OK"]
    out = []
    for (side, backend, dtype), g in ok.groupby(["side", "backend", "dtype"], sort=True):
        err = pd.to_numeric(g["err_ratio"], errors="coerce")
        out.append(Checked(side, backend, dtype, int(len(g)), int(err.notna().sum()),
                           number(pd.to_numeric(g["max_abs_err"], errors="coerce").max()),
                           number(pd.to_numeric(g["cosine"], errors="coerce").min()), number(err.max()),
                           number(err.median())))
    return Correctness(out)
