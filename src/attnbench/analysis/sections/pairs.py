"""Section `pairs`: how often the winner changes between two sides, and every workload where it does."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from ..transfer import changes, pair_table
from .basis import Basis

NAME = "pairs"


@dataclass(frozen=True)
class Pair:
    """One unordered pair of sides and mode ('all': every mode): winner changes over the matched workloads
    and over those separated on both sides (analysis/transfer.py pair_table)."""

    a: str
    b: str
    mode: str
    shared: int  # matched workloads
    changed: int  # of those, with another winner
    rate: float | None
    separated: int  # matched workloads separated on both sides
    changed_separated: int
    rate_separated: float | None
    too_small: bool  # fewer than transfer.MIN_RATE_N separated: too few to read as a rate
    same_model: bool  # one device model on both sides
    noise_floor: bool  # one device model and toolkit, sides being stores or GPUs: the method's own noise
    host_bound: int
    clock_low: int


@dataclass(frozen=True)
class Pairs:
    """`rows`: per pair of sides and mode; `changes`: every matched workload whose winner differs (records of
    transfer.changes: a, b, the workload's axes, winner_a, winner_b, separated_a, separated_b, cost_a_on_b)."""

    rows: list[Pair]
    changes: list[dict]

    @property
    def noise_floor(self) -> list[Pair]:
        """The pairs that differ by nothing the analysis can name: their changes are the method's noise."""
        return [p for p in self.rows if p.noise_floor]

    def to_json(self) -> dict:
        return {"rows": [asdict(p) for p in self.rows], "noise_floor": [asdict(p) for p in self.noise_floor],
                "changes": self.changes}


def compute(b: Basis, done: dict) -> Pairs:
    rows = pair_table(b.matched, by_environment=b.by in ("label", "device_name", "device_uuid"))
    return Pairs([Pair(**r) for r in rows], changes(b.matched))
