"""How long a plan will take, from earlier runs of the same backends (run --dry-run), and how long the
rest of a running sweep will take (the progress bar's ETA)."""
from __future__ import annotations

import json
import statistics
from collections import Counter
from dataclasses import dataclass

from .planner import Attempt

DEFAULT_ATTEMPT_S = 10.0  # wall seconds of an attempt of a (backend, mode) with no earlier OK row


@dataclass
class Estimate:
    seconds: float  # wall time of the attempts to run, spread over the devices
    from_store: int  # attempts estimated from earlier OK rows of their (backend, mode)
    by_default: int  # attempts estimated at DEFAULT_ATTEMPT_S


def duration(seconds: float) -> str:
    """A duration as people read it: 42 s, 3.5 min, 2.1 h."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


LATER = "later"  # a key's third part: rows of repeats after the first (a run's compiler cache is warm by then)


def typical_wall(rows: list[dict]) -> dict[tuple, float]:
    """Median wall_s per (backend, mode) over earlier OK rows, and per (backend, mode, LATER) over those
    of repeats after the first: a process repeat compiles from the run's cache (about a third of the
    first repeat's compile time on the H200), so a later repeat of a compiling backend is shorter."""
    by: dict[tuple, list[float]] = {}
    for r in rows:
        if r.get("status") == "OK" and r.get("wall_s") is not None:
            by.setdefault((r["backend"], r["mode"]), []).append(float(r["wall_s"]))
            if (r.get("repeat") or 0) > 0:
                by.setdefault((r["backend"], r["mode"], LATER), []).append(float(r["wall_s"]))
    return {k: statistics.median(v) for k, v in by.items()}


def typical_sampled(rows: list[dict]) -> dict[tuple[str, str], float]:
    """Median sampled seconds (samples x calls) per (backend, mode) over earlier OK rows."""
    by: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        s = r.get("samples_us")
        if r.get("status") != "OK" or not s:
            continue
        s = json.loads(s) if isinstance(s, str) else s
        by.setdefault((r["backend"], r["mode"]), []).append(sum(s) * (r.get("calls_per_sample") or 1) / 1e6)
    return {k: statistics.median(v) for k, v in by.items()}


def estimate(attempts: list[Attempt], typical: dict[tuple, float], devices: int = 1,
             default_s: float = DEFAULT_ATTEMPT_S, min_time_s: float = 0.0,
             sampled: dict[tuple[str, str], float] | None = None) -> Estimate:
    """The attempts that will run (planned-out ones take no time), each at its (backend, mode)'s
    typical wall time (that of later repeats for a repeat after the first, where earlier rows have
    one), divided over the devices that run them in parallel. Under a floor of sampled
    time (--min-time), an attempt whose backend and mode sampled less than the floor before takes
    the difference longer. Worker start-up and the provenance are not included."""
    total, known, unknown = 0.0, 0, 0
    for a in attempts:
        if a.planned:
            continue
        key = (a.backend.name, a.workload.mode)
        t = lookup(_key(*key, a.repeat), typical)
        if t is None:
            unknown += 1
            t = default_s
        else:
            known += 1
            t += max(0.0, min_time_s - (sampled or {}).get(key, 0.0))
        total += t
    return Estimate(total / max(1, devices), known, unknown)


def _key(backend: str, mode: str, repeat: int) -> tuple:
    return (backend, mode, LATER) if repeat > 0 else (backend, mode)


def lookup(key: tuple, *tables: dict[tuple, float]) -> float | None:
    """A key's typical wall from the first table that has it; a later repeat's key (backend, mode,
    LATER) falls back to its first repeat's in every table; None when no table has either."""
    for k in (key, key[:2]) if len(key) == 3 else (key,):
        for table in tables:
            if k in table:
                return table[k]
    return None


class Remaining:
    """A running sweep's ETA: every attempt still to run at the typical wall of its (backend, mode), a
    later repeat's apart, over the devices. The typical wall is the median of this run's OK rows of
    that key as they arrive (the same machine, code and stopping rule), else of the store's earlier
    rows, else a later repeat's falls back to the first repeat's, else DEFAULT_ATTEMPT_S. (A rate over
    the last seconds misleads on a sweep that alternates compiles of seconds with attempts of a tenth
    of one: on the H200 it said 7.4 h for a rest of the portability grid that the store's walls put at 3.0 h.)"""

    def __init__(self, todo: list[Attempt], earlier: dict[tuple, float] | None = None, devices: int = 1,
                 default_s: float = DEFAULT_ATTEMPT_S):
        self.keys = {a.key: _key(a.backend.name, a.workload.mode, a.repeat) for a in todo}
        self.left = Counter(self.keys.values())
        self.earlier, self.devices, self.default_s = dict(earlier or {}), max(1, devices), default_s
        self.walls: dict[tuple, list[float]] = {}
        self.medians: dict[tuple, float] = {}  # of this run's walls, per key
        self._stale: set[tuple] = set()  # keys with walls newer than their median

    def row(self, row: dict) -> None:
        """A row was written: its attempt is done (rows of attempts not in the plan to run are ignored).
        Called for every row on the writer's path, so it only counts; seconds() works out the medians."""
        k = self.keys.pop(row.get("attempt_key"), None)
        if k is None:
            return
        self.left[k] -= 1
        if row.get("status") == "OK" and row.get("wall_s") is not None:
            self.walls.setdefault(k, []).append(float(row["wall_s"]))
            self._stale.add(k)

    def seconds(self) -> float:
        for k in self._stale:
            self.medians[k] = statistics.median(self.walls[k])
        self._stale.clear()
        total = 0.0
        for k, n in self.left.items():
            if n > 0:
                t = lookup(k, self.medians, self.earlier)
                total += n * (self.default_s if t is None else t)
        return total / self.devices
