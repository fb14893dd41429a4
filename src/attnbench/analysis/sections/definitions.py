"""Section `definitions`: the rules the numbers follow, written into the JSON so that it stands alone."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from ..stats import METHOD_NOTE, MIN_PAIRED, N_BOOT, SEPARATION_RATIO
from ..transfer import MIN_RATE_N
from .basis import Basis

NAME = "definitions"


@dataclass(frozen=True)
class Definitions:
    """Each rule in words (or its number), in the order the methodology page lists them."""

    time: str
    spread: str
    separated: str
    bootstrap: str
    min_paired_repeats: int
    cost: str
    min_rate_n: int

    def to_json(self) -> dict:
        return asdict(self)


def compute(b: Basis | None = None, done: dict | None = None) -> Definitions:
    return Definitions(
        time="median of per-repeat medians (a repeat: median of its raw samples)",
        spread="p5/p95/p99 of each repeat's raw samples, extreme over repeats",
        separated=f"ratio >= {SEPARATION_RATIO} and the 95% bootstrap lower bound of the ratio > 1",
        bootstrap=f"{N_BOOT} seeded draws; methods: " + "; ".join(f"{k}: {v}" for k, v in METHOD_NOTE.items()),
        min_paired_repeats=MIN_PAIRED,
        cost="T(target, workload, source's winner) / fastest time on the target; unavailable when the "
             "source's winner has no OK row on the target",
        min_rate_n=MIN_RATE_N)
