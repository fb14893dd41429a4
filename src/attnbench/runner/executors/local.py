"""The local executor: isolated worker processes on this host's one device, warm per repeat."""
from __future__ import annotations

import errno
import logging
import os
import tempfile
import time
from dataclasses import dataclass, field
from typing import Iterable

from ...backends.base import Backend, DeviceInfo
from ...measure.timing import TimingConfig
from ...status import Status
from .. import jobs
from ..planner import Attempt
from ..supervisor import Worker, WorkerGone, WorkerTimeout
from .base import Claim, Executor, Outcome, Placement, Sink, Started, take_all

log = logging.getLogger(__name__)

# An attempt whose compiler cache vanished under it (removed by hand, by a run that knows no lease, or a file
# system without locks) failed for the harness's housekeeping, not for its backend: it runs again on a fresh
# worker, this many times at most.
VANISHED_CACHE_RETRIES = 1


@dataclass
class LocalConfig:
    plugins: list[str] = field(default_factory=list)
    timeout_s: float = 300.0
    seed: int = 0
    tol: float | None = None  # None: each dtype's tolerance (measure/correctness.py)
    inputs: str = "normal"  # input distribution of the first check and the timed calls
    timing: TimingConfig = field(default_factory=TimingConfig)
    log_path: str | None = None  # workers' stdout/stderr
    strict_isolation: bool = False  # a fresh process for every attempt of a compile-based backend
    log_level: int = logging.WARNING  # workers' logging level
    compile_cache: str | None = None  # a named compiler cache; None: a fresh one for this run
    # the run's own cache, made by the caller: the sweep's beside its store (cli: kept until the sweep has
    # finished, so a resumed run loads what the interrupted one compiled), or one for several executors
    # (executors/multi.py: one for every device, so a kernel one device compiled is not compiled again for its
    # neighbour); None: the executor makes a fresh one
    run_cache: str | None = None
    run_cache_resumed: bool = False  # run_cache held an interrupted run's compiled code when this run began
    run_cache_kept: bool = True  # run_cache outlives the run (the sweep's); False: the caller removes it at the end
    ceilings: bool = True  # measure the device's ceilings at start (the attempts' plausibility gates read them)
    counters: str | None = None  # issue 39: the counter set the counters phase reads (run --counters); None: none


def _disk_full(measured: dict) -> bool:
    """Whether an attempt failed because a disk is full (its compiler's cache, a library's files)."""
    reason = measured.get("reason") or ""
    return measured.get("status") in (Status.ERROR.value, Status.CRASH.value) and (
        "No space left on device" in reason or f"[Errno {errno.ENOSPC}]" in reason)


def worker_slot(backend, strict_isolation: bool = False) -> str | None:
    """The warm worker an attempt of this backend runs in: "shared", "backend:NAME", or None (a
    process of its own for the attempt)."""
    iso = backend.isolation
    if iso == "attempt" or (iso == "backend" and strict_isolation):
        return None
    return "shared" if iso == "worker" else f"backend:{backend.name}"


class LocalExecutor(Executor):
    """Owns the workers. A repeat gets fresh processes: one shared by backends with
    isolation="worker", one per backend with isolation="backend" (compile-based backends: no other
    backend's compiler state; the built-in ones also reset dynamo in prepare()), and a new process
    per attempt for isolation="attempt" (or for every non-shared backend with strict_isolation).
    A worker that crashed or timed out is replaced before the next attempt."""

    def __init__(self, cfg: LocalConfig, device: str = "cpu", cores: list[int] | None = None):
        """cores: host cores every worker pins itself to at start (executors/multi.py); None: not pinned."""
        super().__init__(overhead_s={"provenance": 0.0, "worker_start": 0.0, "worker_stop": 0.0, "release": 0.0})
        self.cfg, self.device, self.cores = cfg, device, cores
        self.workers: dict[str, Worker] = {}
        self.used: set[str] = set()  # worker slots that served the current workload
        self._repeat = None  # the repeat the current workers serve
        self._current = None  # the workload the workers hold inputs for
        self.starting: list[Worker] = []  # workers _prestart() waits on
        own = not (cfg.compile_cache or cfg.run_cache)
        self._fresh_cache = tempfile.TemporaryDirectory(prefix="attnbench-compile-") if own else None
        self.cache_dir = cfg.compile_cache or cfg.run_cache or self._fresh_cache.name

    def _spec(self, a: Attempt) -> dict:
        """The worker's message for one job (an attempt, a model step): its job type builds it."""
        return jobs.message(a, self.device, self.cfg)

    def _slot(self, backend) -> str | None:
        return worker_slot(backend, self.cfg.strict_isolation)

    def _new_worker(self, slot: str | None = None, wait: bool = True) -> Worker:
        compiler = slot is None or slot.startswith("backend:")
        warm = {"device": self.device, "compile_cache": self.cache_dir, "compiler": compiler, "cores": self.cores}
        ident = self._cache_identity(make=True) if compiler else None
        w = Worker(self.cfg.plugins, log_path=self.cfg.log_path, log_level=self.cfg.log_level, warm=warm, wait=wait)
        w.cache_identity = ident
        return w

    def _cache_identity(self, make: bool = False) -> tuple | None:
        """The compiler cache folder's (device, inode), None when it is missing; `make`: made first."""
        try:
            if make:
                os.makedirs(self.cache_dir, exist_ok=True)
            st = os.stat(self.cache_dir)
        except OSError:
            return None
        return st.st_dev, st.st_ino

    def _cache_vanished(self, w: Worker) -> bool:
        """Whether the compiler cache this compiler worker started with was removed (or replaced) since."""
        return w.cache_identity is not None and self._cache_identity() != w.cache_identity

    def _prestart(self, slots: set[str | None]) -> None:
        """Start every worker this repeat needs at once, then wait for their handshakes, before
        anything is timed: their start-up (seconds each on a GPU host) overlaps instead of adding up."""
        t0 = time.perf_counter()
        started = {slot: self._new_worker(slot, wait=False) for slot in sorted(set(slots) - {None} - set(self.workers))}
        self.starting = list(started.values())  # visible to another thread that must kill them (executors/multi.py)
        try:
            for slot, w in started.items():
                try:
                    self.workers[slot] = w.ready()
                except (WorkerTimeout, WorkerGone):
                    pass  # _get() starts another and reports the failure on the attempt
        except BaseException:  # interrupted while waiting: no started worker is left behind
            for slot, w in started.items():
                if self.workers.get(slot) is not w:
                    w.kill()
            raise
        finally:
            self.starting = []
            self.charge("worker_start", time.perf_counter() - t0)

    def _get(self, slot: str | None) -> Worker:
        if slot is None:
            return self._new_worker(slot)
        w = self.workers.get(slot)
        if w is None or not w.alive:
            w = self.workers[slot] = self._new_worker(slot)
        return w

    def _execute(self, a: Attempt) -> dict:
        """The attempt's measured values, or the TIMEOUT / CRASH its worker came to."""
        slot = self._slot(a.backend)
        if slot is not None:
            self.used.add(slot)
        try:
            w = self._get(slot)
        except WorkerTimeout as e:
            return {"status": Status.TIMEOUT.value, "reason": f"worker start: {e}"}
        except WorkerGone as e:
            return {"status": Status.CRASH.value, "reason": f"worker start: {e}"}
        try:
            res = w.call(self._spec(a), self.cfg.timeout_s)
            if res.pop("fatal", False):  # the worker exits itself: its CUDA context is unusable
                self._drop(slot, w)
            elif res.get("status") in (Status.ERROR.value, Status.CRASH.value) and self._cache_vanished(w):
                self._drop(slot, w)  # its compiler may remember files that are gone: a fresh one runs it again
                res["cache_vanished"] = True
            return res
        except WorkerTimeout as e:
            self._drop(slot, w)
            return {"status": Status.TIMEOUT.value, "reason": str(e)}
        except WorkerGone as e:
            vanished = self._cache_vanished(w)
            self._drop(slot, w)
            return {"status": Status.CRASH.value, "reason": str(e), **({"cache_vanished": True} if vanished else {})}
        finally:
            if slot is None:
                w.close()

    def _drop(self, slot: str | None, w: Worker) -> None:
        w.kill()
        if slot is not None:
            self.workers.pop(slot, None)

    def worker_processes(self) -> list:
        """The processes of this executor's warm workers, those being started included (another thread
        kills them to stop a run: executors/multi.py)."""
        return [w.proc for w in list(self.workers.values()) + list(self.starting)]

    def _release(self) -> None:
        """A new workload: the workers that served the previous one drop its inputs and reference,
        all at once (a release runs the garbage collector: a tenth of a second in a compiler process)."""
        t0 = time.perf_counter()
        asked = []
        for slot in sorted(self.used):
            w = self.workers.get(slot)
            if w is None:
                continue
            try:
                w.send({"op": "release"})
                asked.append((slot, w))
            except WorkerGone:
                self._drop(slot, w)
        for slot, w in asked:
            try:
                w.receive(60)
            except (WorkerTimeout, WorkerGone):
                self._drop(slot, w)
        self.used.clear()
        self.charge("release", time.perf_counter() - t0)

    def start(self, device: str, backends: list[Backend]) -> Started:
        """The shared worker collects the provenance (and measures the ceilings), then serves the
        first repeat. The workers of the other given backends start together with it (their
        start-ups overlap), and all of them are ready before the ceilings are measured, so nothing
        else uses the device meanwhile. (One may idle if the planner then finds nothing for it.)"""
        self.device = device
        self._prestart({"shared"} | {self._slot(b) for b in backends or ()})
        w = self._get("shared")
        t0 = time.perf_counter()
        kind = "named" if self.cfg.compile_cache else "resumed" if self.cfg.run_cache_resumed else "fresh"
        # kept: a later run can load what this one compiles (a named cache; the sweep's beside its store
        # until the sweep has finished), which is what lets a later repeat in a later part skip its compiles
        kept = bool(self.cfg.compile_cache) or (bool(self.cfg.run_cache) and self.cfg.run_cache_kept)
        cache = {"kind": kind, "dir": self.cache_dir, "kept": kept}
        res = w.call({"op": "provenance", "device": device, "seed": self.cfg.seed, "compile_cache": cache,
                      "ceilings": self.cfg.ceilings}, 600)
        if not res.get("ok"):
            raise RuntimeError(f"provenance collection failed: {res.get('error')}")
        self.charge("provenance", time.perf_counter() - t0)
        prov = res["provenance"]
        prov["timing"] = dict(self.cfg.timing.__dict__)  # the stopping rule's settings, --min-time's floor among them
        self.started = Started(prov, DeviceInfo.from_dict(prov["device"]), Placement.from_provenance(prov))
        return self.started

    def run(self, attempts: Iterable[Attempt], sink: Sink, claim: Claim = take_all) -> None:
        attempts = list(attempts)
        try:
            for a in attempts:
                self.enter_repeat(a.repeat, {self._slot(b.backend) for b in attempts if b.repeat == a.repeat})
                if not claim(a):
                    continue
                sink(self.run_attempt(a))
        finally:
            self.stop_workers()

    def enter_repeat(self, repeat: int, slots: set[str | None]) -> None:
        """Process-level repeats: every repeat gets fresh processes, the `slots` it needs started at
        once (the first repeat run keeps those started with start())."""
        if repeat == self._repeat:
            return
        if self._repeat is not None:
            self.stop_workers()
        self._prestart(slots)
        self._repeat = repeat

    def run_attempt(self, a: Attempt) -> Outcome:
        """Run one (claimed) attempt on this executor's workers; a new workload releases the last one's inputs."""
        if self._current not in (None, a.workload):
            self._release()
        self._current = a.workload
        for tries_left in range(VANISHED_CACHE_RETRIES, -1, -1):
            t0 = time.perf_counter()
            measured = self._execute(a)
            if _disk_full(measured):  # the host's failure, not the backend's: the run stops, the attempt stays to run
                raise OSError(errno.ENOSPC, f"No space left on device ({a.backend.name}: {measured.get('reason')})")
            if not measured.pop("cache_vanished", False):
                break
            if tries_left:  # the housekeeping's failure, not the backend's: its row is the next try's
                log.warning("%s: the compiler cache %s was removed during the attempt (%s); running it again",
                            a.backend.name, self.cache_dir, measured.get("reason"))
        return Outcome(a, measured, round(time.perf_counter() - t0, 4), self.started.placement)

    def close(self) -> None:
        """Stop every worker, and remove this run's fresh compiler cache (idempotent)."""
        self.stop_workers()
        if self._fresh_cache is not None:
            self._fresh_cache.cleanup()

    def stop_workers(self) -> None:
        """Stop every worker at once, then wait (a compiler process takes seconds to exit)."""
        t0 = time.perf_counter()
        ws = list(self.workers.values())
        self.used.clear()  # nothing of theirs is left to release
        for w in ws:
            w.request_stop()
        deadline = time.monotonic() + 10
        for w in ws:
            w.close(max(0.0, deadline - time.monotonic()))
        self.workers.clear()
        self._repeat = self._current = None
        self.charge("worker_stop", time.perf_counter() - t0)
