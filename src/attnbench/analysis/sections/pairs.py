"""Section `pairs`: how often the winner changes between two sides, and every workload where it does."""
from __future__ import annotations

from dataclasses import dataclass

from ..transfer import changes, pair_table
from .basis import Basis

NAME = "pairs"


@dataclass(frozen=True)
class Pairs:
    """`rows`: per unordered pair of sides and mode (analysis/transfer.py pair_table: a, b, mode, shared,
    changed, rate, separated, changed_separated, rate_separated, too_small, same_model, noise_floor,
    host_bound, clock_low); `changes`: every matched workload whose winner differs (transfer.changes)."""

    rows: list[dict]
    changes: list[dict]

    @property
    def noise_floor(self) -> list[dict]:
        """The pairs that differ by nothing the analysis can name: their changes are the method's noise."""
        return [p for p in self.rows if p["noise_floor"]]

    def to_json(self) -> dict:
        return {"rows": self.rows, "noise_floor": self.noise_floor, "changes": self.changes}


def compute(b: Basis, done: dict) -> Pairs:
    rows = pair_table(b.matched, by_environment=b.by in ("label", "device_name", "device_uuid"))
    return Pairs(rows, changes(b.matched))
