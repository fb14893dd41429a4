"""What every section of `analyze` reads, computed once: the sides, their lines and contests, the matched
winners and the measured ceilings."""
from __future__ import annotations

from dataclasses import asdict, dataclass, is_dataclass
from pathlib import Path

import pandas as pd

from ..ceilings import ceilings_by_device
from ..sides import BY_CHOICES, side_contests, side_lines, with_side
from ..transfer import costs


@dataclass(frozen=True)
class Basis:
    """The attempts of every store with their `side`, and what the sections share."""

    df: pd.DataFrame  # every attempt with `label` and `side` (sides.with_side)
    runs: dict[str, list[dict]]  # label -> the store's runs, oldest first
    paths: dict[str, Path]  # label -> the file it was read from
    by: str  # the axis compared across (sides.BY_CHOICES)
    include_references: bool  # accuracy references take part in the contests
    lines: pd.DataFrame  # per side × device × workload × backend: its time (sides.side_lines)
    won: pd.DataFrame  # one row per contest: its fastest contestant, runner-up and separation
    matched: pd.DataFrame  # each winner against the other sides' on a matched workload (transfer.costs)
    ceilings: dict  # (label, device_name) -> the latest measured ceilings of that store's device

    @classmethod
    def of(cls, df: pd.DataFrame, runs: dict[str, list[dict]], by: str = "label",
           include_references: bool = False, paths: dict | None = None) -> "Basis":
        if by not in BY_CHOICES:
            raise ValueError(f"unknown --by {by!r}; use one of {', '.join(BY_CHOICES)}")
        df = with_side(df, by)
        lines = side_lines(df, by)
        won = side_contests(lines, by, include_references)
        matched = costs(won, lines, include_references) if not won.empty else pd.DataFrame()
        ceilings = {(label, device): c for label, rs in runs.items() for device, c in ceilings_by_device(rs).items()}
        return cls(df, runs, dict(paths or {}), by, include_references, lines, won, matched, ceilings)


@dataclass(frozen=True)
class RowList:
    """A section's result that is a list of records (dataclasses or dicts), one per table line: its JSON is
    that list. Sections with more structure declare their own to_json."""

    rows: list

    def to_json(self) -> list[dict]:
        return [asdict(r) if is_dataclass(r) else r for r in self.rows]
