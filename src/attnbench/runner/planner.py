"""Grid × backends × repeats → attempts; the capability filter and memory prediction give reasons."""
from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

from ..backends.base import Backend, DeviceInfo
from ..workloads import Workload
from ..status import Status

MEMORY_FRACTION = 0.9  # of device memory (CUDA) or available RAM (CPU) an attempt may plan to use


@dataclass
class Attempt:
    key: str
    workload: Workload
    backend: Backend
    repeat: int
    planned: Status | None = None  # UNSUPPORTED / OOM_PREDICTED: written without running
    reason: str | None = None


def attempt_key(tag: str, device_name: str, w: Workload, backend: str, repeat: int, seed: int = 0,
                inputs: str = "normal", device_id: str | None = None) -> str:
    """Identity of an attempt: same tag, device model, workload, backend, repeat, input seed and
    input distribution (the default, normal, leaves the key as it was before distributions existed).
    device_id (a GPU's UUID, or its index without one) makes GPUs of one model distinct attempts
    (multi-device --replicate); None, the default, leaves the key as before."""
    salt = "" if inputs == "normal" else f"|{inputs}"
    if device_id is not None:
        salt += f"|device={device_id}"
    return hashlib.sha1(f"{tag}|{device_name}|{w.key()}|{backend}|{repeat}|{seed}{salt}".encode()).hexdigest()[:24]


def plan(workloads: list[Workload], backends: list[Backend], dev: DeviceInfo, repeats: int, tag: str,
         seed: int, inputs: str = "normal", device_id: str | None = None) -> list[Attempt]:
    """Repeat-major order; within each workload the backends are shuffled (seeded) so that drift
    during a sweep is shared by all of them rather than charged to whichever runs last.
    device_id: see attempt_key (the order does not depend on it: every GPU runs the same order)."""
    budget = dev.total_memory * MEMORY_FRACTION if dev.total_memory else None
    unavailable = {b.name: b.availability() for b in backends}
    out = []
    for r in range(repeats):
        for w in workloads:
            order = list(backends)
            random.Random(f"{seed}:{w.key()}:{r}").shuffle(order)
            for b in order:
                a = Attempt(attempt_key(tag, dev.name, w, b.name, r, seed, inputs, device_id), w, b, r)
                why = unavailable[b.name] or b.supports(w, dev)
                if why:
                    a.planned, a.reason = Status.UNSUPPORTED, why
                elif budget is not None and b.memory_estimate(w) > budget:
                    a.planned = Status.OOM_PREDICTED
                    a.reason = (f"predicted {b.memory_estimate(w) / 2**30:.1f} GiB > "
                                f"{budget / 2**30:.1f} GiB usable on {dev.name}")
                out.append(a)
    return out
