"""The counters phase of an attempt (run --counters SET): after every gate has passed, so for OK attempts only,
and outside every timed sample, the attempt's step replayed under the collector (measure/counters.py). Its
result travels with the row's values as COUNTERS_KEY and becomes the attempt's counters row (store/counters.py);
it never changes the attempt's status."""
from __future__ import annotations

from ..measure import counters

COUNTERS_KEY = "counters"  # the worker's values carry the collected counters under this key (runner/sink.py)


def wanted(a) -> bool:
    return bool(a.spec.get("counters"))


def collect(a) -> None:
    """The collected counters (or the note saying why none were read) of the attempt's step; its cost is the
    row's phases_s["counters"]."""
    spec = {k: a.spec.get(k) for k in ("backend", "workload", "device", "seed", "inputs", "plugins")}
    a.res[COUNTERS_KEY] = counters.collect(spec, a.spec["counters"])


def split(measured: dict) -> tuple[dict, dict | None]:
    """(the attempt's own values, the collected counters or None) of a worker's values."""
    if COUNTERS_KEY not in measured:
        return measured, None
    rest = dict(measured)
    return rest, rest.pop(COUNTERS_KEY)
