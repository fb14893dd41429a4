"""Section `outcomes`: attempts per side, device model and backend, counted per status."""
from __future__ import annotations

from dataclasses import dataclass

from ..frames import records
from .basis import Basis, RowList

NAME = "outcomes"


@dataclass(frozen=True)
class Outcomes(RowList):
    """One record per side, device_name and backend: the count of each status seen, and `attempts`."""

    rows: list[dict]

    def statuses(self) -> list[str]:
        """The status columns the records hold, by name."""
        return sorted({k for r in self.rows for k in r} - {"side", "device_name", "backend", "attempts"})


def compute(b: Basis, done: dict) -> Outcomes:
    df = b.df
    if df.empty:
        return Outcomes([])
    t = df.pivot_table(index=["side", "device_name", "backend"], columns="status", values="attempt_key",
                       aggfunc="count", fill_value=0)
    t["attempts"] = t.sum(axis=1)
    return Outcomes(records(t.reset_index()))
