"""Dispatch probe: which kernels actually ran (torch.profiler), mapped to kernel families.

Library-specific families (a library's attention kernels) are declared by the backends that know
them (`Backend.kernel_patterns`); the library-neutral ones (GEMMs, Triton, Inductor) are matched
after every declared family (backends/kernels.py)."""
from __future__ import annotations

import re
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


@dataclass
class Probe:
    kernels: list[str] = field(default_factory=list)  # distinct names, most time first
    families: list[str] = field(default_factory=list)
    main_family: str | None = None  # the recognised family of the most device time (CPU: most calls)
    kernel_us: float | None = None  # device time of the call's kernels, every stream (CUDA only)
    attention_family: str | None = None  # the attention family of the most device time
    status: str = "unprobed"  # probed | unprobed
    error: str | None = None

    def to_record(self) -> dict:
        """The record columns this probe fills."""
        return {"dispatch_kernels": self.kernels, "dispatch_families": self.families, "kernel_us": self.kernel_us,
                "dispatch_main_family": self.main_family, "dispatch_attention_family": self.attention_family,
                "dispatch_status": self.status}


def probe(step: Callable[[], Any], device: str, classifier: Classifier | None = None) -> Probe:
    """Run one call under the profiler. On CUDA, device kernels are read; on CPU, operator names."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    classifier = classifier or default_classifier()
    cuda = device.startswith("cuda")
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    try:
        with profile(activities=acts) as prof:
            step()
            if cuda:
                torch.cuda.synchronize()
    except Exception as e:  # a profiler that cannot run leaves the attempt unprobed, not failed
        return Probe(status="unprobed", error=f"{type(e).__name__}: {e}")
    weight: Counter = Counter()
    device_us = attached_us = 0.0
    for ev in prof.events():
        if not cuda:
            weight[ev.name] += 1
        elif getattr(ev, "device_type", None) == torch.autograd.DeviceType.CUDA:
            us = float(ev.device_time_total or 0)  # a kernel's (or copy's) own duration
            device_us += us
            weight[ev.name] += max(int(us), 1)
        else:  # kernels attached to the CPU op that launched them
            for k in getattr(ev, "kernels", []) or []:
                us = float(getattr(k, "duration", 0) or 0)
                attached_us += us
                weight[k.name] += max(int(us), 1)
    p = summarize(weight, classifier)
    if cuda:  # the same kernels may be listed both ways: count one listing, never both
        p.kernel_us = device_us or attached_us or None
    return p


def summarize(weight: Counter, classifier: Classifier) -> Probe:
    """A probe from the device time (or calls) per kernel name."""
    by_family: Counter = Counter()
    for name, w in weight.items():
        by_family[classifier.family_of(name)] += w
    names = [n for n, _ in weight.most_common()]
    ranked = [f for f, _ in by_family.most_common() if f != "other"]  # recognised families, most time first
    attention = [f for f in ranked if f in classifier.attention]
    return Probe(kernels=names[:20], families=sorted(ranked), main_family=ranked[0] if ranked else None,
                 attention_family=attention[0] if attention else None, status="probed")


def mismatch(expected: frozenset[str], observed: list[str], attention: frozenset[str]) -> str | None:
    """Why what ran is not what the backend declares, or None.

    Mismatch: none of the declared families ran, or another attention kernel family ran."""
    if not expected:
        return None
    seen = set(observed)
    if not seen & expected:
        return f"declared {sorted(expected)} but observed {sorted(seen) or ['no recognised kernel']}"
    foreign = (seen & attention) - expected
    if foreign:
        return f"declared {sorted(expected)} but an undeclared attention kernel ran: {sorted(foreign)}"
    return None
