"""Dispatch probe: which kernels actually ran (torch.profiler), mapped to kernel families.

Library-specific families (a library's attention kernels) are declared by the backends that know
them (`Backend.kernel_patterns`); the library-neutral ones (GEMMs, Triton, Inductor) are matched
after every declared family (backends/kernels.py)."""
from __future__ import annotations

import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Callable, Iterable

from ..backends.kernels import GENERIC_FAMILIES, KernelFamily


class Classifier:
    """Kernel name -> family: the declared families in the order given (attention families first,
    so that a GEMM-like name inside an attention kernel's is not taken for a GEMM), then the
    generic ones. Two declarations of one family name match either pattern."""

    def __init__(self, declared: Iterable[KernelFamily] = ()):
        declared = list(declared)
        order = [f for f in declared if f.attention] + [f for f in declared if not f.attention]
        self._rules: list[tuple[str, re.Pattern]] = [(f.name, f.regex()) for f in order]
        self._rules += [(f.name, f.regex()) for f in GENERIC_FAMILIES]
        self.attention = frozenset(f.name for f in declared if f.attention)

    @classmethod
    def from_backends(cls, backends) -> "Classifier":
        return cls(f for b in backends for f in b.kernel_patterns)

    def family_of(self, name: str) -> str:
        for fam, pat in self._rules:
            if pat.search(name):
                return fam
        return "other"


@cache
def default_classifier() -> Classifier:
    """The families every built-in backend declares (plugins add theirs in the worker); built once
    per process."""
    from ..backends.registry import builtin

    return Classifier.from_backends(builtin())


# Device-side activities that are work of the call (a user's profiler range on the GPU is not).
_DEVICE_WORK = ("kernel", "gpu_memcpy", "gpu_memset")
# An undeclared path (recognised kernels of a family the backend does not declare: GEMMs, Triton,
# another library's attention) taking more than this share of the call's device time (CPU: self
# time) is a dispatch mismatch: the declared kernel may have run for a part of the work only.
# Correct built-in backends stay at 0 (docs/methodology.md); a fused kernel for one KV group of eight
# with GEMMs for the rest is far above.
MATERIAL_SHARE = 0.10
# The profiler range around each probed call: on CPU operators are told to a call by their start, on
# CUDA device work by the start of the host event it is linked to (the operator that launched it).
CALL_RANGE = "attnbench.probe.call"


@dataclass
class Probe:
    kernels: list[str] = field(default_factory=list)  # distinct names, most time first
    families: list[str] = field(default_factory=list)
    main_family: str | None = None  # the recognised family of the most device time (CPU: self time)
    kernel_us: float | None = None  # device time of one call's kernels, every stream (CUDA only)
    attention_family: str | None = None  # the attention family of the most device time
    shares: dict = field(default_factory=dict)  # family -> share of the calls' device time (CPU: self time)
    calls: int = 1  # calls profiled
    status: str = "unprobed"  # probed | unprobed
    error: str | None = None
    # CUDA: share of the calls' device time on each other GPU than the attempt's (by the profiler's
    # device index); empty when all of it ran on the attempt's GPU or that GPU's index is unknown
    elsewhere: dict = field(default_factory=dict)
    # CPU: `shares` of each call alone (its operators' self time inside its range). A host thread
    # descheduled inside one operator inflates that call's time of it only; a path that runs in every
    # call shows its share in the calls the stall spared. Empty on CUDA (kernels of all calls together).
    call_shares: list = field(default_factory=list)
    # CUDA: device time of each call's kernels, copies and memsets (µs, in call order); empty where
    # some of it could not be told to a call. How the calls differ (a first call after an idle GPU)
    # is what kernel_us, their mean, hides.
    call_kernel_us: list = field(default_factory=list)

    def to_record(self) -> dict:
        """The record columns this probe fills."""
        return {"dispatch_kernels": self.kernels, "dispatch_families": self.families, "kernel_us": self.kernel_us,
                "dispatch_main_family": self.main_family, "dispatch_attention_family": self.attention_family,
                "dispatch_status": self.status, "kernel_calls_us": self.call_kernel_us or None}


def probe(step: Callable[[], Any], device: str, classifier: Classifier | None = None, calls: int = 1) -> Probe:
    """Run `calls` calls under the profiler. On CUDA, the device's kernels, copies and memsets are
    read (a user's profiler range is not a kernel); on CPU, operators by self time (user ranges and
    Python frames are not operators)."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    classifier = classifier or default_classifier()
    cuda = device.startswith("cuda")
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    try:
        with profile(activities=acts) as prof:
            for _ in range(calls):
                with record_function(CALL_RANGE):
                    step()
            if cuda:
                torch.cuda.synchronize()
        events = list(prof.profiler.kineto_results.events())
    except Exception as e:  # a profiler that cannot run leaves the attempt unprobed, not failed
        return Probe(status="unprobed", error=f"{type(e).__name__}: {e}")
    work = _device_work(events) if cuda else []
    weight = _device_time(work, lambda e: e.name()) if cuda else _cpu_self_time(events)
    p = summarize(weight, classifier)
    p.calls = calls
    if not cuda:
        p.call_shares = [summarize(w, classifier).shares for w in _cpu_self_time_per_call(events)]
    else:
        total = sum(weight.values()) / 1e3 / calls  # ns -> us, per call
        p.kernel_us = total or None
        p.call_kernel_us = [round(ns / 1e3, 3) for ns in _device_time_per_call(events, work)]
        home = home_index(device)
        if home is not None:
            p.elsewhere = shares_elsewhere(_device_time(work, lambda e: e.device_index()), home)
    return p


def steady_kernel_us(first: float | None, late: float | None, calls: list[float] | None) -> float | None:
    """One call's kernel time as the timed calls meet it: the median of the probed calls' device times
    where each call's is known (the first call of a probe can meet an L2 holding what the checks
    before it read, or a GPU still at idle clocks; hidden work is in every call), else the smaller
    of the two probes' means (an unsplit probe)."""
    if calls:
        return float(statistics.median(calls))
    known = [v for v in (first, late) if v]
    return min(known) if known else None


@cache
def home_index(device: str) -> int | None:
    """The device index the profiler gives work on `device` (found once per process by profiling one
    small kernel there: how the profiler numbers GPUs is then no assumption); None if it cannot tell."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    try:
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            torch.zeros(256, device=device).add_(1.0)
            torch.cuda.synchronize(device)
        seen = {e.device_index() for e in prof.profiler.kineto_results.events()
                if _kind(e) in _DEVICE_WORK and not e.is_user_annotation()}
    except Exception:  # a profiler that cannot run leaves the check out, as it leaves the attempt unprobed
        return None
    return seen.pop() if len(seen) == 1 else None


def shares_elsewhere(by_device: Counter, home: int) -> dict:
    """Share of the device time on each device but `home` (an event without a device, index -1, is
    on no other device)."""
    total = sum(by_device.values())
    if not total:
        return {}
    return {d: round(w / total, 4) for d, w in sorted(by_device.items()) if d != home and d >= 0}


def elsewhere(p: Probe, device: str) -> str | None:
    """Why the calls' work is not the attempt's GPU's, or None: more than MATERIAL_SHARE of their
    device time ran on another GPU (its timing, memory and clocks are not this row's device's)."""
    share = sum(p.elsewhere.values())
    if share <= MATERIAL_SHARE:
        return None
    where = ", ".join(f"device index {d}: {v:.0%}" for d, v in p.elsewhere.items())
    return (f"{share:.0%} of the calls' device time ran on another GPU than the attempt's {device} ({where}; "
            f"more than {MATERIAL_SHARE:.0%})")


@cache
def _cuda_device_type():
    import torch

    return torch.autograd.DeviceType.CUDA


def _kind(e) -> str:
    """The event's kineto activity type; a torch without activity_type() (2.11) tells user ranges
    by is_user_annotation() and the rest by device type."""
    if hasattr(e, "activity_type"):
        return e.activity_type()
    if e.is_user_annotation():
        return "user_annotation"
    return "kernel" if e.device_type() == _cuda_device_type() else "cpu_op"


def _ns(e) -> int:
    return int(e.duration_ns()) if hasattr(e, "duration_ns") else int(e.end_ns() - e.start_ns())


def _device_work(events) -> list:
    """The events that are device work of the calls: kernels, copies and memsets. A device event named
    like a user range of the same trace is that range's GPU span, not a kernel (whatever the torch
    version calls it)."""
    ranges = {e.name() for e in events if e.is_user_annotation()}
    return [e for e in events if _kind(e) in _DEVICE_WORK and not e.is_user_annotation() and e.name() not in ranges]


def _on_device(e) -> bool:
    """Whether the event is on the GPU (work, or a range's GPU span), not the host."""
    if hasattr(e, "activity_type"):
        return e.activity_type() in _DEVICE_WORK + ("gpu_user_annotation",)
    return e.device_type() == _cuda_device_type()


def _call_spans(events) -> list[tuple[int, int]]:
    """The host ranges (CALL_RANGE) of the probed calls, in call order (not their GPU spans)."""
    return sorted((e.start_ns(), e.start_ns() + _ns(e)) for e in events
                  if e.name() == CALL_RANGE and e.is_user_annotation() and not _on_device(e))


def _device_time_per_call(events, work) -> list[int]:
    """ns of device work per call, in call order: each kernel, copy or memset belongs to the call whose
    host range (CALL_RANGE) holds the start of the host event it is linked to (the profiler's linked
    correlation id: the operator, or the range itself, that launched it). Empty where any of it cannot
    be told to a call (no link, a launch outside every range, a torch without the ids)."""
    spans = _call_spans(events)
    try:
        launched = {e.correlation_id(): e.start_ns() for e in events
                    if not _on_device(e) and e.linked_correlation_id() == 0}

        def call_of(d) -> int | None:
            t = launched.get(d.linked_correlation_id())
            return next((i for i, (lo, hi) in enumerate(spans) if t is not None and lo <= t < hi), None)

        per = _device_time(work, call_of)
    except (AttributeError, RuntimeError):
        return []
    return [] if not per or None in per else [per[i] for i in range(len(spans))]


def _device_time(work, key: Callable) -> Counter:
    """ns of device work per key(event): its kernel name, or its device index."""
    weight: Counter = Counter()
    for e in work:
        weight[key(e)] += max(_ns(e), 1)
    return weight


def _cpu_self_time(events) -> Counter:
    """ns of self time per operator name: an operator's time less that of the operators it called
    (per thread, by nesting of their intervals)."""
    ops = sorted((e for e in events if _kind(e) == "cpu_op" and not e.is_user_annotation()),
                 key=lambda e: (e.start_thread_id(), e.start_ns(), -_ns(e)))
    weight: Counter = Counter()
    stack: list[list] = []  # open operators: [end_ns, name, children's ns, thread, own ns]
    for e in ops:
        start, dur, tid = e.start_ns(), _ns(e), e.start_thread_id()
        while stack and (stack[-1][3] != tid or stack[-1][0] <= start):
            top = stack.pop()
            weight[top[1]] += max(top[4] - top[2], 1)
        if stack:
            stack[-1][2] += dur
        stack.append([start + dur, e.name(), 0, tid, dur])
    while stack:
        top = stack.pop()
        weight[top[1]] += max(top[4] - top[2], 1)
    return weight


def _cpu_self_time_per_call(events) -> list[Counter]:
    """Self time per operator name in each call's range (CALL_RANGE), in call order; an operator
    belongs to the range it starts in, on whatever thread. No ranges: no per-call split."""
    spans = _call_spans(events)
    if len(spans) < 2:
        return []
    ops = [e for e in events if _kind(e) == "cpu_op" and not e.is_user_annotation()]
    return [_cpu_self_time([e for e in ops if lo <= e.start_ns() < hi]) for lo, hi in spans]


def summarize(weight: Counter, classifier: Classifier) -> Probe:
    """A probe from the device time (CPU: self time) per kernel name."""
    by_family: Counter = Counter()
    for name, w in weight.items():
        by_family[classifier.family_of(name)] += w
    total = sum(by_family.values()) or 1
    names = [n for n, _ in weight.most_common()]
    ranked = [f for f, _ in by_family.most_common() if f != "other"]  # recognised families, most time first
    attention = [f for f in ranked if f in classifier.attention]
    return Probe(kernels=names[:20], families=sorted(ranked), main_family=ranked[0] if ranked else None,
                 attention_family=attention[0] if attention else None,
                 shares={f: round(w / total, 4) for f, w in by_family.items()}, status="probed")


def _undeclared(shares: dict, allowed: frozenset[str]) -> float:
    return round(sum(v for f, v in shares.items() if f != "other" and f not in allowed), 4)


def _worst_shares(expected: frozenset[str], p: Probe, side: frozenset[str]) -> dict:
    """The shares, of all calls together or of one call alone (CPU), with the most undeclared time."""
    allowed = expected | side
    return max([p.shares, *p.call_shares], key=lambda s: _undeclared(s, allowed))


def undeclared_share(expected: frozenset[str], p: Probe, side: frozenset[str] = frozenset()) -> float | None:
    """Share of the probed time in recognised families the backend does not declare: of all calls
    together, or on CPU of the call where it is largest (None when the backend declares none:
    nothing to hold it to). `side`: families allowed beside the declared ones."""
    if not expected or p.status != "probed":
        return None
    return _undeclared(_worst_shares(expected, p, side), expected | side)


def mismatch(expected: frozenset[str], observed: list[str], attention: frozenset[str],
             probe_: Probe | None = None, side: frozenset[str] = frozenset()) -> str | None:
    """Why what ran is not what the backend declares, or None.

    Mismatch: none of the declared families ran, another attention kernel family ran, or an
    undeclared path took more than MATERIAL_SHARE of the time."""
    if not expected:
        return None
    seen = set(observed)
    if not seen & expected:
        return f"declared {sorted(expected)} but observed {sorted(seen) or ['no recognised kernel']}"
    foreign = (seen & attention) - expected
    if foreign:
        return f"declared {sorted(expected)} but an undeclared attention kernel ran: {sorted(foreign)}"
    share = undeclared_share(expected, probe_, side) if probe_ is not None else None
    if share is not None and share > MATERIAL_SHARE:
        worst = _worst_shares(expected, probe_, side)
        parts = sorted(((v, f) for f, v in worst.items() if f != "other" and f not in expected | side),
                       reverse=True)
        what = ", ".join(f"{f} {v:.0%}" for v, f in parts)
        of = "the time" if worst is probe_.shares else f"the time of one of {probe_.calls} calls"
        return (f"declared {sorted(expected)} but undeclared kernels took {share:.0%} of {of} ({what}; "
                f"more than {MATERIAL_SHARE:.0%}): the declared kernel did only part of the work")
    return None


# issue 40: an FP8 row must show FP8 tensor-core work. cuDNN's SDPA kernels name their operand type
# (cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_*: 16-bit, bf16 included), cuBLAS/CUTLASS
# float8 GEMMs carry e4m3/e5m2 (sm90_xmma_gemm_e4m3e4m3_*), FlashAttention-3's float8 instantiations
# float_e4m3_t; on CPU torch's float8 GEMM is the operator aten::_scaled_mm.
FP8_MARKER = re.compile(r"e4m3|e5m2|fp8|f8(?![0-9])|float8|_scaled_mm", re.IGNORECASE)
SIXTEEN_BIT_MARKER = re.compile(r"f16|bf16|fp16|half|s16816|h16816", re.IGNORECASE)
CAST_KERNEL = re.compile(r"at::native::|elementwise|copy_kernel|memset|memcpy", re.IGNORECASE)


def not_fp8(dtype: str, p: Probe, device: str) -> str | None:
    """Why an fp8 row's probed kernels are not FP8 ones, or None. CPU: torch's float8 GEMM
    (aten::_scaled_mm) must be among the operators. CUDA: of the three kernels that took the most time
    (casts and copies set aside), none carries a float8 marker while one carries a 16-bit one (a name
    with neither marker is not evidence either way: it passes, and dispatch_kernels shows it)."""
    if not dtype.startswith("fp8") or p.status != "probed" or not p.kernels:
        return None
    if not device.startswith("cuda"):
        if any(FP8_MARKER.search(k) for k in p.kernels):
            return None
        return (f"an {dtype} row without a float8 GEMM (aten::_scaled_mm) among its operators: its products "
                f"ran in 16-bit or wider ({', '.join(p.kernels[:3])})")
    # only the kernels that took the time count: torch's float8 casts and copies (at::native elementwise
    # kernels) carry "float8" in their names and run around any kernel that reads or writes float8 tensors,
    # whatever precision the products ran in
    top = [k for k in p.kernels[:3] if not CAST_KERNEL.search(k)]
    if any(FP8_MARKER.search(k) for k in top):
        return None
    wide = [k for k in top if SIXTEEN_BIT_MARKER.search(k)]
    if wide:
        return (f"an {dtype} row whose kernels ran in 16-bit ({wide[0]}); none carries a float8 marker "
                "(e4m3/e5m2/fp8)")
    return None
