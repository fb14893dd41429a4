"""Runs planned attempts through isolated workers and writes exactly one row per attempt."""
from __future__ import annotations

import logging
import statistics
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable

from ..backends.base import DeviceInfo
from ..measure.timing import TimingConfig
from ..store.db import Store, utcnow
from ..workloads.cost import flops, io_bytes
from .planner import Attempt
from ..status import Status
from .supervisor import Worker, WorkerGone, WorkerTimeout

log = logging.getLogger(__name__)


@dataclass
class SweepConfig:
    device: str = "cpu"
    plugins: list[str] = field(default_factory=list)
    timeout_s: float = 300.0
    seed: int = 0
    tol: float = 3.0
    timing: TimingConfig = field(default_factory=TimingConfig)
    tag: str = "default"
    log_path: str | None = None  # workers' stdout/stderr
    strict_isolation: bool = False  # a fresh process for every attempt of a compile-based backend
    log_level: int = logging.WARNING  # workers' logging level


def new_run_id() -> str:
    return utcnow().replace(":", "").replace("-", "") + "-" + uuid.uuid4().hex[:6]


def percentile(xs: list[float], q: float) -> float:
    """Linear-interpolation quantile, q in [0, 1]."""
    import numpy as np

    return float(np.percentile(xs, 100 * q))


def toolkit_columns(prov: dict) -> dict:
    """The software a row ran under, copied from the run's provenance so an exported row stands alone."""
    sha = prov.get("git_sha")
    return {"torch_version": prov.get("torch"), "cuda_runtime": prov.get("cuda_runtime"),
            "cudnn_version": prov.get("cudnn"), "driver_version": (prov.get("device") or {}).get("driver"),
            "attnbench_sha": (sha + ("+dirty" if prov.get("git_dirty") else "")) if sha else None}


def make_row(a: Attempt, result: dict, run_id: str, cfg: SweepConfig, dev: DeviceInfo, index,
             toolkit: dict | None = None) -> dict:
    w = a.workload
    row = {
        "attempt_key": a.key, "run_id": run_id, "tag": cfg.tag, "backend": a.backend.name,
        "family": a.backend.family, "role": a.backend.role, "workload_key": w.key(), **w.to_dict(),
        "decode_append": w.decode_append, "repeat": a.repeat, "flops": flops(w), "bytes": io_bytes(w),
        "device_name": dev.name, "device_index": index, "created_at": utcnow(),
    }
    row.update(toolkit or {})
    keep = {"status", "reason", "samples_us", "calls_per_sample", "timer", "converged", "rel_err", "warmup_calls",
            "warmup_us", "cold_start_us", "peak_mem_bytes", "max_abs_err", "rmse", "cosine", "err_ratio", "ref_err",
            "check_detail", "phases_s", "wall_s", "dispatch_status", "dispatch_kernels", "dispatch_families", "sm_clock_mhz",
            "mem_clock_mhz", "temp_c", "power_w", "throttle"}
    row.update({k: v for k, v in result.items() if k in keep})
    samples = result.get("samples_us") or []
    if row["status"] == Status.OK.value and samples:
        row["median_us"] = statistics.median(samples)
        row["p95_us"] = percentile(samples, 0.95)
    elif row["status"] != Status.OK.value:
        row["samples_us"] = None  # a number is only reported if it is true
    return row


class Sweep:
    """Owns the workers. A repeat gets fresh processes: one shared by backends with
    isolation="worker", one per backend with isolation="backend" (compile-based backends: no other
    backend's compiler state; the built-in ones also reset dynamo in prepare()), and a new process
    per attempt for isolation="attempt" (or for every non-shared backend with strict_isolation).
    A worker that crashed or timed out is replaced before the next attempt."""

    def __init__(self, store: Store, cfg: SweepConfig, dev: DeviceInfo | None, run_id: str,
                 on_row: Callable[[dict], None] = lambda row: None):
        self.store, self.cfg, self.dev, self.run_id, self.on_row = store, cfg, dev, run_id, on_row
        self.workers: dict[str, Worker] = {}
        self.toolkit: dict = {}
        self.used: set[str] = set()  # worker slots that served the current workload
        self.overhead_s = {"provenance": 0.0, "worker_start": 0.0, "worker_stop": 0.0, "release": 0.0,
                           "store": 0.0}
        self.index = int(cfg.device.split(":")[1]) if ":" in cfg.device else (0 if cfg.device == "cuda" else None)

    def _spec(self, a: Attempt) -> dict:
        return {"op": "attempt", "backend": a.backend.name, "workload": a.workload.to_dict(), "device": self.cfg.device,
                "seed": self.cfg.seed, "tol": self.cfg.tol, "timing": self.cfg.timing.__dict__, "repeat": a.repeat}

    def _slot(self, backend) -> str | None:
        iso = backend.isolation
        if iso == "attempt" or (iso == "backend" and self.cfg.strict_isolation):
            return None
        return "shared" if iso == "worker" else f"backend:{backend.name}"

    def _new_worker(self, slot: str | None = None, wait: bool = True) -> Worker:
        warm = {"device": self.cfg.device, "compiler": slot is None or slot.startswith("backend:")}
        return Worker(self.cfg.plugins, log_path=self.cfg.log_path, log_level=self.cfg.log_level, warm=warm,
                      wait=wait)

    def _prestart(self, slots: set[str | None]) -> None:
        """Start every worker this repeat needs at once, then wait for their handshakes, before
        anything is timed: their start-up (seconds each on a GPU host) overlaps instead of adding up."""
        t0 = time.perf_counter()
        started = {slot: self._new_worker(slot, wait=False) for slot in sorted(set(slots) - {None} - set(self.workers))}
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
            self.overhead_s["worker_start"] += time.perf_counter() - t0

    def _get(self, slot: str | None) -> Worker:
        if slot is None:
            return self._new_worker(slot)
        w = self.workers.get(slot)
        if w is None or not w.alive:
            w = self.workers[slot] = self._new_worker(slot)
        return w

    def _execute(self, a: Attempt) -> dict:
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
            if res.get("fatal"):  # the worker exits itself: its CUDA context is unusable
                self._drop(slot, w)
            return res
        except WorkerTimeout as e:
            self._drop(slot, w)
            return {"status": Status.TIMEOUT.value, "reason": str(e)}
        except WorkerGone as e:
            self._drop(slot, w)
            return {"status": Status.CRASH.value, "reason": str(e)}
        finally:
            if slot is None:
                w.close()

    def _drop(self, slot: str | None, w: Worker) -> None:
        w.kill()
        if slot is not None:
            self.workers.pop(slot, None)

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
        self.overhead_s["release"] += time.perf_counter() - t0

    def run(self, attempts: list[Attempt]) -> dict[str, int]:
        done = self.store.done_keys()
        counts: dict[str, int] = {}
        current = None
        repeat = None  # the repeat the current workers serve
        try:
            for a in attempts:
                if a.key in done:
                    self.on_row({"status": "SKIPPED", "backend": a.backend.name})
                    continue
                if a.repeat != repeat:  # process-level repeats: every repeat gets fresh processes
                    if repeat is not None:  # (the first one run here keeps those started for the provenance)
                        self.close()
                    self._prestart({self._slot(b.backend) for b in attempts
                                    if b.repeat == a.repeat and b.key not in done and not b.planned})
                    repeat = a.repeat
                if not a.planned and current not in (None, a.workload):
                    self._release()
                if not a.planned:
                    current = a.workload
                t0 = time.perf_counter()
                result = ({"status": a.planned.value, "reason": a.reason} if a.planned else self._execute(a))
                result["wall_s"] = round(time.perf_counter() - t0, 4)
                row = make_row(a, result, self.run_id, self.cfg, self.dev, self.index, self.toolkit)
                t1 = time.perf_counter()
                self.store.insert(row)
                self.overhead_s["store"] += time.perf_counter() - t1
                done.add(a.key)
                counts[row["status"]] = counts.get(row["status"], 0) + 1
                self.on_row(row)
        finally:
            self.close()
        return counts

    def provenance(self, backends: list | None = None) -> dict:
        """Collected by the shared worker, which then serves the first repeat. The workers of the
        other given backends start together with it (their start-ups overlap), and all of them
        are ready before the ceilings are measured, so nothing else uses the device meanwhile.
        (One may idle if the planner then finds nothing for its backend to run.)"""
        self._prestart({"shared"} | {self._slot(b) for b in backends or ()})
        w = self._get("shared")
        t0 = time.perf_counter()
        res = w.call({"op": "provenance", "device": self.cfg.device, "seed": self.cfg.seed}, 600)
        if not res.get("ok"):
            raise RuntimeError(f"provenance collection failed: {res.get('error')}")
        self.overhead_s["provenance"] = time.perf_counter() - t0
        prov = res["provenance"]
        self.toolkit = toolkit_columns(prov)
        return prov

    def close(self) -> None:
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
        self.overhead_s["worker_stop"] += time.perf_counter() - t0
