"""The multi-device executor: one warm worker set per device (a LocalExecutor each, pinned to host
cores of its own), a dispatcher thread per device pulling whole (repeat, workload) groups, and
every claim and outcome handled on the calling thread (one store, one writer)."""
from __future__ import annotations

import dataclasses
import multiprocessing
import os
import tempfile
import threading
from dataclasses import dataclass
from typing import Callable, Iterable

from . import planner
from .executor import Claim, Placement, Sink, Started, take_all
from .groups import drive, group_queues
from .local import LocalConfig, LocalExecutor
from .planner import Attempt
from .supervisor import WORKER_NAME


@dataclass(frozen=True)
class DeviceSpec:
    """One device of a multi-device run."""

    label: str  # as given: "cuda:1", or "cpu:1" (a fake device: a CPU worker set of its own, for tests)
    torch_device: str  # what its workers bind: "cuda:1" or "cpu"
    index: int


def parse_devices(text: str, cuda_count: Callable[[], int]) -> list[DeviceSpec]:
    """--devices all | 0,1,... | cuda:0,cuda:1 | cpu:0,cpu:1 (fake devices: CPU worker sets for tests
    and laptops). ValueError with one line for anything else."""
    items = [x.strip() for x in text.split(",")]
    if not text.strip() or any(not x for x in items):
        raise ValueError(f"bad --devices {text!r}: use all, a comma list of CUDA indices (0,1) or cpu:0,cpu:1")
    if items == ["all"]:
        n = cuda_count()
        if n < 1:
            raise ValueError("--devices all: no CUDA device is visible (use cpu:0,cpu:1 for fake CPU devices)")
        return [DeviceSpec(f"cuda:{i}", f"cuda:{i}", i) for i in range(n)]
    out, kinds = [], set()
    for x in items:
        kind, _, num = x.rpartition(":") if ":" in x else ("cuda", "", x)
        if kind not in ("cuda", "cpu") or not num.isdigit():
            raise ValueError(f"bad device {x!r} in --devices: use all, N, cuda:N or cpu:N")
        kinds.add(kind)
        i = int(num)
        out.append(DeviceSpec(f"{kind}:{i}", "cpu" if kind == "cpu" else f"cuda:{i}", i))
    if len(kinds) > 1:
        raise ValueError("--devices mixes CPU and CUDA devices")
    labels = [d.label for d in out]
    dup = next((x for x in labels if labels.count(x) > 1), None)
    if dup:
        raise ValueError(f"--devices names {dup} twice")
    if "cuda" in kinds:
        n = cuda_count()
        bad = next((d for d in out if d.index >= n), None)
        if bad and n == 0:
            raise ValueError(f"device {bad.label} requested but no CUDA device is visible")
        if bad:
            raise ValueError(f"device {bad.label} does not exist (this host has {n} CUDA device(s))")
    return out


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
    """A device of this host as runner/groups.py's loop sees it: its LocalExecutor and placement."""

    def __init__(self, ex: LocalExecutor, placement: Placement, queue, label: str):
        self.ex, self.placement, self.queue, self.label = ex, placement, queue, label

    def enter_repeat(self, repeat: int, slots: set) -> None:
        self.ex.enter_repeat(repeat, slots)

    def run_attempt(self, a: Attempt):
        outcome = self.ex.run_attempt(a)
        outcome.placement = self.placement
        return outcome

    def stop_workers(self) -> None:
        self.ex._stop_workers()

    def recover(self) -> bool:  # a local device is never lost (its crashed workers are replaced per attempt)
        return False


class MultiExecutor:
    """Every attempt of a (repeat, workload) group runs on one device, so drift is common to the
    backends of a workload. Default: the plan is sharded, the devices sharing one queue, each walking
    a contiguous run of it (runner/groups.py: Runs; attempt keys as on one device: resume works across
    device counts). replicate: every device runs the whole plan, under keys that hold the device's
    UUID (or its index)."""

    def __init__(self, cfg: LocalConfig, devices: list[DeviceSpec], replicate: bool = False, pin: bool = True,
                 make: Callable[..., LocalExecutor] = LocalExecutor):
        """make(cfg, torch_device, cores): each device's worker set (a test passes a LocalExecutor
        whose workers are simulated)."""
        if not devices:
            raise ValueError("no device")
        self.devices, self.replicate = devices, replicate
        # one fresh compiler cache for the run, shared by every device's workers (as one device's workers
        # share theirs): split over several, the kernels that workloads have in common were compiled once
        # per device (the quick grid sharded over two H200s: first calls 189 s in all against 155 s on one)
        self._run_cache = None
        if not cfg.compile_cache and not cfg.run_cache:
            self._run_cache = tempfile.TemporaryDirectory(prefix="attnbench-compile-")
            cfg = dataclasses.replace(cfg, run_cache=self._run_cache.name, run_cache_kept=False)
        self.cores = core_sets(len(devices)) if pin else [None] * len(devices)
        self.execs = [make(cfg, d.torch_device, c) for d, c in zip(devices, self.cores)]
        self.placements: list[Placement] = []
        self.started: Started | None = None
        self._owner: dict[str, int] = {}  # replicate: attempt key -> device position

    @property
    def labels(self) -> list[str]:
        return [d.label for d in self.devices]

    @property
    def overhead_s(self) -> dict[str, float]:
        """Seconds outside attempts, summed over the devices (which spend them in parallel)."""
        out: dict[str, float] = {}
        for ex in self.execs:
            for k, v in ex.overhead_s.items():
                out[k] = out.get(k, 0.0) + v
        return out

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
        self.placements = []
        for ex, d, c in zip(self.execs, self.devices, self.cores):
            p = ex.started.placement
            index = p.device_index if p.device_index is not None else d.index
            self.placements.append(Placement(p.device_name, index, p.device_uuid, format_cores(c)))
        names = sorted({p.device_name for p in self.placements})
        if not self.replicate and len(names) > 1:
            raise RuntimeError(f"sharding a plan needs devices of one model, got {' and '.join(names)}: "
                               "use --replicate, or one model's devices")
        first = self.execs[0].started
        prov = {**first.provenance, "replicate": self.replicate,
                "devices": [{"label": d.label, **p.to_record(), "ceilings": ex.started.provenance.get("ceilings")}
                            for d, p, ex in zip(self.devices, self.placements, self.execs)]}
        self.started = Started(prov, first.device, Placement(first.placement.device_name))
        return self.started

    def device_id(self, i: int) -> str:
        """The identity of device i in replicated attempt keys: its UUID, else its index."""
        p = self.placements[i]
        return p.device_uuid or f"index {p.device_index}"

    def plan(self, workloads, backends, repeats, tag, seed, inputs="normal") -> list[Attempt]:
        if self.started is None:
            raise RuntimeError("plan() before start()")
        if not self.replicate:
            return planner.plan(workloads, backends, self.started.device, repeats, tag, seed, inputs)
        out = []
        for i, ex in enumerate(self.execs):
            mine = planner.plan(workloads, backends, ex.started.device, repeats, tag, seed, inputs, self.device_id(i))
            self._owner.update((a.key, i) for a in mine)
            out += mine
        return out

    def placement_for(self, attempt: Attempt) -> Placement:
        """A planned-out attempt: its device under replicate; under sharding it ran nowhere."""
        if self.started is None:
            raise RuntimeError("placement_for() before start()")
        i = self._owner.get(attempt.key)
        return self.started.placement if i is None else self.placements[i]

    def _queue_of(self, a: Attempt) -> int:
        """One shared queue, or one per device under replicate."""
        return self._owner[a.key] if self.replicate else 0

    def run(self, attempts: Iterable[Attempt], sink: Sink, claim: Claim = take_all) -> None:
        queues, slots = group_queues(attempts, self._queue_of, self.execs[0]._slot)
        lanes = [_LocalLane(ex, p, i if self.replicate else 0, d.label)
                 for i, (ex, p, d) in enumerate(zip(self.execs, self.placements, self.devices))]
        drive(lanes, queues, slots, sink, claim, self._kill_workers)

    def _kill_workers(self, everything: bool = False) -> None:
        """Kill the devices' workers (those being started too), so no dispatcher waits on one. After
        a grace period, every worker process of this process: one started for a single attempt, or
        to replace a dead worker, is known only to the thread that waits on it."""
        procs = [w.proc for ex in self.execs for w in list(ex.workers.values()) + list(ex.starting)]
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
