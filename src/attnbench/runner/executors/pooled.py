"""Several devices at once as lanes (executors/groups.py) under one base: the plan sharded per device
model or replicated per device, planned-out attempts placed, the lanes driven, their ledgers summed.
The multi-device executor (multi.py) and the Ray executor (ray.py) extend it."""
from __future__ import annotations

from typing import Hashable, Iterable

from ...backends.base import DeviceInfo
from ..planner import Attempt
from .base import Claim, Executor, Placement, Sink, take_all
from .groups import Lane, drive, group_queues
from .local import worker_slot


class PooledExecutor(Executor):
    """Lanes pulling whole (repeat, workload) groups, every claim and outcome handled on the calling
    thread (one store, one writer). Default: the plan is sharded per device model (attempt keys as on
    one device of that model; a model's lanes share its queue, each walking a contiguous run of it);
    replicate: every lane runs the whole plan, under keys that hold its device's identity.

    A subclass sets self.lanes (each with a `ledger`: its overhead seconds), self._placements and,
    once started, self._models (device model -> its first lane); it defines device_info(i),
    device_id(i) and kill(everything)."""

    def __init__(self, replicate: bool, strict_isolation: bool = False):
        super().__init__()
        self.replicate, self.strict_isolation = replicate, strict_isolation
        self.lanes: list[Lane] = []
        self._placements: list[Placement] = []
        self._models: dict[str, int] = {}  # device model -> the first lane of that model
        self._queue: dict[str, Hashable] = {}  # attempt key -> its queue (device model, or lane under replicate)
        self._overhead: dict[str, float] = {}  # of lanes gone (closed or replaced)

    @property
    def placements(self) -> list[Placement]:
        return self._placements

    @property
    def labels(self) -> list[str]:
        return [lane.label for lane in self.lanes]

    @property
    def overhead_s(self) -> dict[str, float]:
        """Seconds outside attempts, summed over the lanes (which spend them in parallel): those gone,
        and the live ones as last read."""
        out = dict(self._overhead)
        for lane in self.lanes:
            for k, v in lane.ledger.items():
                out[k] = out.get(k, 0.0) + v
        return out

    def device_info(self, i: int) -> DeviceInfo:
        """The facts the planner reads of lane i's device."""
        raise NotImplementedError

    def device_id(self, i: int) -> str:
        """The identity of lane i's device in replicated attempt keys."""
        raise NotImplementedError

    def kill(self, everything: bool = False) -> None:
        """Make the lanes stop waiting on their devices (an interrupt; everything: after a grace period)."""
        raise NotImplementedError

    def after_run(self) -> None:
        """Called once the lanes have ended (however run() ends)."""

    def plan_jobs(self, plan_on) -> list:
        """Sharded: each device model's plan, on that model's facts. Replicate: each lane's plan."""
        if self.started is None:
            raise RuntimeError("plan() before start()")
        out = []
        if self.replicate:
            for i in range(len(self._placements)):
                mine = plan_on(self.device_info(i), self.device_id(i))
                self._queue.update((a.key, i) for a in mine)
                out += mine
        else:
            for name, i in self._models.items():
                mine = plan_on(self.device_info(i), None)
                self._queue.update((a.key, name) for a in mine)
                out += mine
        return out

    def placement_for(self, attempt: Attempt) -> Placement:
        """A planned-out attempt: its lane's device under replicate; under sharding its model (it ran
        nowhere)."""
        if self.started is None:
            raise RuntimeError("placement_for() before start()")
        q = self._queue.get(attempt.key)
        if isinstance(q, int):
            return self._placements[q]
        return Placement(q) if q is not None else self.started.placement

    def run(self, attempts: Iterable[Attempt], sink: Sink, claim: Claim = take_all) -> None:
        queues, slots = group_queues(attempts, lambda a: self._queue[a.key],
                                     lambda b: worker_slot(b, self.strict_isolation))
        for i, (lane, p) in enumerate(zip(self.lanes, self._placements)):
            lane.queue = i if self.replicate else p.device_name
        try:
            drive(self.lanes, queues, slots, sink, claim, self.kill)
        finally:
            self.after_run()
