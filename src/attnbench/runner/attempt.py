"""One attempt inside a worker: prepare, check, probe, measure. Every failure becomes a status."""
from __future__ import annotations

import contextlib
import logging
import statistics
import time

from ..backends.base import Backend, Prepared, Rejected
from ..backends.layout import appended, cache_slot, new_token
from ..measure import correctness, dispatch, memory, telemetry, timing
from ..measure.device import bind
from ..measure.inputs import DISTRIBUTIONS, fingerprint, make_inputs, refill
from ..measure.step import make_step
from . import gates, process_state
from ..workloads import Workload
from ..workloads.append import appending, slot
from ..status import Status, failure

log = logging.getLogger(__name__)
PROBE_CALLS = 3  # calls profiled before timing (the ones after the first call)
LATE_PROBE_CALLS = 2  # calls profiled after timing


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
    """The values this attempt measured (record columns of origin "attempt", see attnbench/record.py),
    plus "fatal" when the worker's CUDA context is broken. Every failure becomes a status; so does a
    change to what the worker's next attempts share (runner/process_state.py), which is set back."""
    try:
        bind(spec["device"])  # the attempt's own GPU is current before the state is read: binding is no change
    except Exception:  # noqa: BLE001  (_run binds again, and turns the failure into the attempt's status)
        pass
    before = process_state.read()
    res = _run(spec, backend, cache, classifier)
    return process_state.verdict(res, *process_state.undo(before))


def _run(spec: dict, backend: Backend, cache: WorkloadCache, classifier: dispatch.Classifier | None) -> dict:
    w = Workload.from_dict(spec["workload"])
    device, seed, dist = spec["device"], spec["seed"], spec.get("inputs", "normal")
    phases: dict[str, float] = {}
    res: dict = {"status": Status.ERROR.value, "reason": None, "phases_s": phases}
    clock = _Phases(phases)
    try:
        bind(device)
        with clock("inputs"):
            inputs, ref = cache.get(w, device, seed, dist)
            inputs.out.fill_(float("nan"))
        with clock("prepare"):
            prepared = Prepared.of(backend.prepare(w, inputs))
        with contextlib.ExitStack() as stack:
            # A backend may need state held for the whole attempt (e.g. SDPA's kernel pin), entered
            # once so that its cost is not charged to every timed call.
            if prepared.context is not None:
                stack.enter_context(prepared.context)
            return _measure(w, prepared, inputs, ref, backend, spec, device, res, clock,
                            classifier or dispatch.default_classifier(), cache)
    except (Rejected, timing.GraphCaptureError) as e:  # the library or the graph capture refused it
        return {**res, "status": Status.UNSUPPORTED.value, "reason": str(e)}
    except Exception as e:
        status, reason = failure(e, device)
        if status is Status.OOM:
            cache.clear()
            free_memory(device)
        elif status is Status.ERROR:
            log.debug("attempt failed", exc_info=True)
        fatal = {"fatal": True} if status is Status.CRASH else {}
        return {**res, "status": status.value, "reason": reason, **fatal}


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


def _measure(w, prepared, inputs, ref, backend, spec, device, res, clock, classifier, cache) -> dict:
    seed, dist = spec["seed"], spec.get("inputs", "normal")
    tol = spec.get("tol")  # None: the dtype's tolerance (measure/correctness.py)
    with clock("cold_call"):
        memory.poison_allocator(inputs.out.numel() * inputs.out.element_size(), device)
        out, res["cold_start_us"] = timing.one_call(make_step(w, prepared, inputs, first=True), device)
    step = make_step(w, prepared, inputs)
    with clock("check"):
        verdict = correctness.check(w, out, inputs, ref, tol)
        del out
    res.update(max_abs_err=verdict.max_abs_err, rmse=verdict.rmse, cosine=verdict.cosine,
               err_ratio=verdict.err_ratio, ref_err=verdict.ref_err, check_detail=verdict.detail)
    why = _mutated(w, cache, inputs, "the first call")
    if why or not verdict.passed:
        return {**res, "status": Status.INCORRECT.value, "reason": why or verdict.reason}
    fresh: list[float] = []  # µs of single calls on new input values (gates.answered_from_cache)
    with clock("hard"):
        why, res["hard_err_ratio"] = _hard_inputs(w, step, inputs, cache, device, seed, dist, tol, fresh)
    why = why or _mutated(w, cache, inputs, "the hard-input check", stepped=False)  # refilled: as drawn
    if why:
        return {**res, "status": Status.INCORRECT.value, "reason": why}
    expected = backend.expected_kernels(device.split(":")[0])
    side = backend.side_kernels(device.split(":")[0])
    with clock("probe"):
        pr = dispatch.probe(step, device, classifier, calls=PROBE_CALLS)
    res.update(pr.to_record())
    res["undeclared_share"] = dispatch.undeclared_share(expected, pr, side)
    if pr.status == "probed":
        why = dispatch.mismatch(expected, pr.families, classifier.attention, pr, side) or dispatch.elsewhere(pr, device)
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
    why = _mutated(w, cache, inputs, "timing")
    if why:
        return {**res, "status": Status.INCORRECT.value, "reason": why}
    with clock("probe"):  # the calls after the timed ones: a path that changes after N calls shows here
        late = dispatch.probe(step, device, classifier, calls=LATE_PROBE_CALLS)
    if res.get("kernel_calls_us") and late.call_kernel_us:  # the calls of both probes, in order
        res["kernel_calls_us"] = res["kernel_calls_us"] + late.call_kernel_us
    steady = dispatch.steady_kernel_us(res.get("kernel_us"), late.kernel_us, res.get("kernel_calls_us"))
    if steady is not None:
        res["kernel_us"] = steady
    if late.status == "probed":
        share = dispatch.undeclared_share(expected, late, side)
        if share is not None:
            res["undeclared_share"] = max(share, res["undeclared_share"] or 0.0)
        why = (dispatch.mismatch(expected, late.families, classifier.attention, late, side)
               or dispatch.elsewhere(late, device))
        if why:
            return {**res, "status": Status.DISPATCH_MISMATCH.value, "reason": f"after timing: {why}"}
    with clock("recheck"):
        why = _recheck(w, t.replay, inputs, cache, device, seed, dist, tol, fresh)
    if why:
        return {**res, "status": Status.INCORRECT.value, "reason": why}
    if gates.answered_from_cache(fresh, statistics.median(t.samples_us) if t.samples_us else 0.0):
        # a host that stalled through every one of those calls looks the same: confirm it at one
        # moment, each call on new values followed by one on the same values again
        with clock("recheck"):
            fresh, same = _fresh_and_same(w, t.replay, inputs, device, seed, dist)
        why = gates.answered_from_cache(fresh, statistics.median(same), "the same calls repeated on those values")
        if why:
            return {**res, "status": Status.IMPLAUSIBLE.value, "reason": why}
    res["status"] = Status.OK.value
    return res


def _mutated(w, cache, inputs, phase: str, stepped: bool = True) -> str | None:
    """Which inputs are not as they must be after `phase`, said as a reason; None if all are. A kernel
    must not write its inputs (the KV cache included): each must fingerprint as drawn (cache.clean),
    except, after a step (`stepped`) of an appending decode, the cache, which must be exactly the drawn
    one with the new token in slot kv_len - 1 (_append_fault)."""
    now = fingerprint(inputs)
    want = cache.after if stepped else cache.clean
    changed = [n for n in want if now.get(n) != want[n]]
    if stepped and appending(w):
        why = _append_fault(w, inputs, cache.clean, now, changed)
        if why:
            return f"the KV cache after {phase}: {why}"
        changed = [n for n in changed if n not in ("k", "v")]
    if not changed:
        return None
    kv = " (the KV cache: decode must leave it as it was)" if w.mode == "decode" and set(changed) & {"k", "v"} else ""
    return f"input {', '.join(changed)} changed during {phase}{kv}: a kernel must not write its inputs"


def _append_fault(w, inputs, clean: dict, now: dict, changed: list[str]) -> str | None:
    """What is wrong with an appending decode's K or V after its step, or None: slot kv_len - 1 must
    hold the new token's values bit for bit, and every other entry its drawn value (the cache's
    fingerprint then is the one taken with the new token in the slot, WorkloadCache.after)."""
    n = slot(w)
    for name, new in (("k", inputs.k_new), ("v", inputs.v_new)):
        written = _same_bits(cache_slot(w, inputs, getattr(inputs, name)), new_token(w, new))
        if written and name not in changed:
            continue
        if written:
            return (f"{name} holds the new token in slot {n}, but other entries of the cache were written too "
                    "(only slot kv_len - 1 may change)")
        if now[name] == clean[name]:
            return (f"the append was skipped: {name} is unchanged, slot {n} (kv_len - 1) still holds its old "
                    "values, not the new token's")
        return (f"{name} changed, but slot {n} (kv_len - 1) does not hold the new token's values bit for bit "
                "(written into the wrong slot, or other values written)")
    return None


def _same_bits(a, b) -> bool:
    """Whether two tensors hold the same bits (a float compare would call -0.0 and 0.0 equal)."""
    import torch

    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
    return torch.equal(a.contiguous().view(ints), b.contiguous().view(ints))


def _check_on(w, call, inputs, cache, device: str, seed: int, dist: str, tol, hard: bool = False,
              fresh: list | None = None):
    """`call` on the values refill(seed, dist) writes into the input tensors, checked against their
    own reference; the call's µs (synchronised, the refill's own work excluded) are appended to
    `fresh`. The caller writes the workload's own values back."""
    refill(inputs, w, seed, dist)
    out, us = timing.one_call(call, device)
    if fresh is not None:
        fresh.append(us)
    return correctness.check(w, out, inputs, cache.reference(w, seed, dist), tol, hard=hard)


def _hard_inputs(w, step, inputs, cache, device, seed, dist, tol, fresh=None) -> tuple[str | None, float | None]:
    """The step on each hard distribution the timed calls do not use (outliers, large logits), against
    its own reference and the dtype's hard-input tolerance; the workload's values are restored after.
    Returns (why it failed or None, the worst error ratio)."""
    worst = None
    try:
        for i, hard in enumerate(d for d in DISTRIBUTIONS if d != "normal" and d != dist):
            verdict = _check_on(w, step, inputs, cache, device, seed + 2_000_003 + i, hard, tol, hard=True,
                                fresh=fresh)
            worst = max(worst or 0.0, verdict.err_ratio if verdict.err_ratio is not None else float("inf"))
            if not verdict.passed:
                return f"on {hard} inputs (measure/inputs.py): {verdict.reason}", worst
    finally:
        refill(inputs, w, seed, dist)  # the workload's own values again
    return None, worst


def _recheck(w, replay, inputs, cache, device: str, seed: int, dist: str, tol, fresh=None) -> str | None:
    """The timed path once more, exactly as timed, on new input values written into the same
    tensors: output that does not follow its inputs (a cache, a later call gone wrong, a graph that
    replays nothing) is not OK, whatever kernels ran. The inputs are restored afterwards."""
    try:
        verdict = _check_on(w, replay, inputs, cache, device, seed + 1_000_003, dist, tol, fresh=fresh)
    finally:
        refill(inputs, w, seed, dist)  # the workload's own values again: the next backend shares them
    if verdict.passed:
        return None
    return f"after timing, on new input values, the timed path's output failed the check: {verdict.reason}"


def _fresh_and_same(w, replay, inputs, device: str, seed: int, dist: str, rounds: int = 3):
    """µs of the timed path, synchronised, on new values written into the inputs (`fresh`), each
    followed by a call on those same values again (`same`); the workload's values are restored."""
    fresh, same = [], []
    try:
        for i in range(rounds):
            refill(inputs, w, seed + 3_000_017 + i, dist)
            for into in (fresh, same):
                into.append(timing.one_call(replay, device)[1])
    finally:
        refill(inputs, w, seed, dist)
    return fresh, same


def free_memory(device: str = "cuda") -> None:
    import gc

    gc.collect()
    import torch

    if device.startswith("cuda") and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
