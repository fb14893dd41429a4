"""The counters phase's values between the worker and the store (issue 39): the step (runner/steps.py counters)
puts the collected counters beside the attempt's values under COUNTERS_KEY; the sink (runner/sink.py) splits
them off and writes them as the attempt's counters row (store/counters.py). They never change its status."""
from __future__ import annotations

COUNTERS_KEY = "counters"


def split(measured: dict) -> tuple[dict, dict | None]:
    """(the attempt's own values, the collected counters or None) of a worker's values."""
    if COUNTERS_KEY not in measured:
        return measured, None
    rest = dict(measured)
    return rest, rest.pop(COUNTERS_KEY)
