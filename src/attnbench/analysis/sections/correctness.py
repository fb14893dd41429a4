"""Section `correctness`: how far each backend's OK rows are from float64, per side and dtype."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from .basis import Basis

NAME = "correctness"


def number(v) -> float | None:
    return None if v is None or pd.isna(v) else float(v)


@dataclass(frozen=True)
class Correctness:
    """Per side, backend and dtype over OK rows: `rows`, `checked` (imported rows were not), the largest
    `max_abs_err`, the lowest `min_cosine`, the largest and median error ratio against the same-dtype
    unfused reference (`max_err_ratio`, `median_err_ratio`)."""

    rows: list[dict]

    def to_json(self) -> list[dict]:
        return self.rows


def compute(b: Basis, done: dict) -> Correctness:
    ok = b.df[b.df["status"] == "OK"]
    out = []
    for (side, backend, dtype), g in ok.groupby(["side", "backend", "dtype"], sort=True):
        err = pd.to_numeric(g["err_ratio"], errors="coerce")
        out.append({"side": side, "backend": backend, "dtype": dtype, "rows": int(len(g)),
                    "checked": int(err.notna().sum()),
                    "max_abs_err": number(pd.to_numeric(g["max_abs_err"], errors="coerce").max()),
                    "min_cosine": number(pd.to_numeric(g["cosine"], errors="coerce").min()),
                    "max_err_ratio": number(err.max()), "median_err_ratio": number(err.median())})
    return Correctness(out)
