"""The executor seam: the one base class every executor extends (planning, placement, the overhead
ledger), what an executor reports back, and the registration the command line reads."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from ...backends.base import Backend, DeviceInfo
from ...workloads import Workload
from .. import planner
from ..planner import Attempt


@dataclass(frozen=True)
class Placement:
    """Where an attempt ran: the record's executor columns."""

    device_name: str
    device_index: int | None = None
    device_uuid: str | None = None
    host_cores: str | None = None  # the host cores its workers were pinned to (executors/multi.py), e.g. "0-7"

    def to_record(self) -> dict:
        return {"device_name": self.device_name, "device_index": self.device_index, "device_uuid": self.device_uuid,
                "host_cores": self.host_cores}

    @classmethod
    def from_provenance(cls, prov: dict) -> "Placement":
        d = prov["device"]
        return cls(d.get("name", d["type"]), d.get("index"), d.get("uuid"))


@dataclass
class Started:
    """What an executor knows once it has started: the run's provenance (measured on its device),
    the device facts that supports() and the planner look at, and where its attempts run."""

    provenance: dict
    device: DeviceInfo
    placement: Placement


@dataclass
class Outcome:
    """One attempt's result as an executor reports it to the sink."""

    attempt: Attempt
    measured: dict  # record values of origin "attempt" (status, reason, timing, checks, ...)
    wall_s: float  # the whole attempt as the executor saw it
    placement: Placement


Sink = Callable[[Outcome], None]
# claim(attempt, where=None): False when another run sharing the store has taken (or done) it; `where`
# names the device that will run it when several run at once (a lane's label, e.g. "cuda:1")
Claim = Callable[..., bool]


def take_all(attempt: Attempt, where: str | None = None) -> bool:
    return True


class Executor:
    """Runs attempts somewhere and reports each outcome. Executors treat attempts as opaque jobs: they
    look at a job's key, backend, repeat and workload (grouping, worker slots), nothing else.

    This base plans on the one started device and places every attempt there; executors of several
    devices extend PooledExecutor (executors/pooled.py)."""

    def __init__(self, started: Started | None = None, overhead_s: dict[str, float] | None = None):
        self.started = started
        self._ledger: dict[str, float] = dict(overhead_s or {})

    # ---- what every executor implements -----------------------------------------------------------

    def start(self, device: str, backends: list[Backend]) -> Started:
        """Get ready to run attempts of these backends on `device`; collect the provenance."""
        raise NotImplementedError

    def run(self, attempts: Iterable[Attempt], sink: Sink, claim: Claim = take_all) -> None:
        """Run the attempts (none of them planned-out or already done) and hand each outcome to
        the sink, exactly once per attempt, as it completes. Each attempt is claimed right before
        it runs; one another run has claimed is skipped without an outcome."""
        raise NotImplementedError

    def close(self) -> None:
        """Release every process and device the executor holds (idempotent)."""

    # ---- shared -------------------------------------------------------------------------------------

    @property
    def overhead_s(self) -> dict[str, float]:
        """Seconds spent outside attempts, by cause (recorded with the run)."""
        return self._ledger

    def charge(self, cause: str, seconds: float) -> None:
        self._ledger[cause] = self._ledger.get(cause, 0.0) + seconds

    def plan(self, workloads: list[Workload], backends: list[Backend], repeats: int, tag: str, seed: int,
             inputs: str = "normal") -> list[Attempt]:
        """Every attempt of the sweep, planned against the started device's facts."""
        return self.plan_jobs(lambda dev, device_id: planner.plan(workloads, backends, dev, repeats, tag, seed,
                                                                  inputs, device_id))

    def plan_jobs(self, plan_on: Callable[[DeviceInfo, str | None], list]) -> list:
        """Every job of a run (attempts, model steps: runner/jobs.py), planned by plan_on(device facts,
        device identity for the keys or None) on the started device."""
        if self.started is None:
            raise RuntimeError("plan() before start()")
        return plan_on(self.started.device, None)

    def placement_for(self, attempt: Attempt) -> Placement:
        """Where a planned-out attempt (never run) is recorded as placed."""
        if self.started is None:
            raise RuntimeError("placement_for() before start()")
        return self.started.placement

    @property
    def placements(self) -> list[Placement]:
        """After start(): one per device that runs attempts at once (an ETA divides by their number)."""
        return [self.started.placement] if self.started else []

    @property
    def labels(self) -> list[str]:
        """The devices' labels as the user named them (cpu:0, 1, ...; none for a single device)."""
        return []


@dataclass(frozen=True)
class Target:
    """Where a run's attempts go, as its options name it (executors' resolve())."""

    device: str  # the torch device the defaults follow (grid, timing budget): "cpu", "cuda", "cuda:1"
    devices: tuple | None  # several devices (executors/devices.py DeviceSpec), or None
    label: str  # the run's device label: "cpu", "cuda:0,cuda:1", "ray:all GPUs"
    on_this_host: bool  # workers run on this host: the sweep's compiler cache beside the store applies


@dataclass(frozen=True)
class Registration:
    """An executor as the command line knows it: --executor NAME. resolve(device, devices, replicate,
    address) validates the device options (ValueError with one line) into a Target; build(config,
    target, replicate, address) makes the executor (config: executors/local.py LocalConfig)."""

    name: str
    resolve: Callable[[str | None, str | None, bool, str | None], Target]
    build: Callable[..., Executor]
