"""Every gate of an attempt in one place: what turns measured facts into a status other than OK.

The attempt's steps (runner/attempt.py lists them in order) stop at the first gate that decides:
- INCORRECT: the output failed the float64 check, on the first call, on hard inputs or on new values
  after timing, or a call wrote its inputs (an appending decode: anything but the new token's slot);
- DISPATCH_MISMATCH: the probe before or after timing saw other kernel families than the backend
  declares, or its kernels on another GPU;
- IMPLAUSIBLE, answered from a cache: calls on new values took far longer than the timed median,
  confirmed by two passes (of up to three, apart in time) of calls on new values each beside one on the
  same values again, every call after the same pause; the passes' calls are the row's evidence
  (check_detail["cache_gate"]), whichever way they decide.
The row's sink then applies judge() to an OK attempt: three rules turn it into IMPLAUSIBLE (its samples
are then not reported):
- the timer saw less than the work: the median per call is below TIMER_FLOOR x the device time of
  one call's kernels, which the dispatch probe read from the profiler's trace on every stream
  (work left on another stream, or outside a captured CUDA graph, is missed by the events but not
  by the trace);
- the device cannot do it: FLOP/s above CEILING_MARGIN (a CPU: CPU_CEILING_MARGIN) x the fastest
  matmul the run measured on the device (any dtype), or modelled bytes/s above CEILING_MARGIN x its measured read bandwidth
  when the bytes cannot sit in L2 (a GPU whose L2 size is known);
- above the clock's ceilings (clock_ceilings): FLOP/s above CLOCK_PEAK_MARGIN x the dtype's dense tensor peak at
  the highest SM clock read while it was timed, or modelled bytes/s above the DRAM's theoretical bandwidth.
They also derive timed_over_kernel and host_bound for every timed CUDA row, and peak_tflops_clock,
pct_peak_clock and pct_read where their ceilings are known."""
from __future__ import annotations

import statistics

from ..measure import dispatch, peaks
from ..status import Status
from . import checks

Decision = tuple[Status, str]  # a gate's verdict: the attempt's status and reason

# The events around k calls cannot take less than the calls' kernels did: graph replay adds
# nothing between kernels and eager adds launch gaps. What can make a true median fall a little
# under the probe's single call is a clock or L2 difference between the two moments (throttled
# rows moved by up to 13% minutes apart on the H200), so the floor leaves 30%.
TIMER_FLOOR = 0.7
# Measured ceilings are timed one way (one 8192^3 matmul, one 2 GiB reduction) and a kernel can
# beat them modestly (decode read 4.44 TB/s of modelled traffic against a 4.2 TB/s reduction on the
# H200); 1.5x above them is no measurement error.
CEILING_MARGIN = 1.5
# issue 39.4. A row's FLOP/s against its dtype's dense tensor peak at the highest SM clock NVML read in its timed
# window (measure/peaks.py). No attention kernel comes near it (cuDNN's H200 forward: 615 TFLOP/s at ~1625 MHz,
# 70% of that clock's 878; FlashAttention-3's paper: 75%), so a row above it has a wrong FLOP model or a timer
# that missed work. The 5% covers a clock between readings above every reading (NVML reads between sample
# batches; the power cap moved the H200's clock within 1620-1755 MHz, 8%, and the highest reading is used).
CLOCK_PEAK_MARGIN = 1.05
# Modelled bytes are a floor of the traffic (every operand once), so modelled bytes/s above the DRAM's theoretical
# bandwidth (bus width x memory clock x 2, NVML) cannot be; 2% covers the timer's noise on a row of µs. Where NVML
# does not give it, 1.15x the measured read ceiling stands in (the H200's 4.8 TB/s datasheet over its 4.2 TB/s
# reduction). Between 100% of the measured read ceiling and this, a row is real but named (pct_read > 100).
DRAM_PEAK_MARGIN = 1.02
READ_MARGIN = 1.15
# A CPU's ceilings come from one 512^3 matmul per dtype on a host others share: on a 2-core CI host
# they moved 17-63 GFLOP/s (fp32) and 34-750 GFLOP/s (bf16) from one measurement to the next. Only
# an order of magnitude above the fastest is beyond doubt there.
CPU_CEILING_MARGIN = 10.0
# An eager row whose median is more than this multiple of its kernels' device time spends at least
# a third of its time outside the kernels (Python, dispatch, launch): its figure is the host's.
HOST_BOUND_RATIO = 1.5
# A call on new input values (the hard-input checks' and the recheck's, each after the inputs were
# rewritten in place) does the work whatever a backend remembers. When even the fastest of them
# takes this multiple of the timed median, and this many µs more, the timed calls did less than the
# work: they answered from a cache of earlier results. Both bounds leave room for what a real call
# on new values pays (a single call's launch and sync, a lower clock right after the checks, a
# cold cache): on a GPU tens of µs and some percent, against a prefill's milliseconds.
FRESH_RATIO = 5.0
FRESH_MARGIN_US = 2000.0
# A suspected cache is confirmed before it is named (steps.confirm_cache): passes of three rounds, each a
# call on new values and one on the same values again, until CONFIRM_AGREE passes say the same (at most
# CONFIRM_PASSES). A host's burst of load (a neighbour compiling, a preempted call) that made the first
# pass look like a cache rarely lasts PASS_GAP_S into the next one, while a cache answers the same way in
# every pass. Every confirmation call comes SETTLE_S after the device is idle: on a loaded 2-core host, a
# jax-xla call right after the inputs were rewritten ran 6.4x slower than the same call a moment later
# (the refill's thread pools still busy), which the first pass read as a cache.
CONFIRM_PASSES = 3
CONFIRM_AGREE = 2
PASS_GAP_S = 0.25
SETTLE_S = 0.1


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
    if read and nbytes and peaks.off_chip(values.get("l2"), nbytes, l2_bytes):
        out["pct_read"] = peaks.pct_read(nbytes, median, read)
        bw = nbytes / (median * 1e-6) / 1e9
        if bw > margin * read:
            return _implausible(out, f"{bw:.4g} GB/s of modelled traffic is {bw / read:.2g}x the device's measured "
                                     f"read bandwidth ({read:.4g} GB/s; limit {margin:g}x)")
    return clock_ceilings(out, ceilings, rate, out.get("pct_read"))


def clock_ceilings(out: dict, ceilings: dict, rate: float | None, pct_read: float | None) -> dict:
    """issue 39.4: the row's dense tensor peak at the highest SM clock read in its timed window
    (peak_tflops_clock, pct_peak_clock), and IMPLAUSIBLE above CLOCK_PEAK_MARGIN x it, or above the DRAM's
    theoretical bandwidth (x DRAM_PEAK_MARGIN; READ_MARGIN x the measured read ceiling where NVML did not
    give it). Between 100% of the measured read ceiling and that limit the row stays OK with pct_read above
    100, which show and analyze name (a kernel may stream better than torch's reductions)."""
    peak = peaks.tflops_at(ceilings, out.get("dtype") or "", out.get("sm_clock_max_mhz"))
    if peak:
        out["peak_tflops_clock"] = peak
        if rate:
            out["pct_peak_clock"] = peaks.pct_peak(rate, peak)
            if rate > CLOCK_PEAK_MARGIN * peak * 1e12:
                return _implausible(out, f"{rate / 1e12:.4g} TFLOP/s is {out['pct_peak_clock']:.0f}% of the dense "
                                         f"{out.get('dtype')} peak at the highest SM clock read while it was timed "
                                         f"({peak:.4g} TFLOP/s at {out['sm_clock_max_mhz']:g} MHz; limit "
                                         f"{100 * CLOCK_PEAK_MARGIN:.0f}%)")
    if pct_read is not None:
        read, dram = ceilings["read_gbps"], peaks.dram_peak(ceilings)  # None: not given, or a misread
        limit, what = ((DRAM_PEAK_MARGIN * dram, f"the DRAM's theoretical {dram:.4g} GB/s (NVML)") if dram else
                       (READ_MARGIN * read, f"{READ_MARGIN:g}x the measured read ceiling"))
        bw = pct_read * read / 100
        if bw > limit:
            return _implausible(out, f"{bw:.4g} GB/s of modelled traffic is {pct_read:.0f}% of the measured read "
                                     f"ceiling ({read:.4g} GB/s) and above {what}: no kernel reads faster")
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


# ---- the attempt's gates, in the order its steps reach them (each reads the steps' context, steps.Attempt)
def first_call(a) -> Decision | None:
    """INCORRECT when the first call wrote its inputs (said first) or its output failed the check."""
    why = checks.mutated(a, "the first call")
    if why or not a.verdict.passed:
        return Status.INCORRECT, why or a.verdict.reason
    return None


def hard_inputs(a) -> Decision | None:
    """INCORRECT when a hard distribution failed, or the inputs are not as drawn after their refill."""
    why = a.why or checks.mutated(a, "the hard-input check", stepped=False)
    return (Status.INCORRECT, why) if why else None


def dispatched(a) -> Decision | None:
    """DISPATCH_MISMATCH when the probe before timing saw other kernels than declared, or elsewhere."""
    return _dispatch(a, a.probe, "")


def after_timing(a) -> Decision | None:
    """INCORRECT when the timed calls wrote their inputs."""
    why = checks.mutated(a, "timing")
    return (Status.INCORRECT, why) if why else None


def dispatched_late(a) -> Decision | None:
    """DISPATCH_MISMATCH when the calls after timing took another path."""
    return _dispatch(a, a.late, "after timing: ")


def rechecked(a) -> Decision | None:
    """INCORRECT when the timed path, on new values after timing, failed the check."""
    return (Status.INCORRECT, a.why) if a.why else None


def counters_requested(a) -> bool:
    """Whether the run asked for the counters phase (run --counters; issue 39)."""
    return bool(a.spec.get("counters"))


def cache_suspected(a) -> bool:
    """Whether the calls on new values (a.fresh) were slow enough against the timed median to suspect
    that the timed calls answered from a cache (to be confirmed at one moment: not_from_cache)."""
    samples = a.timed.samples_us
    return bool(answered_from_cache(a.fresh, statistics.median(samples) if samples else 0.0))


def pass_says_cache(fresh_us: list[float], same_us: list[float]) -> bool:
    """One confirmation pass: calls on new values (`fresh_us`) against calls on the same values again."""
    return bool(answered_from_cache(fresh_us, statistics.median(same_us) if same_us else 0.0))


def cache_settled(passes: list[dict]) -> bool:
    """Whether the confirmation passes so far decide (CONFIRM_AGREE of them say the same), or none are left."""
    said = sum(p["cache"] for p in passes)
    return said >= CONFIRM_AGREE or len(passes) - said >= CONFIRM_AGREE or len(passes) >= CONFIRM_PASSES


def not_from_cache(a) -> Decision | None:
    """IMPLAUSIBLE when CONFIRM_AGREE confirmation passes (calls on new values, each beside one on the same
    values again) say the timed calls answered from a cache."""
    if a.same is None:
        return None
    passes = a.cache_passes or [{"new_us": a.fresh, "same_us": a.same, "cache": pass_says_cache(a.fresh, a.same)}]
    confirming = [p for p in passes if p["cache"]]
    if len(confirming) < min(CONFIRM_AGREE, len(passes)):
        return None
    last = confirming[-1]
    why = (answered_from_cache(last["new_us"], statistics.median(last["same_us"]),
                               "the same calls repeated on those values")
           or "calls on new input values were many times slower than the same calls repeated on those values: the "
              "timed calls answered from a cache of earlier results")
    return Status.IMPLAUSIBLE, (f"{why}; in {len(confirming)} of {len(passes)} passes {PASS_GAP_S:g} s apart, each "
                                f"call {SETTLE_S * 1e3:g} ms after the device was idle (every call: "
                                "check_detail.cache_gate)")


# issue 42.2, after fresh-input timing: a pass of pairs (measure/timing.py repeat_check: per pair the fastest of
# a few samples on new values beside the fastest on the last values written again, interleaved) says cache when
# the median of its pairs' ratios (new / again) is REPEAT_RATIO or more and the rewritten values were faster in
# REPEAT_SHARE of its pairs or more. A cache keyed on the inputs makes every rewritten call faster: the fakes'
# identity and version caches 91-358x, a value cache that still runs half the KV ~2x, less where its own
# fingerprint of the inputs (read on the host: a sync inside every call) costs about as much as the attention
# (a decode's KV summed in every eager call: (1 + 1) / (1 + 0.5) = 1.33x; an H200 eager decode's value cache
# passed the 1.5x once asked of the fastest samples). On a loaded 2-core host (load average 8-11) an honest
# kernel's samples ran 10-24 ms for a ~20 us call, the fastest of 15 of each kind up to 3.5x apart: the fastest
# cannot judge there. The median of paired ratios can, and under noise that favours neither kind the rewritten
# values are faster in about half the pairs, not in 80% (20 or more of 25 by chance: 0.2%; in two passes ~1e-5).
# A pass that says cache is measured again, as the cache gate is (CONFIRM_PASSES, CONFIRM_AGREE, PASS_GAP_S
# apart): IMPLAUSIBLE takes two passes of up to three (tests/test_repeat_gate.py: an honest kernel under load
# never accused in 1000 runs per load, where the fastest-of-15 rule was wrong in more than one in ten).
REPEAT_RATIO = 1.25
REPEAT_SHARE = 0.8
# A smaller effect that holds in nearly every pair says cache too: the H200's eager value cache of a B1 N2048 H8
# prefill (its host fingerprint about as long as the attention) read 1.20x, faster in 96% of 25 pairs. Under
# noise that favours neither kind, 23 or more of 25 pairs by chance is ~1e-5 per pass (two passes: ~1e-10).
REPEAT_RATIO_STEADY = 1.1
REPEAT_SHARE_STEADY = 0.92


def repeat_pass(new_us: list[float], again_us: list[float]) -> dict:
    """One pass's figures: the median of its pairs' ratios (new / again), the share of pairs whose rewritten
    values were faster, and whether it says cache (both at or above REPEAT_RATIO and REPEAT_SHARE, or the
    steadier pair REPEAT_RATIO_STEADY and REPEAT_SHARE_STEADY)."""
    pairs = [(n, g) for n, g in zip(new_us or (), again_us or ()) if n > 0 and g > 0]
    if not pairs:
        return {"ratio": None, "faster_share": None, "cache": False}
    ratio = statistics.median(n / g for n, g in pairs)
    share = sum(g < n for n, g in pairs) / len(pairs)
    return {"ratio": round(ratio, 3), "faster_share": round(share, 3),
            "cache": (ratio >= REPEAT_RATIO and share >= REPEAT_SHARE)
            or (ratio >= REPEAT_RATIO_STEADY and share >= REPEAT_SHARE_STEADY)}


def repeat_settled(passes: list[dict]) -> bool:
    """Whether the same-values passes so far decide: a first pass that does not say cache clears at once; one
    that does is measured again until CONFIRM_AGREE passes say the same (at most CONFIRM_PASSES)."""
    if not passes:
        return False
    return not passes[0]["cache"] or cache_settled(passes)


def fresh_inputs_on(a) -> bool:
    """Whether the attempt's timed calls saw fresh input values (the same-values comparison then runs)."""
    return bool(a.w.fresh_inputs)


def repeated_values(a) -> Decision | None:
    """IMPLAUSIBLE when, after fresh-input timing, CONFIRM_AGREE passes of the same-values comparison said cache:
    the timed path was REPEAT_RATIO x faster (median of paired ratios, rewritten values faster in REPEAT_SHARE of
    the pairs) on the last values written again (same tensors, versions and values: measure/inputs.py Refresher.
    again) than on new values: the kernel answers from a cache of its inputs. Its fresh samples are its real
    time, but a user's repeated calls would not see that time."""
    seen = ((a.res.get("check_detail") or {}).get("fresh_inputs") or {})
    passes = seen.get("passes") or []
    confirming = [p for p in passes if p.get("cache")]
    if len(confirming) < CONFIRM_AGREE:
        return None
    last = confirming[-1]
    return Status.IMPLAUSIBLE, (
        f"on values it had just seen (written again) the timed path was {last['ratio']:.3g}x faster than on new "
        f"values (median of {len(last['new_us'])} paired ratios, faster in {last['faster_share']:.0%} of the pairs; "
        f"limit {REPEAT_RATIO:g}x in {REPEAT_SHARE:.0%}, or {REPEAT_RATIO_STEADY:g}x in {REPEAT_SHARE_STEADY:.0%}), "
        f"in {len(confirming)} of {len(passes)} passes "
        f"{PASS_GAP_S:g} s apart: it answers from a cache of its inputs (fresh inputs; check_detail.fresh_inputs)")


def _dispatch(a, probe, prefix: str) -> Decision | None:
    from ..backends.base import CONTESTANT

    if probe.status != "probed":
        return None
    expected, side = a.expected(), a.side()
    why = (dispatch.mismatch(expected, probe.families, a.classifier.attention, probe, side)
           or dispatch.elsewhere(probe, a.device)
           # issue 40: an fp8 contestant's kernels ran in 16-bit (an emulator, a reference, computes wider)
           or (dispatch.not_fp8(a.w.dtype, probe, a.device) if a.backend.role == CONTESTANT else None))
    return (Status.DISPATCH_MISMATCH, f"{prefix}{why}") if why else None
