"""The multi-device executor: one warm worker set per device of this host (a LocalExecutor each, pinned
to host cores of its own), a dispatcher thread per device pulling whole (repeat, workload) groups, and
every claim and outcome handled on the calling thread (one store, one writer)."""
from __future__ import annotations

import dataclasses
import multiprocessing
import os
import tempfile
import threading
from typing import Callable

from ..planner import Attempt
from ..supervisor import WORKER_NAME
from .base import Placement, Registration, Started, Target
from .devices import DeviceSpec, check_device, cuda_count, default_device, parse_devices
from .local import LocalConfig, LocalExecutor
from .pooled import PooledExecutor


def core_sets(n: int, available: list[int] | None = None) -> list[list[int] | None]:
    """Disjoint, contiguous sets of the host cores this process may use, one per device (cores left
    over stay with the parent); None for every device where pinning is impossible (fewer cores than
    devices, or no sched_setaffinity)."""
    if available is None:
        if not hasattr(os, "sched_getaffinity"):
            return [None] * n
        available = sorted(os.sched_getaffinity(0))
    size = len(available) // n if n else 0
    if size < 1:
        return [None] * n
    return [available[i * size:(i + 1) * size] for i in range(n)]


def format_cores(cores: list[int] | None) -> str | None:
    """[0, 1, 2, 3, 8] -> "0-3,8" (the record's host_cores)."""
    if not cores:
        return None
    runs, start = [], None
    for c, nxt in zip(sorted(cores), sorted(cores)[1:] + [None]):
        start = c if start is None else start
        if nxt != c + 1:
            runs.append(str(c) if start == c else f"{start}-{c}")
            start = None
    return ",".join(runs)


class _LocalLane:
    """A device of this host as executors/groups.py's loop sees it: its LocalExecutor."""

    def __init__(self, owner: "MultiExecutor", i: int, ex: LocalExecutor, label: str):
        self.owner, self.i, self.ex, self.label = owner, i, ex, label
        self.queue = None  # set once the plan is routed

    @property
    def ledger(self) -> dict[str, float]:
        return self.ex.overhead_s

    def enter_repeat(self, repeat: int, slots: set) -> None:
        self.ex.enter_repeat(repeat, slots)

    def run_attempt(self, a: Attempt):
        outcome = self.ex.run_attempt(a)
        outcome.placement = self.owner.placements[self.i]
        return outcome

    def stop_workers(self) -> None:
        self.ex.stop_workers()

    def recover(self) -> bool:  # a local device is never lost (its crashed workers are replaced per attempt)
        return False


class MultiExecutor(PooledExecutor):
    """Every attempt of a (repeat, workload) group runs on one device, so drift is common to the
    backends of a workload. Default: the plan is sharded, the devices (of one model) sharing one queue,
    each walking a contiguous run of it (executors/groups.py: Runs; attempt keys as on one device:
    resume works across device counts). replicate: every device runs the whole plan, under keys that
    hold the device's UUID (or its index)."""

    def __init__(self, cfg: LocalConfig, devices: list[DeviceSpec], replicate: bool = False, pin: bool = True,
                 make: Callable[..., LocalExecutor] = LocalExecutor):
        """make(cfg, torch_device, cores): each device's worker set (a test passes a LocalExecutor
        whose workers are simulated)."""
        if not devices:
            raise ValueError("no device")
        super().__init__(replicate, cfg.strict_isolation)
        self.devices = devices
        # one fresh compiler cache for the run, shared by every device's workers (as one device's workers
        # share theirs): split over several, the kernels that workloads have in common were compiled once
        # per device (the quick grid sharded over two H200s: first calls 189 s in all against 155 s on one)
        self._run_cache = None
        if not cfg.compile_cache and not cfg.run_cache:
            self._run_cache = tempfile.TemporaryDirectory(prefix="attnbench-compile-")
            cfg = dataclasses.replace(cfg, run_cache=self._run_cache.name, run_cache_kept=False)
        self.cores = core_sets(len(devices)) if pin else [None] * len(devices)
        self.execs = [make(cfg, d.torch_device, c) for d, c in zip(devices, self.cores)]
        self.lanes = [_LocalLane(self, i, ex, d.label) for i, (ex, d) in enumerate(zip(self.execs, devices))]

    def start(self, device: str, backends) -> Started:
        """Start every device's workers and collect its provenance, all devices at once."""
        errors: list[BaseException] = []

        def one(ex):
            try:
                ex.start(ex.device, backends)
            except BaseException as e:  # reported on the calling thread
                errors.append(e)

        threads = [threading.Thread(target=one, args=(ex,), name=f"attnbench-start-{d.label}", daemon=True)
                   for ex, d in zip(self.execs, self.devices)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        self._placements = []
        for ex, d, c in zip(self.execs, self.devices, self.cores):
            p = ex.started.placement
            index = p.device_index if p.device_index is not None else d.index
            self._placements.append(Placement(p.device_name, index, p.device_uuid, format_cores(c)))
        names = sorted({p.device_name for p in self._placements})
        if not self.replicate and len(names) > 1:
            raise RuntimeError(f"sharding a plan needs devices of one model, got {' and '.join(names)}: "
                               "use --replicate, or one model's devices")
        self._models = {}
        for i, p in enumerate(self._placements):
            self._models.setdefault(p.device_name, i)
        first = self.execs[0].started
        prov = {**first.provenance, "replicate": self.replicate,
                "devices": [{"label": d.label, **p.to_record(), "ceilings": ex.started.provenance.get("ceilings")}
                            for d, p, ex in zip(self.devices, self._placements, self.execs)]}
        self.started = Started(prov, first.device, Placement(first.placement.device_name))
        return self.started

    def device_info(self, i: int):
        return self.execs[i].started.device

    def device_id(self, i: int) -> str:
        """The identity of device i in replicated attempt keys: its UUID, else its index."""
        p = self._placements[i]
        return p.device_uuid or f"index {p.device_index}"

    def kill(self, everything: bool = False) -> None:
        """Kill the devices' workers (those being started too), so no dispatcher waits on one. After
        a grace period, every worker process of this process: one started for a single attempt, or
        to replace a dead worker, is known only to the thread that waits on it."""
        procs = [p for ex in self.execs for p in ex.worker_processes()]
        if everything:
            procs += [p for p in multiprocessing.active_children() if p.name == WORKER_NAME]
        for p in procs:
            if p.is_alive():
                p.kill()

    def close(self) -> None:
        for ex in self.execs:
            ex.close()
        if self._run_cache is not None:
            self._run_cache.cleanup()


def _resolve(device, devices, replicate, address) -> Target:
    """--device, or --devices (with --replicate) of this host."""
    if address is not None:
        raise ValueError("--address needs --executor ray")
    if devices is None:
        if replicate:
            raise ValueError("--replicate needs --devices")
        device = check_device(device or default_device())
        return Target(device, None, device, on_this_host=True)
    if device is not None:
        raise ValueError("--device and --devices exclude each other")
    specs = tuple(parse_devices(devices, cuda_count))
    return Target(specs[0].torch_device, specs, ",".join(d.label for d in specs), on_this_host=True)


def _build(cfg: LocalConfig, target: Target, replicate: bool, address: str | None):
    return MultiExecutor(cfg, list(target.devices), replicate) if target.devices else LocalExecutor(cfg)


# local: worker processes on this host, on its one device (LocalExecutor) or on several (MultiExecutor)
REGISTRATION = Registration("local", _resolve, _build)
