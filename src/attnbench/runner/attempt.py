"""One attempt inside a worker: its steps in order over one context, stopping at the first gate that
decides. Every failure becomes a status."""
from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from typing import Callable

from ..backends.base import Backend, Rejected
from ..backends.layout import appended
from ..measure import concurrency, correctness, dispatch, timing
from ..measure.device import bind
from ..measure.inputs import fingerprint, make_inputs
from ..status import Status, failure
from ..workloads import Workload
from . import gates, process_state, steps
from .steps import Attempt, Clock

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Step:
    """One step of an attempt: `run` measures (its wall time added to phases_s[phase] when it has one)
    or, for a gate, decides: it returns (status, reason) to end the attempt there, or None to go on.
    `when`: the step runs only if it says so."""

    name: str
    run: Callable[[Attempt], gates.Decision | None]
    phase: str | None = None
    when: Callable[[Attempt], bool] | None = None


# The attempt, straight down: prepare, check, probe, measure, check again. The phase names are the
# keys of the row's phases_s (a phase met twice adds up).
STEPS: tuple[Step, ...] = (
    Step("bind", steps.bind_device),
    Step("inputs", steps.draw_inputs, "inputs"),
    Step("prepare", steps.prepare, "prepare"),
    Step("hold", steps.hold_context),
    Step("cold_call", steps.cold_call, "cold_call"),
    Step("check", steps.check_first, "check"),
    Step("first_call_gate", gates.first_call),
    Step("hard", steps.hard_inputs, "hard"),
    Step("hard_gate", gates.hard_inputs),
    Step("probe", steps.probe, "probe"),
    Step("dispatch_gate", gates.dispatched),
    Step("memory", steps.peak_memory, "memory"),
    Step("timing", steps.time_calls, "timing"),
    Step("timing_gate", gates.after_timing),
    Step("late_probe", steps.late_probe, "probe"),
    Step("late_dispatch_gate", gates.dispatched_late),
    Step("recheck", steps.recheck, "recheck"),
    Step("recheck_gate", gates.rechecked),
    Step("confirm_cache", steps.confirm_cache, "recheck", when=gates.cache_suspected),
    Step("cache_gate", gates.not_from_cache),
    Step("repeat_gate", gates.repeated_values, when=gates.fresh_inputs_on),  # issue 42.2
    Step("counters", steps.counters, "counters", when=gates.counters_requested),  # issue 39: OK rows only
)


class WorkloadCache:
    """Inputs and float64 references of the last workload (backends of one workload run together).

    The inputs are handed out only as they were made: a fingerprint taken when they were drawn is
    compared on every get, and inputs a backend changed (in place, or left refilled by an attempt
    that died) are drawn again, so no later backend pays for another's writes (nor inherits an
    appending decode's cache with the new token already in it, which would hide a backend that skips
    the append). `after` is what the inputs must fingerprint as after a step: as drawn, but an
    appending decode's cache with the new token in slot kv_len - 1. An attempt that ends OK leaves
    the inputs as drawn (its recheck refills them), so the next backend finds them clean. References
    are kept per (seed, distribution) of the values they were computed on."""

    def __init__(self):
        self.clear()

    def get(self, w: Workload, device: str, seed: int, dist: str = "normal"):
        k = (w.key(), device, seed, dist)
        if self.key != k or fingerprint(self.inputs) != self.clean:
            self.clear()
            self.inputs = make_inputs(w, device, seed, dist)
            self.clean = fingerprint(self.inputs)
            with appended(w, self.inputs):
                self.after = fingerprint(self.inputs)
            self.refs[(seed, dist)] = correctness.Reference64(w, self.inputs, seed)
            self.key = k
        return self.inputs, self.refs[(seed, dist)]

    def reference(self, w: Workload, seed: int, dist: str) -> correctness.Reference64:
        """The reference of the values refill(inputs, w, seed, dist) writes; the inputs must hold them now."""
        if (seed, dist) not in self.refs:
            self.refs[(seed, dist)] = correctness.Reference64(w, self.inputs, seed)
        return self.refs[(seed, dist)]

    def clear(self):
        self.key, self.inputs, self.clean, self.after, self.refs = None, None, None, None, {}


def run(spec: dict, backend: Backend, cache: WorkloadCache, classifier: dispatch.Classifier | None = None) -> dict:
    """The values this attempt measured (record columns of origin "attempt", see attnbench/record/),
    plus "fatal" when the worker's CUDA context is broken. Every failure becomes a status; so does a
    change to what the worker's next attempts share (runner/process_state.py), which is set back."""
    try:
        bind(spec["device"])  # the attempt's own GPU is current before the state is read: binding is no change
    except Exception:  # noqa: BLE001  (the bind step binds again, and turns the failure into the attempt's status)
        pass
    before = process_state.read()
    others = concurrency.read(spec["device"], holds_context=_cuda_ready(spec["device"]))  # issue 39.5
    res = _run(spec, backend, cache, classifier)
    after = concurrency.read(spec["device"], holds_context=_cuda_ready(spec["device"]))
    res.update(concurrency.columns(others, after))
    return process_state.verdict(res, *process_state.undo(before))


def _cuda_ready(device: str) -> bool:
    """Whether this worker holds a CUDA context (NVML must then list it among the GPU's processes)."""
    if not device.startswith("cuda"):
        return False
    import torch

    return torch.cuda.is_initialized()


def _run(spec: dict, backend: Backend, cache: WorkloadCache, classifier: dispatch.Classifier | None) -> dict:
    w = Workload.from_dict(spec["workload"])
    phases: dict[str, float] = {}
    res: dict = {"status": Status.ERROR.value, "reason": None, "phases_s": phases}
    try:
        with contextlib.ExitStack() as stack:
            return _conduct(Attempt(spec, backend, cache, classifier, stack, w, res, Clock(phases)))
    except (Rejected, timing.GraphCaptureError) as e:  # the library or the graph capture refused it
        return {**res, "status": Status.UNSUPPORTED.value, "reason": str(e)}
    except Exception as e:
        status, reason = failure(e, spec["device"])
        if status is Status.OOM:
            cache.clear()
            free_memory(spec["device"])
        elif status is Status.ERROR:
            log.debug("attempt failed", exc_info=True)
        fatal = {"fatal": True} if status is Status.CRASH else {}
        return {**res, "status": status.value, "reason": reason, **fatal}


def _conduct(a: Attempt) -> dict:
    """The steps in order; the first gate that decides ends the attempt, else it is OK."""
    for step in STEPS:
        if step.when and not step.when(a):
            continue
        with a.clock(step.phase) if step.phase else contextlib.nullcontext():
            decided = step.run(a)
        if decided:
            status, reason = decided
            return {**a.res, "status": status.value, "reason": reason}
    a.res["status"] = Status.OK.value
    return a.res


def free_memory(device: str = "cuda") -> None:
    import gc

    gc.collect()
    import torch

    if device.startswith("cuda") and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
