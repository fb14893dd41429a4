"""Section `transfer`: the cost of one side's winner on another, per ordered pair of sides and mode."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..transfer import pooled_table, transfer_table
from .basis import Basis, RowList
from .winners import ALL_SIDES

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
class PooledRow(TransferRow):
    """Every ordered pair's costs pooled (source and target ALL_SIDES)."""

    pairs: int = 0  # ordered pairs of sides pooled


@dataclass(frozen=True)
class Transfer(RowList):
    rows: list[TransferRow]
    # every ordered pair's costs pooled, per mode and over all (source and target ALL_SIDES); empty with
    # fewer than two ordered pairs. The JSON lists them after `rows`, as winners lists its ALL_SIDES rows.
    pooled: list[PooledRow] = field(default_factory=list)

    def pairs(self) -> set[tuple[str, str]]:
        """The ordered pairs of sides compared."""
        return {(r.source, r.target) for r in self.rows}

    def to_json(self) -> list[dict]:
        return [asdict(r) for r in [*self.rows, *self.pooled]]


def compute(b: Basis, done: dict) -> Transfer:
    rows = [TransferRow(r["source"], r["target"], r["mode"], Cost(**r["all"]), Cost(**r["separated"]))
            for r in transfer_table(b.matched)]
    pooled = [PooledRow(r["source"], r["target"], r["mode"], Cost(**r["all"]), Cost(**r["separated"]), r["pairs"])
              for r in pooled_table(b.matched, ALL_SIDES)]
    return Transfer(rows, pooled)
