"""The bound of a row from its counters: which unit sets its time (memory, tensor, SFU, shared memory), none near
its limit (latency / occupancy), or the host; and measured DRAM bytes against the byte model."""
from __future__ import annotations

# A unit at or above this share of its peak sustained rate is the row's limit. PROVISIONAL: Nsight Compute's
# Speed-of-Light guidance reads a unit above ~60 % of peak as the limiter and one below as latency-bound
# (docs/method/counters.md); to be confirmed against the H200 rows of lab/h200_counters.sh.
LIMIT_PCT = 60.0
# (bound, counters field, what the evidence calls it), in the order a tie is broken
UNITS = (("memory", "dram_pct", "DRAM throughput"), ("tensor", "tensor_pct", "tensor pipe"),
         ("sfu", "xu_pct", "SFU (XU) pipe"), ("shared", "shared_pct", "shared-memory pipe"))
BOUNDS = ("memory", "tensor", "sfu", "shared", "latency", "host")


def classify(counters: dict, host_bound=None) -> tuple[str | None, str | None]:
    """(bound, evidence): the host when the attempt is host-bound (its eager median far above its kernels' time:
    runner/gates.py), else the unit nearest its peak when that is at least LIMIT_PCT, else latency / occupancy.
    (None, None) when the counters were not read; no bound (the evidence names the units) when some unit was not
    read (set bytes): the unit nearest its peak cannot then be known."""
    if counters.get("note") or not counters.get("kernels"):
        return None, None
    if host_bound is True or host_bound == 1:
        return "host", "host_bound: the eager median is more than 1.5x the kernels' device time"
    seen = [(counters[f], i, b, label) for i, (b, f, label) in enumerate(UNITS) if counters.get(f) is not None]
    if not seen:
        return None, None
    value, _, bound, label = max(seen, key=lambda s: (s[0], -s[1]))
    if len(seen) < len(UNITS):  # a smaller set (bytes): an unread unit may be nearer its peak, above or below 60 %
        unread = ", ".join(lb for _, f, lb in UNITS if counters.get(f) is None)
        return None, f"{label} {value:.0f} % of peak; not read: {unread}: no bound"
    if value >= LIMIT_PCT:
        return bound, f"{label} {value:.0f} % of peak (>= {LIMIT_PCT:.0f})"
    warps = counters.get("warps_active_pct")
    occ = f"; warps active {warps:.0f} %" if warps is not None else ""
    return "latency", f"no unit at {LIMIT_PCT:.0f} % of peak (highest: {label} {value:.0f} %){occ}"


def bytes_ratio(counters: dict, modelled) -> float | None:
    """Measured DRAM bytes (read + written) over the modelled bytes of the step; None where either is missing."""
    read, written = counters.get("dram_read_bytes"), counters.get("dram_write_bytes")
    try:
        modelled = float(modelled)
    except (TypeError, ValueError):
        return None
    if read is None or not modelled or modelled != modelled:
        return None
    return round((read + (written or 0.0)) / modelled, 3)
