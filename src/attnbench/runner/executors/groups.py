"""Whole (repeat, workload) groups pulled by device lanes: the queues they pull from, and the loop
that runs them, every claim and outcome handled on the calling thread (one store, one writer).
Shared by the executors of several devices (executors/pooled.py: multi.py, ray.py)."""
from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable, Hashable, Iterable, Protocol

from ..planner import Attempt
from .base import Claim, Outcome, Sink

log = logging.getLogger(__name__)


@dataclass
class Group:
    """A whole (repeat, workload) group: every backend of one workload in one repeat runs on one device."""

    repeat: int
    attempts: list[Attempt]


def group_queues(attempts: Iterable[Attempt], queue_of: Callable[[Attempt], Hashable],
                 slot_of: Callable) -> tuple[dict[Hashable, deque], dict[tuple, set]]:
    """The groups of each queue in plan order (queue_of: the queue an attempt belongs to: one shared
    by every device, one per device, one per GPU model), and the worker slots (slot_of(backend))
    each (queue, repeat) needs."""
    queues: dict[Hashable, deque] = {}
    groups: dict[tuple, Group] = {}
    slots: dict[tuple, set] = {}
    for a in attempts:
        q = queue_of(a)
        gk = (q, a.repeat, a.workload.key())
        g = groups.get(gk)
        if g is None:
            g = groups[gk] = Group(a.repeat, [])
            queues.setdefault(q, deque()).append(g)
        g.attempts.append(a)
        slots.setdefault((q, a.repeat), set()).add(slot_of(a.backend))
    return queues, slots


class DeviceLost(Exception):
    """The process that holds a device's workers (a Ray actor) is gone: the attempt it was running
    did not finish (no outcome, no row) and runs again elsewhere or on a replacement."""


class Lane(Protocol):
    """One device as the loop sees it."""

    label: str
    queue: Hashable  # the queue it pulls from
    ledger: dict  # its device's overhead seconds by cause, as last read (executors/pooled.py sums them)

    def enter_repeat(self, repeat: int, slots: set) -> None: ...

    def run_attempt(self, a: Attempt) -> Outcome: ...  # the outcome carries the lane's placement

    def stop_workers(self) -> None: ...

    def recover(self) -> bool:
        """After DeviceLost: True when the lane can take work again (a replacement started)."""


class Runs:
    """The groups of one queue, shared by k lanes, cut into k contiguous runs of the plan's order:
    lane i takes the head of run i, so a device walks consecutive workloads as one GPU would (a
    worker reuses what the previous workload left in its process: an autotuned kernel of the same
    size, a library's plan; pulled one by one from a common head, two GPUs took neighbouring
    workloads at the same moment and both paid the first call). A lane whose run is empty takes the
    tail of the longest run left: the groups that run's lane would reach last."""

    def __init__(self, groups: Iterable[Group], k: int):
        gs, k = list(groups), max(k, 1)
        cuts = [round(i * len(gs) / k) for i in range(k + 1)]
        self.runs = [deque(gs[a:b]) for a, b in zip(cuts, cuts[1:])]

    def take(self, i: int) -> Group | None:
        if self.runs[i]:
            return self.runs[i].popleft()
        longest = max(self.runs, key=len)
        return longest.pop() if longest else None

    def put_back(self, i: int, g: Group) -> None:
        """A group a lane could not finish: first in its own run (its lane, recovered, or a thief runs it)."""
        self.runs[i].appendleft(g)

    def attempts_left(self) -> int:
        return sum(len(g.attempts) for r in self.runs for g in r)


def drive(lanes: list[Lane], queues: dict[Hashable, deque], slots: dict[tuple, set], sink: Sink,
          claim: Claim, kill: Callable[[bool], None]) -> None:
    """Each lane pulls whole groups from its queue on a thread of its own; claims and outcomes come
    back here. A lane that loses its device puts the group's unfinished attempts back at the head of
    its run of the queue (its replacement, or another lane of the queue, runs them). kill(everything)
    makes the lanes stop waiting on their devices (an interrupt): after a grace period everything=True.
    Work left in a queue no lane can serve is an error (run the command again to resume). Lanes that
    share a queue share it as Runs: each walks a contiguous part of the plan."""
    members: dict[Hashable, list[Lane]] = {}
    for lane in lanes:
        members.setdefault(lane.queue, []).append(lane)
    # every queue: one no lane serves counts as work left; one with nothing left still has its lanes' runs
    shared = {q: Runs(queues.get(q, ()), len(members.get(q, ()))) for q in queues.keys() | members.keys()}
    inbox: queue.Queue = queue.Queue()  # claims, outcomes and ends from the lanes, read here only
    stop = threading.Event()
    lock = threading.Lock()

    def ask_claim(a: Attempt, where: str) -> bool:
        reply: queue.Queue = queue.Queue(maxsize=1)
        inbox.put(("claim", a, reply, where))
        while True:
            try:
                return reply.get(timeout=0.1)
            except queue.Empty:
                if stop.is_set():
                    return False

    def dispatch(lane: Lane) -> None:
        q = shared[lane.queue]
        mine = members[lane.queue].index(lane)
        try:
            while not stop.is_set():
                with lock:
                    g = q.take(mine)
                if g is None:
                    break
                i = 0
                try:
                    lane.enter_repeat(g.repeat, slots[(lane.queue, g.repeat)])
                    for i, a in enumerate(g.attempts):
                        if stop.is_set() or not ask_claim(a, lane.label):
                            continue
                        inbox.put(("outcome", lane.run_attempt(a)))
                except DeviceLost as e:
                    with lock:  # the attempt in flight and those after it: nothing of theirs was written
                        q.put_back(mine, Group(g.repeat, g.attempts[i:]))
                    inbox.put(("lost", lane.label, f"{e}; {len(g.attempts) - i} attempt(s) put back"))
                    if stop.is_set() or not lane.recover():
                        break
        except BaseException as e:  # re-raised on the calling thread
            inbox.put(("error", e))
        finally:
            try:
                lane.stop_workers()
            except DeviceLost:
                pass
            inbox.put(("done", lane))

    threads = [threading.Thread(target=dispatch, args=(lane,), name=f"attnbench-{lane.label}", daemon=True)
               for lane in lanes]
    for t in threads:
        t.start()
    try:
        done = 0
        while done < len(threads):
            kind, *rest = inbox.get()
            if kind == "claim":
                a, reply, where = rest
                reply.put(bool(claim(a, where=where)))
            elif kind == "outcome":
                sink(rest[0])
            elif kind == "lost":
                log.warning("device %s lost: %s", *rest)
            elif kind == "error":
                raise rest[0]
            else:
                done += 1
        left = sum(q.attempts_left() for q in shared.values())
        if left:
            raise RuntimeError(f"{left} attempt(s) were not run: every device that could run them was lost; "
                               "run the same command again to resume")
    finally:
        stop.set()
        t0 = time.monotonic()
        while any(t.is_alive() for t in threads):  # an interrupt: kill what they wait on; they end
            kill(time.monotonic() - t0 > 3)
            for t in threads:
                t.join(0.2)
