"""Section `transfer`: the cost of one side's winner on another, per ordered pair of sides and mode."""
from __future__ import annotations

from dataclasses import dataclass

from ..transfer import transfer_table
from .basis import Basis, RowList

NAME = "transfer"


@dataclass(frozen=True)
class Cost:
    """Transfer costs over a set of matched workloads (analysis/transfer.py)."""

    n: int  # matched workloads
    unavailable: int  # of those, where the source's winner has no OK row on the target
    compared: int  # the rest: a cost each
    median: float | None
    p95: float | None
    max: float | None
    distribution: dict  # cost bin (transfer.COST_BINS) -> workloads
    host_bound: int  # workloads with a host-bound winner on either side
    clock_low: int  # workloads with a winner timed at a low SM clock on either side


@dataclass(frozen=True)
class TransferRow:
    """One ordered pair of sides and mode ('all': every mode): costs over every matched workload, and over
    those whose source winner is separated."""

    source: str
    target: str
    mode: str
    all: Cost
    separated: Cost


@dataclass(frozen=True)
class Transfer(RowList):
    rows: list[TransferRow]

    def pairs(self) -> set[tuple[str, str]]:
        """The ordered pairs of sides compared."""
        return {(r.source, r.target) for r in self.rows}


def compute(b: Basis, done: dict) -> Transfer:
    return Transfer([TransferRow(r["source"], r["target"], r["mode"], Cost(**r["all"]), Cost(**r["separated"]))
                     for r in transfer_table(b.matched)])
