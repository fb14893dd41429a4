"""A whole run: start the executor, plan, filter what is already stored (resume), write the
planned-out rows, let the executor run the rest into the sink, record the run. The same for every
job type (runner/jobs.py): a RunRequest's attempts, a ModelRequest's model steps."""
from __future__ import annotations

import logging
import sqlite3
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import ClassVar

from ..backends.base import Backend
from ..store.db import Store
from ..workloads import Workload
from .eta import Remaining, typical_wall
from . import jobs
from .executors.base import Executor, Outcome
from .planner import Attempt
from .sink import RowSink, new_run_id

log = logging.getLogger(__name__)


@dataclass
class RunRequest:
    """What the user asked for."""

    op: ClassVar[str] = "attempt"  # its job type (runner/jobs.py)
    device: str
    workloads: list[Workload]
    backends: list[Backend]
    repeats: int = 1
    tag: str = "default"
    seed: int = 0
    inputs: str = "normal"  # input distribution of the timed calls (measure/inputs.py)
    grid: str = ""
    argv: str = ""
    retry_failed: bool = False  # TIMEOUT, CRASH and ERROR rows of these attempts are run again
    began: float | None = None  # time.monotonic() when the command began; None: when conduct() was called
    take_over_claims: bool = False  # other hosts' claims are taken whatever their age (the user says they are gone)


@dataclass
class RunReport:
    run_id: str
    attempts: list[Attempt]  # the whole plan
    resumed: int  # attempts already stored, skipped
    retried: int  # failed rows removed to be run again
    counts: Counter = field(default_factory=Counter)  # statuses written by this run
    overhead_s: dict = field(default_factory=dict)
    startup_s: float | None = None  # from the command's start to the run's (interpreter, workers, provenance, plan)
    held: int = 0  # attempts left without a row: another live run claims them (store/claims.py)
    held_by: str = ""  # who holds those claims: host, pid, how fresh


class Observer:
    """Told what a run is doing and every row it writes (a progress bar, a log)."""

    def starting(self, device: str) -> None:
        """The executor is starting (workers, provenance, ceilings): seconds to minutes."""

    def begin(self, total: int, resumed: int, retried: int) -> None:
        """The plan is made: `total` attempts, `resumed` of them already stored."""

    def attempt(self, attempt: Attempt, where: str | None = None) -> None:
        """This attempt starts running now (it is claimed for this run), on device `where` when several
        run at once."""

    def row(self, row: dict) -> None:
        """One row was written."""

    def forecast(self, remaining: Remaining) -> None:
        """After begin: the attempts to run, as rows arrive; remaining.seconds() is the ETA."""


def pending(attempts: list[Attempt], done: set[str]) -> list[Attempt]:
    """Resume: the attempts that have no row yet."""
    return [a for a in attempts if a.key not in done]


def plan_only(executor: Executor, req: RunRequest) -> list[Attempt]:
    """Start the executor (device facts and provenance) and plan; nothing is written."""
    executor.start(req.device, [])
    return executor.plan(req.workloads, req.backends, req.repeats, req.tag, req.seed, req.inputs)


def conduct(executor: Executor, store: Store, req: RunRequest, observer: Observer | None = None) -> RunReport:
    """Run the request through the executor into the store; returns what was done. The executor
    is closed on the way out, also when interrupted."""
    job_type = jobs.of_request(req)
    observer = observer or Observer()
    began = time.monotonic() if req.began is None else req.began
    try:
        observer.starting(req.device)
        started = executor.start(req.device, req.backends)
        attempts = job_type.plan(executor, req)
        retried = job_type.delete_failed(store, {a.key for a in attempts}) if req.retry_failed else 0
        todo = pending(attempts, job_type.done(store))
        report = RunReport(new_run_id(), attempts, len(attempts) - len(todo), retried,
                           startup_s=round(time.monotonic() - began, 2))
        # start-up is known now: an interrupted run (no finish) still counts it in its wall
        store.start_run(report.run_id, req.tag, req.grid, req.argv, started.device.name,
                        {**started.provenance, "startup_s": report.startup_s})
        prov = started.provenance
        runnable = [a for a in todo if not a.planned]
        remaining = Remaining(runnable, typical_wall(job_type.walls(store)), len(executor.placements) or 1)
        key = job_type.table.key
        sink = RowSink(store, report.run_id, req.tag, job_type.run_columns(prov, req), prov.get("ceilings") or {},
                       (prov.get("device") or {}).get("l2_bytes"), started.device.type,
                       observers=[lambda row: remaining.row({"attempt_key": row[key], "status": row["status"],
                                                             "wall_s": row["wall_s"]}),
                                  observer.row, lambda row: report.counts.update([row["status"]])],
                       models=prov.get("models") or {}, make_row=job_type.row_maker(req), insert=job_type.insert)
        observer.begin(len(attempts), report.resumed, retried)
        observer.forecast(remaining)
        for a in todo:  # planned out (UNSUPPORTED, OOM_PREDICTED): written without running
            if a.planned:
                sink(Outcome(a, {"status": a.planned.value, "reason": a.reason}, 0.0, executor.placement_for(a)))
        def claim(a: Attempt, where: str | None = None) -> bool:
            taken = store.claim(a.key, report.run_id, take_over=getattr(req, "take_over_claims", False))
            if taken:
                observer.attempt(a, where)
            return taken

        try:
            with store.heartbeat(report.run_id):  # this run's claims stay fresh for runs on other hosts
                executor.run(runnable, sink, claim)
        finally:
            _release(store, report.run_id)
        written = job_type.done(store)
        unwritten = [a.key for a in runnable if a.key not in written]
        report.held, report.held_by = len(unwritten), store.claimants(unwritten) if unwritten else ""
        report.overhead_s = {k: round(v, 2) for k, v in {**executor.overhead_s, "store": sink.store_s}.items()}
        store.finish_run(report.run_id, {"sweep_overhead_s": report.overhead_s})  # start-up: stored at the start
        return report
    finally:
        executor.close()



def _release(store: Store, run_id: str) -> None:
    """Give back this run's claims on the way out, interrupted or not. A store that cannot be written (the
    disk full) keeps them, and the error that stopped the run is the one reported: those claims lapse with
    this process on this host, and after CLAIM_STALE_S without a heartbeat anywhere (store/claims.py)."""
    try:
        store.release_claims(run_id)
    except sqlite3.Error as e:
        log.info("this run's claims could not be released: %s (they lapse once this process has ended)", e)
