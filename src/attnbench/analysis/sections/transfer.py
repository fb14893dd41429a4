"""Section `transfer`: the cost of one side's winner on another, per ordered pair of sides and mode."""
from __future__ import annotations

from dataclasses import dataclass

from ..transfer import transfer_table
from .basis import Basis

NAME = "transfer"


@dataclass(frozen=True)
class Transfer:
    """Records of analysis/transfer.py transfer_table: source, target, mode, and for `all` matched
    workloads and the `separated` ones each n, unavailable, compared, median, p95, max and the cost
    distribution (bin -> workloads)."""

    rows: list[dict]

    def to_json(self) -> list[dict]:
        return self.rows

    def pairs(self) -> set[tuple[str, str]]:
        """The ordered pairs of sides compared."""
        return {(r["source"], r["target"]) for r in self.rows}


def compute(b: Basis, done: dict) -> Transfer:
    return Transfer(transfer_table(b.matched))
