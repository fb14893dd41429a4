"""The executor seam: what runs attempts somewhere (local worker processes today; every GPU of a
host or a Ray cluster behind the same interface) and what it reports back."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Protocol

from ..backends.base import Backend, DeviceInfo
from ..workloads import Workload
from . import planner
from .planner import Attempt


@dataclass(frozen=True)
class Placement:
    """Where an attempt ran: the record's executor columns."""

    device_name: str
    device_index: int | None = None
    device_uuid: str | None = None
    host_cores: str | None = None  # the host cores its workers were pinned to (runner/multi.py), e.g. "0-7"

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


class Executor(Protocol):
    overhead_s: dict[str, float]  # seconds spent outside attempts, by cause (recorded with the run)
    # after start(): one per device that runs attempts at once (an ETA divides by their number), and
    # the devices' labels as the user named them (cpu:0, 1, ...; none for a single device)
    placements: list[Placement]
    labels: list[str]

    def start(self, device: str, backends: list[Backend]) -> Started:
        """Get ready to run attempts of these backends on `device`; collect the provenance."""

    def plan(self, workloads: list[Workload], backends: list[Backend], repeats: int, tag: str,
             seed: int, inputs: str = "normal") -> list[Attempt]:
        """Every attempt of the sweep, planned against the started device's facts."""

    def run(self, attempts: Iterable[Attempt], sink: Sink, claim: Claim = take_all) -> None:
        """Run the attempts (none of them planned-out or already done) and hand each outcome to
        the sink, exactly once per attempt, as it completes. Each attempt is claimed right before
        it runs; one another run has claimed is skipped without an outcome."""

    def close(self) -> None:
        """Release every process and device the executor holds (idempotent)."""

    def placement_for(self, attempt: Attempt) -> Placement:
        """Where a planned-out attempt (never run) is recorded as placed."""


@dataclass
class BaseExecutor:
    """Shared parts: planning on the started device and the overhead ledger."""

    started: Started | None = None
    overhead_s: dict[str, float] = field(default_factory=dict)

    def plan(self, workloads, backends, repeats, tag, seed, inputs="normal") -> list[Attempt]:
        if self.started is None:
            raise RuntimeError("plan() before start()")
        return planner.plan(workloads, backends, self.started.device, repeats, tag, seed, inputs)

    def placement_for(self, attempt: Attempt) -> Placement:
        if self.started is None:
            raise RuntimeError("placement_for() before start()")
        return self.started.placement

    @property
    def placements(self) -> list[Placement]:
        """The one device, once started."""
        return [self.started.placement] if self.started else []

    @property
    def labels(self) -> list[str]:
        return []

    def charge(self, cause: str, seconds: float) -> None:
        self.overhead_s[cause] = self.overhead_s.get(cause, 0.0) + seconds
