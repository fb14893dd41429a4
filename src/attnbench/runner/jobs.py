"""Job types: what conduct() plans, a worker runs and the sink records, one entry each: an attempt
(`attnbench run`, one row in attempts) and a model step (`attnbench model`, one row in model_rows).

Executors see every job alike: an object with key, backend, repeat, workload (what grouping and
the release between workloads go by) and planned/reason; message() builds the worker's request
for it, and the worker runs it through the registry (worker.py). A new job type is one entry in
TYPES with its record table declared in attnbench/record/."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .. import record
from ..store import model_rows
from ..store.db import Store
from . import jobs_model
from .planner import Attempt
from .sink import attempt_row, toolkit_columns


@dataclass(frozen=True)
class JobType:
    """One kind of job, from its plan to its stored row; the runner's parts call through it."""

    op: str  # the worker message's op
    job: type  # the class of its jobs
    table: record.Table  # where its rows go
    plan: Callable[[Any, Any], list]  # (started executor, request) -> every job of the run
    message: Callable[[Any, str, Any], dict]  # (job, device, the executor's LocalConfig) -> the worker's request
    work: Callable[[dict, Any, Any, Any], dict]  # in the worker: (message, backend, cache, classifier) -> values
    cache: Callable[[], Any]  # in the worker: what its jobs share (clear() drops it: a new workload, a release)
    run_columns: Callable[[dict, Any], dict]  # (provenance, request) -> the values every row of the run carries
    row_maker: Callable[[Any], Callable]  # request -> row(outcome, sink) -> the finished row (a dict)
    done: Callable[[Store], set]  # keys already stored (resume)
    insert: Callable[[Store, dict], bool]  # write one row; False when its key has one already
    delete_failed: Callable[[Store, set], int]  # --retry-failed
    walls: Callable[[Store], list]  # OK rows' walls an ETA reads (runner/eta.py)


# ---- attempts (runner/attempt.py) -----------------------------------------------------------------
def _attempt_message(a: Attempt, device: str, cfg) -> dict:
    return {"op": "attempt", "backend": a.backend.name, "workload": a.workload.to_dict(), "device": device,
            "seed": cfg.seed, "tol": cfg.tol, "inputs": cfg.inputs, "timing": cfg.timing.__dict__, "repeat": a.repeat,
            **({"counters": cfg.counters, "plugins": list(cfg.plugins)} if getattr(cfg, "counters", None) else {})}


def _attempt_work(msg: dict, backend, cache, classifier) -> dict:
    from . import attempt

    res = attempt.run(msg, backend, cache, classifier)
    if res.get("status") != "OK":
        cache.clear()  # a failed backend may have scribbled on the shared inputs
    return res


def _workload_cache():
    from .attempt import WorkloadCache

    return WorkloadCache()


# ---- model steps (model/step.py) ------------------------------------------------------------------
def _model_work(msg: dict, backend, cache, classifier) -> dict:
    from ..model import step

    return step.run(msg, backend, cache, classifier)


def _spec_cache():
    from ..model.step import SpecCache

    return SpecCache()


def _model_insert(store: Store, row: dict) -> bool:
    return model_rows.insert(store.con, row)


def _model_done(store: Store) -> set:
    model_rows.ensure(store.con)  # a store's first model run makes the table
    return model_rows.keys(store.con)


ATTEMPT = JobType(
    "attempt", Attempt, record.ATTEMPTS,
    plan=lambda ex, req: ex.plan(req.workloads, req.backends, req.repeats, req.tag, req.seed, req.inputs),
    message=_attempt_message, work=_attempt_work, cache=_workload_cache,
    run_columns=lambda prov, req: {**toolkit_columns(prov), "inputs": req.inputs},
    row_maker=lambda req: attempt_row, done=Store.done_keys, insert=Store.insert,
    delete_failed=Store.delete_failed, walls=Store.ok_walls)
MODEL_STEP = JobType(
    "model_step", jobs_model.ModelStep, record.MODEL_STEPS,
    plan=lambda ex, req: ex.plan_jobs(lambda dev, device_id: jobs_model.plan(req, dev, device_id)),
    message=jobs_model.message, work=_model_work, cache=_spec_cache,
    run_columns=lambda prov, req: toolkit_columns(prov),
    row_maker=jobs_model.ModelRows, done=_model_done, insert=_model_insert,
    delete_failed=lambda store, keys: model_rows.delete_failed(store.con, keys), walls=lambda store: [])
TYPES: dict[str, JobType] = {t.op: t for t in (ATTEMPT, MODEL_STEP)}


def of_job(job) -> JobType:
    return next(t for t in TYPES.values() if isinstance(job, t.job))


def of_request(req) -> JobType:
    """The job type a request to conduct() asks for (its class names it: RunRequest.op, ModelRequest.op)."""
    return TYPES[req.op]


def message(job, device: str, cfg) -> dict:
    """The worker's request for one job (the executors' hook: runner/local.py)."""
    return of_job(job).message(job, device, cfg)
