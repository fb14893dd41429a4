"""The measuring steps of one attempt, each over one context (Attempt); runner/attempt.py lists them in order
with the gates (runner/gates.py) that decide between them."""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..backends.base import Backend, Inputs, Prepared
from ..measure import correctness, dispatch, fp8_contract, memory, telemetry, timing
from ..measure.device import bind
from ..measure.inputs import Refresher
from ..measure.step import make_step
from ..workloads import Workload
from . import checks

PROBE_CALLS = 3  # calls profiled before timing (the ones after the first call)
LATE_PROBE_CALLS = 2  # calls profiled after timing


class Clock:
    """Wall seconds per phase of an attempt (stored with the row as phases_s; never part of a sample)."""

    def __init__(self, into: dict):
        self.into = into

    @contextlib.contextmanager
    def __call__(self, name: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.into[name] = round(self.into.get(name, 0.0) + time.perf_counter() - t0, 4)


@dataclass
class Attempt:
    """What the steps of one attempt read and write: the spec's values, what each step made, the row's
    values so far (`res`, record columns of origin "attempt") and the clock of its phases."""

    spec: dict
    backend: Backend
    cache: Any  # runner/attempt.py's WorkloadCache: the inputs and references a worker's attempts share
    classifier: dispatch.Classifier | None
    stack: contextlib.ExitStack  # what is held for the whole attempt (Prepared.context)
    w: Workload
    res: dict
    clock: Clock
    inputs: Inputs | None = None
    ref: Any = None  # correctness.Reference64 of the inputs as drawn
    prepared: Prepared | None = None
    step: Callable[[], Any] | None = None  # the timed call (measure/step.py)
    out: Any = None  # the first call's output, until it is checked
    verdict: Any = None  # the first call's correctness.Verdict
    why: str | None = None  # what the last check found wrong, for the gate after it
    probe: Any = None  # dispatch.Probe before timing
    late: Any = None  # dispatch.Probe after timing
    timed: Any = None  # timing.Timing
    fresh: list[float] = field(default_factory=list)  # µs of single calls on new input values
    same: list[float] | None = None  # µs of calls on those values again, when a cache is suspected
    cache_passes: list[dict] | None = None  # the cache confirmation's passes (gates.not_from_cache reads them)

    @property
    def device(self) -> str:
        return self.spec["device"]

    @property
    def seed(self) -> int:
        return self.spec["seed"]

    @property
    def dist(self) -> str:
        return self.spec.get("inputs", "normal")

    @property
    def tol(self):
        return self.spec.get("tol")  # None: the dtype's tolerance (measure/correctness.py)

    def expected(self) -> frozenset[str]:
        return self.backend.expected_kernels(self.device.split(":")[0])

    def side(self) -> frozenset[str]:
        return self.backend.side_kernels(self.device.split(":")[0])


def bind_device(a: Attempt) -> None:
    bind(a.device)


def draw_inputs(a: Attempt) -> None:
    a.inputs, a.ref = a.cache.get(a.w, a.device, a.seed, a.dist)
    a.inputs.out.fill_(float("nan"))


def prepare(a: Attempt) -> None:
    a.prepared = Prepared.of(a.backend.prepare(a.w, a.inputs))


def hold_context(a: Attempt) -> None:
    # A backend may need state held for the whole attempt (e.g. SDPA's kernel pin), entered once so
    # that its cost is not charged to every timed call.
    if a.prepared.context is not None:
        a.stack.enter_context(a.prepared.context)
    a.classifier = a.classifier or dispatch.default_classifier()


def cold_call(a: Attempt) -> None:
    """The first call (compile or autotune included), its output kept for the check."""
    memory.poison_allocator(a.inputs.out.numel() * a.inputs.out.element_size(), a.device)
    a.out, a.res["cold_start_us"] = timing.one_call(make_step(a.w, a.prepared, a.inputs, first=True), a.device)
    a.res["kernel_config"] = a.prepared.config() if a.prepared.config else None  # what the first call chose
    a.step = make_step(a.w, a.prepared, a.inputs)


def check_first(a: Attempt) -> None:
    a.verdict = correctness.check(a.w, a.out, a.inputs, a.ref, a.tol,
                                  scheme=fp8_contract.scheme_of(a.backend, a.w))  # issue 40
    a.out = None  # released before the next calls allocate
    v = a.verdict
    a.res.update(rel_l2=v.rel_l2, fp8_ratio=(v.detail.get("fp8") or {}).get("ratio"))  # issue 40
    a.res.update(max_abs_err=v.max_abs_err, rmse=v.rmse, cosine=v.cosine, err_ratio=v.err_ratio, ref_err=v.ref_err,
                 check_detail=v.detail)


def hard_inputs(a: Attempt) -> None:
    a.why, a.res["hard_err_ratio"] = checks.hard_inputs(a)


def probe(a: Attempt) -> None:
    a.probe = dispatch.probe(a.step, a.device, a.classifier, calls=PROBE_CALLS)
    a.res.update(a.probe.to_record())
    a.res["undeclared_share"] = dispatch.undeclared_share(a.expected(), a.probe, a.side())
    a.res["dispatch_checked"] = bool(a.expected()) and a.probe.status == "probed"  # issue 42.2


def peak_memory(a: Attempt) -> None:
    a.res["peak_mem_bytes"] = memory.peak_bytes(a.step, a.device)


def time_calls(a: Attempt) -> None:
    conditions = telemetry.Telemetry(a.device)  # NVML of this very GPU, read between sample batches
    # issue 42.2: a fresh-inputs workload's timed calls each see new values (measure/inputs.py Refresher)
    fresh = Refresher(a.inputs, a.w, a.seed, a.dist) if a.w.fresh_inputs else None
    t0 = time.perf_counter()
    passes = []
    try:
        a.timed = timing.measure(a.step, a.device, timing.TimingConfig(**a.spec.get("timing", {})), a.w.launch,
                                 a.w.l2, on_batch=conditions.read, fresh=fresh)
        if fresh:
            passes = repeat_passes(a.timed.repeat)
    finally:
        if fresh:
            fresh.restore()  # the workload's own values again
    a.res.update(a.timed.to_dict())
    a.res.update(conditions.summary())
    if fresh:
        a.step()  # one call on them: the input-write gate after timing judges a call, not the last refill
        a.res["check_detail"] = {**(a.res.get("check_detail") or {}), "fresh_inputs": {
            "refills": fresh.n, "refill_host_us": round(fresh.host_s / max(fresh.n, 1) * 1e6, 2),
            "timing_s": round(time.perf_counter() - t0, 4), "versions_kept": fresh.versions_kept,
            "passes": passes}}


def repeat_passes(one_pass: Callable[[], dict]) -> list[dict]:
    """issue 42.2: passes of the same-values comparison (measure/timing.py repeat_check) until they decide
    (gates.repeat_settled: a first pass that says cache is measured again, PASS_GAP_S apart, so that a burst of
    a neighbour's load is not read as a cache); each pass with its figures (gates.repeat_pass), the row's
    evidence whichever way they decide (gates.repeated_values reads them)."""
    from . import gates

    passes: list[dict] = []
    while not gates.repeat_settled(passes):
        if passes:
            time.sleep(gates.PASS_GAP_S)
        seen = one_pass()
        passes.append({**seen, **gates.repeat_pass(seen["new_us"], seen.get("again_us"))})
    return passes


def late_probe(a: Attempt) -> None:
    """The calls after the timed ones: a path that changes after N calls shows here."""
    res = a.res
    a.late = late = dispatch.probe(a.step, a.device, a.classifier, calls=LATE_PROBE_CALLS)
    if res.get("kernel_calls_us") and late.call_kernel_us:  # the calls of both probes, in order
        res["kernel_calls_us"] = res["kernel_calls_us"] + late.call_kernel_us
    steady = dispatch.steady_kernel_us(res.get("kernel_us"), late.kernel_us, res.get("kernel_calls_us"))
    if steady is not None:
        res["kernel_us"] = steady
    if late.status == "probed":
        share = dispatch.undeclared_share(a.expected(), late, a.side())
        if share is not None:
            res["undeclared_share"] = max(share, res["undeclared_share"] or 0.0)


def counters(a: Attempt) -> None:
    """issue 39: the attempt's step replayed once under the collector, after every gate (OK attempts only) and
    outside every timed sample; the counters (or the note saying why none were read) travel beside the row's
    values (runner/counters_phase.py) and become its counters row."""
    from ..measure import counters as collect
    from .counters_phase import COUNTERS_KEY

    spec = {k: a.spec.get(k) for k in ("backend", "workload", "device", "seed", "inputs", "plugins")}
    a.res[COUNTERS_KEY] = collect.collect(spec, a.spec["counters"])


def recheck(a: Attempt) -> None:
    a.why = checks.recheck(a)


def confirm_cache(a: Attempt) -> None:
    """A host that stalled through every call on new values looks like a cache: re-measure before accusing,
    in passes apart in time (gates.CONFIRM_PASSES), each call on new values followed by one on the same
    values again, every call after the same pause. The calls are the row's evidence either way
    (check_detail["cache_gate"])."""
    import statistics

    from . import gates

    samples = a.timed.samples_us
    evidence = {"suspected": {"new_values_us": _us(a.fresh),
                              "timed_median_us": round(statistics.median(samples), 1) if samples else None},
                "passes": []}
    while not gates.cache_settled(evidence["passes"]):
        if evidence["passes"]:
            time.sleep(gates.PASS_GAP_S)
        a.fresh, a.same = checks.fresh_and_same(a, settle_s=gates.SETTLE_S, first=3 * len(evidence["passes"]))
        evidence["passes"].append({"new_us": _us(a.fresh), "same_us": _us(a.same),
                                   "cache": gates.pass_says_cache(a.fresh, a.same)})
    a.cache_passes = evidence["passes"]
    evidence["verdict"] = "cache" if gates.not_from_cache(a) else "cleared"
    a.res["check_detail"] = {**(a.res.get("check_detail") or {}), "cache_gate": evidence}


def _us(values) -> list[float]:
    return [round(v, 1) for v in values]
