"""Plausibility gates on a timed attempt: no impossible time is ever OK.

Two rules turn an OK attempt into IMPLAUSIBLE (its samples are then not reported), and the
attempt applies a third (answered_from_cache) before it is OK:
- the timer saw less than the work: the median per call is below TIMER_FLOOR x the device time of
  one call's kernels, which the dispatch probe read from the profiler's trace on every stream
  (work left on another stream, or outside a captured CUDA graph, is missed by the events but not
  by the trace);
- the device cannot do it: FLOP/s above CEILING_MARGIN (a CPU: CPU_CEILING_MARGIN) x the fastest
  matmul the run measured on the device (any dtype), or modelled bytes/s above CEILING_MARGIN x its measured read bandwidth
  when the bytes cannot sit in L2 (a GPU whose L2 size is known).
They also derive timed_over_kernel and host_bound for every timed CUDA row."""
from __future__ import annotations

import statistics

from ..status import Status

# The events around k calls cannot take less than the calls' kernels did: graph replay adds
# nothing between kernels and eager adds launch gaps. What can make a true median fall a little
# under the probe's single call is a clock or L2 difference between the two moments (throttled
# rows moved by up to 13% minutes apart on the H200), so the floor leaves 30%.
TIMER_FLOOR = 0.7
# Measured ceilings are timed one way (one 8192^3 matmul, one 2 GiB reduction) and a kernel can
# beat them modestly (decode read 4.44 TB/s of modelled traffic against a 4.2 TB/s reduction on the
# H200); 1.5x above them is no measurement error.
CEILING_MARGIN = 1.5
# A CPU's ceilings come from one 512^3 matmul per dtype on a host others share: on a 2-core CI host
# they moved 17-63 GFLOP/s (fp32) and 34-750 GFLOP/s (bf16) from one measurement to the next. Only
# an order of magnitude above the fastest is beyond doubt there.
CPU_CEILING_MARGIN = 10.0
# An eager row whose median is more than this multiple of its kernels' device time spends at least
# a third of its time outside the kernels (Python, dispatch, launch): its figure is the host's.
HOST_BOUND_RATIO = 1.5
# Modelled bytes smaller than this multiple of the L2 size may be served from L2 (warm), so HBM
# bandwidth bounds nothing.
L2_FACTOR = 2
# A call on new input values (the hard-input checks' and the recheck's, each after the inputs were
# rewritten in place) does the work whatever a backend remembers. When even the fastest of them
# takes this multiple of the timed median, and this many µs more, the timed calls did less than the
# work: they answered from a cache of earlier results. Both bounds leave room for what a real call
# on new values pays (a single call's launch and sync, a lower clock right after the checks, a
# cold cache): on a GPU tens of µs and some percent, against a prefill's milliseconds.
FRESH_RATIO = 5.0
FRESH_MARGIN_US = 2000.0


def flop_ceiling(ceilings: dict) -> float | None:
    """FLOP/s the device can do: its fastest measured matmul in any dtype (a kernel may compute in a
    faster precision than its inputs, as CPU kernels converting bf16 do)."""
    rates = [v for k, v in ceilings.items() if k.startswith("matmul_tflops_") and v]
    return max(rates) * 1e12 if rates else None


def judge(values: dict, ceilings: dict, l2_bytes: int | None, device_type: str = "cuda") -> dict:
    """The values with the gates applied: status and reason replaced when a rule fails, and the
    derived timed_over_kernel and host_bound."""
    samples = values.get("samples_us")
    if values.get("status") != Status.OK.value or not samples:
        return values
    out = dict(values)
    median = statistics.median(samples)
    if median <= 0:
        return _implausible(out, f"a median of {median:g} µs per call")
    kernel = values.get("kernel_us")
    if kernel:
        out["timed_over_kernel"] = median / kernel
        out["host_bound"] = values.get("launch") == "eager" and median > HOST_BOUND_RATIO * kernel
        if median < TIMER_FLOOR * kernel:
            return _implausible(out, f"timed {median:.3g} µs per call, but its kernels ran {kernel:.3g} µs of "
                                     f"device time in the probe ({median / kernel:.2g}x, floor {TIMER_FLOOR}x): the "
                                     "timer did not see the work (another stream, or outside the graph)")
    margin = CEILING_MARGIN if device_type == "cuda" else CPU_CEILING_MARGIN
    top = flop_ceiling(ceilings)
    rate = values["flops"] / (median * 1e-6) if values.get("flops") else None
    if top and rate and rate > margin * top:
        return _implausible(out, f"{rate / 1e12:.3g} TFLOP/s is {rate / top:.2g}x the device's measured matmul "
                                 f"ceiling ({top / 1e12:.3g} TFLOP/s; limit {margin:g}x)")
    read = ceilings.get("read_gbps")
    nbytes = values.get("bytes")
    # no cache size known (CPU): a cache-resident workload may legitimately beat DRAM bandwidth
    off_chip = l2_bytes is not None and (values.get("l2") == "cold" or (nbytes or 0) > L2_FACTOR * l2_bytes)
    if read and nbytes and off_chip:
        bw = nbytes / (median * 1e-6) / 1e9
        if bw > margin * read:
            return _implausible(out, f"{bw:.4g} GB/s of modelled traffic is {bw / read:.2g}x the device's measured "
                                     f"read bandwidth ({read:.4g} GB/s; limit {margin:g}x)")
    return out


def _implausible(values: dict, reason: str) -> dict:
    return {**values, "status": Status.IMPLAUSIBLE.value, "reason": reason}


def answered_from_cache(fresh_us: list[float], median_us: float, of: str = "the timed median") -> str | None:
    """Why the timed calls did not do the work, or None: the fastest call on new input values
    (`fresh_us`, one call each, synchronised) took FRESH_RATIO x `median_us` per call (`of` says
    whose median) and FRESH_MARGIN_US more."""
    if not fresh_us or not median_us or median_us <= 0:
        return None
    fastest = min(fresh_us)
    if fastest > FRESH_RATIO * median_us and fastest - median_us > FRESH_MARGIN_US:
        return (f"each call on new input values took at least {fastest:.4g} µs ({len(fresh_us)} calls), "
                f"{fastest / median_us:.3g}x {of} ({median_us:.4g} µs; limit {FRESH_RATIO:g}x and "
                f"{FRESH_MARGIN_US:g} µs more): the timed calls answered from a cache of earlier results")
    return None
