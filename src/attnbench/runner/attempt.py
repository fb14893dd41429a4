"""One attempt inside a worker: prepare, check, probe, measure. Every failure becomes a status."""
from __future__ import annotations

import contextlib
import logging
import time

from ..backends.base import Backend, Prepared, Rejected
from ..measure import correctness, dispatch, memory, telemetry, timing
from ..measure.device import bind
from ..measure.inputs import fingerprint, make_inputs, refill
from ..measure.step import make_step
from ..workloads import Workload
from ..status import Status

log = logging.getLogger(__name__)
_HOST_OOM = ("DefaultCPUAllocator: can't allocate memory", "DefaultCPUAllocator: not enough memory")
_CONTEXT_BROKEN = ("illegal memory access", "device-side assert", "unspecified launch failure",
                   "an illegal instruction", "misaligned address", "CUDA error: unknown error")


class WorkloadCache:
    """Inputs and float64 reference of the last workload (backends of one workload run together)."""

    def __init__(self):
        self.key = None
        self.inputs = None
        self.ref = None

    def get(self, w: Workload, device: str, seed: int):
        k = (w.key(), device, seed)
        if self.key != k:
            self.key, self.inputs, self.ref = None, None, None
            self.inputs = make_inputs(w, device, seed)
            self.ref = correctness.Reference64(w, self.inputs, seed)
            self.key = k
        return self.inputs, self.ref

    def clear(self):
        self.key, self.inputs, self.ref = None, None, None


def run(spec: dict, backend: Backend, cache: WorkloadCache, classifier: dispatch.Classifier | None = None) -> dict:
    """The values this attempt measured (record columns of origin "attempt", see attnbench/record.py),
    plus "fatal" when the worker's CUDA context is broken. Every failure becomes a status."""
    import torch

    w = Workload.from_dict(spec["workload"])
    device, seed = spec["device"], spec["seed"]
    phases: dict[str, float] = {}
    res: dict = {"status": Status.ERROR.value, "reason": None, "phases_s": phases}
    clock = _Phases(phases)
    try:
        bind(device)
        with clock("inputs"):
            inputs, ref = cache.get(w, device, seed)
            inputs.out.fill_(float("nan"))
        with clock("prepare"):
            prepared = Prepared.of(backend.prepare(w, inputs))
        with contextlib.ExitStack() as stack:
            # A backend may need state held for the whole attempt (e.g. SDPA's kernel pin), entered
            # once so that its cost is not charged to every timed call.
            if prepared.context is not None:
                stack.enter_context(prepared.context)
            return _measure(w, prepared, inputs, ref, backend, spec, device, res, clock,
                            classifier or dispatch.default_classifier())
    except (Rejected, timing.GraphCaptureError) as e:  # the library or the graph capture refused it
        return {**res, "status": Status.UNSUPPORTED.value, "reason": str(e)}
    except (torch.OutOfMemoryError, MemoryError) as e:
        cache.clear()
        free_memory(device)
        return {**res, "status": Status.OOM.value, "reason": f"{type(e).__name__}: {_first_line(e)}"}
    except Exception as e:
        msg = f"{type(e).__name__}: {_first_line(e)}"
        if isinstance(e, RuntimeError) and any(t in str(e) for t in _HOST_OOM):  # the CPU allocator's own words
            cache.clear()
            free_memory(device)
            return {**res, "status": Status.OOM.value, "reason": msg}
        broken = _context_broken(e, device)
        if broken:
            return {**res, "status": Status.CRASH.value, "reason": f"CUDA context broken: {broken}", "fatal": True}
        log.debug("attempt failed", exc_info=True)
        return {**res, "status": Status.ERROR.value, "reason": msg}


def _context_broken(e: BaseException, device: str) -> str | None:
    """The error text if this failure (or an asynchronous kernel fault behind it) left the CUDA
    context unusable; the next attempt must then get a fresh process."""
    if any(s in str(e) for s in _CONTEXT_BROKEN):
        return f"{type(e).__name__}: {_first_line(e)}"
    if device.startswith("cuda"):
        import torch

        try:
            torch.cuda.synchronize()  # a faulting kernel launched before the exception shows here
        except Exception as late:
            return f"{type(late).__name__}: {_first_line(late)}"
    return None


class _Phases:
    """Wall seconds per phase of an attempt (stored with the row; never part of a sample)."""

    def __init__(self, into: dict):
        self.into = into

    @contextlib.contextmanager
    def __call__(self, name: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.into[name] = round(self.into.get(name, 0.0) + time.perf_counter() - t0, 4)


def _measure(w, prepared, inputs, ref, backend, spec, device, res, clock, classifier) -> dict:
    seed = spec["seed"]
    tol = spec.get("tol", correctness.DEFAULT_TOL)
    untouched = fingerprint(inputs)  # a kernel must not write its inputs (nor the KV cache)
    with clock("cold_call"):
        memory.poison_allocator(inputs.out.numel() * inputs.out.element_size(), device)
        out, res["cold_start_us"] = timing.cold_call(make_step(w, prepared, inputs, first=True), device)
    step = make_step(w, prepared, inputs)
    with clock("check"):
        verdict = correctness.check(w, out, inputs, ref, tol)
        del out
    res.update(max_abs_err=verdict.max_abs_err, rmse=verdict.rmse, cosine=verdict.cosine,
               err_ratio=verdict.err_ratio, ref_err=verdict.ref_err, check_detail=verdict.detail)
    why = _mutated(untouched, inputs, "the first call", w.mode == "decode")
    if why or not verdict.passed:
        return {**res, "status": Status.INCORRECT.value, "reason": why or verdict.reason}
    with clock("probe"):
        pr = dispatch.probe(step, device, classifier)
    res.update(pr.to_record())
    if pr.status == "probed":
        why = dispatch.mismatch(backend.expected_kernels(device.split(":")[0]), pr.families, classifier.attention)
        if why:
            return {**res, "status": Status.DISPATCH_MISMATCH.value, "reason": why}
    with clock("memory"):
        res["peak_mem_bytes"] = memory.peak_bytes(step, device)
    with clock("timing"):
        conditions = telemetry.Telemetry(device)  # NVML of this very GPU, read between sample batches
        t = timing.measure(step, device, timing.TimingConfig(**spec.get("timing", {})), w.launch, w.l2,
                           on_batch=conditions.read)
    res.update(t.to_dict())
    res.update(conditions.summary())
    why = _mutated(untouched, inputs, "timing", w.mode == "decode")
    if why:
        return {**res, "status": Status.INCORRECT.value, "reason": why}
    with clock("recheck"):
        why = _recheck(w, t.replay, inputs, device, seed, tol)
    if why:
        return {**res, "status": Status.INCORRECT.value, "reason": why}
    res["status"] = Status.OK.value
    return res


def _mutated(before: dict, inputs, phase: str, decode: bool) -> str | None:
    """Which inputs changed since `before` (their fingerprints), said as a reason; None if none."""
    after = fingerprint(inputs)
    changed = [n for n in before if after.get(n) != before[n]]
    if not changed:
        return None
    cache = " (the KV cache: decode must leave it as it was)" if decode and set(changed) & {"k", "v"} else ""
    return f"input {', '.join(changed)} changed during {phase}{cache}: a kernel must not write its inputs"


def _recheck(w, replay, inputs, device: str, seed: int, tol: float) -> str | None:
    """The timed path once more, exactly as timed, on new input values written into the same
    tensors: output that does not follow its inputs (a cache, a later call gone wrong, a graph that
    replays nothing) is not OK, whatever kernels ran. The inputs are restored afterwards."""
    fresh_seed = seed + 1_000_003
    refill(inputs, w, fresh_seed)
    try:
        out = replay()
        timing.sync(device)
        verdict = correctness.check(w, out, inputs, correctness.Reference64(w, inputs, fresh_seed), tol)
        del out
    finally:
        refill(inputs, w, seed)  # the workload's own values again: the next backend shares them
    if verdict.passed:
        return None
    return f"after timing, on new input values, the timed path's output failed the check: {verdict.reason}"


def _first_line(e: BaseException) -> str:
    s = str(e).strip().splitlines()
    return s[0][:500] if s else ""


def free_memory(device: str = "cuda") -> None:
    import gc

    gc.collect()
    import torch

    if device.startswith("cuda") and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
