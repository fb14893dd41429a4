"""Warm-up until the per-call time has stopped drifting (a JIT, an autotuner, clocks settling), with a cap."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from .device import sync as _sync

# Warm-up has settled when two consecutive rounds' per-call times differ by at most this: half of
# timing.TREND_LIMIT, so the drift warm-up lets through stays below what the samples' trend flags, and
# above the noise of two means over milliseconds of calls, so a stable kernel is not held back.
WARMUP_TOLERANCE = 0.05
# the shortest round, and its fewest calls: a sync's latency (~10 µs) stays under 1% of a round
WARMUP_ROUND_S, WARMUP_ROUND_CALLS = 0.002, 3


@dataclass
class Warmup:
    rounds: list[tuple[int, float]] = field(default_factory=list)  # (calls, µs) of each round
    settled: bool = False  # the last two rounds agreed within WARMUP_TOLERANCE

    def per_call_us(self, i: int = -1) -> float:
        calls, us = self.rounds[i]
        return us / calls


def warmup(step: Callable[[], Any], device: str, min_s: float, max_s: float) -> Warmup:
    """Call the step in rounds until the last two agree on the per-call time within WARMUP_TOLERANCE
    and min_s has passed, or until the next round would end past max_s (settled stays False).

    A round is back-to-back calls between two synchronisations, timed by the host clock: what an
    eager sample measures, without a sync per call (its latency would dilute a µs kernel's drift).
    Round one is 3 calls; each later one, sized from the one before, lasts at least half the
    warm-up so far, so the last round spans its last third and a drift as slow as the warm-up
    shows between two rounds. Round two aims at half of min_s and round three at the rest: a
    kernel stable from its first call stops after 3 rounds and about min_s."""
    w = Warmup()
    _sync(device)
    t0 = time.perf_counter()
    elapsed = 0.0
    while not w.settled:
        calls = WARMUP_ROUND_CALLS
        if w.rounds:
            target = max(WARMUP_ROUND_S, elapsed / 2, min_s / 2 if len(w.rounds) == 1 else min_s - elapsed)
            # sized for calls up to WARMUP_TOLERANCE faster than the last round's, so a round that
            # settles lasts its target (and reaches min_s when aimed at it)
            calls = max(calls, math.ceil(target * 1e6 / (w.per_call_us() * (1 - WARMUP_TOLERANCE))))
            if elapsed + calls * w.per_call_us() / 1e6 > max_s:
                break  # a shorter round would compare samples too close together to see the drift
        r0 = time.perf_counter()
        for _ in range(calls):
            step()
        _sync(device)
        end = time.perf_counter()
        w.rounds.append((calls, max((end - r0) * 1e6, 1e-3)))
        elapsed = end - t0
        if len(w.rounds) >= 2 and elapsed >= min_s:
            w.settled = abs(w.per_call_us() / w.per_call_us(-2) - 1) <= WARMUP_TOLERANCE
    return w
