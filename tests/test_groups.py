"""The lane loop (runner/executors/groups.py) with simulated lanes: a lane that loses its device puts the
group's unfinished attempts back; they run exactly once, on another lane or after a recovery."""
from __future__ import annotations

import threading
import time

import pytest

from attnbench.runner.executors.base import Outcome, Placement
from attnbench.runner.executors.groups import DeviceLost, Group, Runs, drive, group_queues
from attnbench.runner.planner import Attempt
from attnbench.workloads import Workload


class B:
    def __init__(self, name):
        self.name = name


W = [Workload(mode="prefill", batch=1, q_len=32 * (i + 1), kv_len=32 * (i + 1), q_heads=2, kv_heads=1, head_dim=16,
              head_dim_v=16, dtype="fp32") for i in range(3)]
ATTEMPTS = [Attempt(f"k{i}{b}", w, B(b), 0) for i, w in enumerate(W) for b in "xyz"]


class Lane:
    """Runs attempts in a few milliseconds; loses its device at the attempts named in `lose_at`
    (once each); recovers `recoveries` times."""

    def __init__(self, label, queue, lose_at=(), recoveries=0, seconds=0.002):
        self.label, self.queue, self.lose_at, self.recoveries = label, queue, set(lose_at), recoveries
        self.ran, self.lost, self.seconds = [], 0, seconds

    def enter_repeat(self, repeat, slots):
        pass

    def run_attempt(self, a):
        time.sleep(self.seconds)
        if a.key in self.lose_at:
            self.lose_at.discard(a.key)
            self.lost += 1
            raise DeviceLost("actor died")
        self.ran.append(a.key)
        return Outcome(a, {"status": "OK"}, 0.0, Placement(self.label))

    def stop_workers(self):
        pass

    def recover(self):
        if self.recoveries:
            self.recoveries -= 1
            return True
        return False


def run(lanes, attempts=ATTEMPTS, queue_of=lambda a: 0):
    queues, slots = group_queues(attempts, queue_of, lambda b: "shared")
    written, threads = [], set()

    def sink(o):
        written.append((o.attempt.key, o.placement.device_name))
        threads.add(threading.current_thread().name)

    drive(lanes, queues, slots, sink, lambda a, where=None: True, lambda everything: None)
    assert threads <= {threading.current_thread().name}  # one writer
    return written


def test_a_lost_lanes_group_runs_on_another_lane_exactly_once():
    a, b = Lane("a", 0, lose_at={"k0y", "k1y", "k2y"}), Lane("b", 0)  # a loses its device in its first group
    written = run([a, b])
    assert sorted(k for k, _ in written) == sorted(x.key for x in ATTEMPTS)  # none lost, none twice
    assert a.lost == 1 and len(a.ran) == 1 and a.ran[0].endswith("x")  # a ran nothing after it
    lost_group = a.ran[0][:2]
    assert {(lost_group + "y", "b"), (lost_group + "z", "b")} <= set(written)  # b took the rest of a's group


def test_a_recovered_lane_runs_its_own_queue_on():
    a, b = Lane("a", "qa", lose_at={"k1x"}, recoveries=1), Lane("b", "qb")
    written = run([a, b], queue_of=lambda x: "qa" if x.key[1] != "2" else "qb")  # replicate-like queues
    assert sorted(k for k, _ in written) == sorted(x.key for x in ATTEMPTS)
    assert a.lost == 1 and {k for k, who in written if who == "a"} == {x.key for x in ATTEMPTS if x.key[1] != "2"}


def test_work_no_lane_can_serve_is_an_error():
    a = Lane("a", 0, lose_at={"k1z"})
    with pytest.raises(RuntimeError, match=r"4 attempt\(s\) were not run"):  # k1z's group from k1z on, and k2*
        run([a])
    assert a.ran == ["k0x", "k0y", "k0z", "k1x", "k1y"]


def test_lanes_sharing_a_queue_each_walk_a_contiguous_part_of_the_plan_then_take_the_longest_tail():
    runs = Runs([Group(0, [i]) for i in range(7)], 2)
    took = lambda i: (g := runs.take(i)) and g.attempts[0]  # noqa: E731
    assert [took(1) for _ in range(3)] == [4, 5, 6]  # its own run, in plan order
    assert took(1) == 3  # then the other run's tail: what its lane would reach last
    assert [took(0) for _ in range(3)] == [0, 1, 2]
    runs.put_back(0, Group(0, [2]))  # a lost device's unfinished group: first in that lane's run
    assert runs.attempts_left() == 1 and took(1) == 2 and runs.take(0) is None and runs.take(1) is None
    assert [len(r.runs) for r in (Runs([], 3), Runs([Group(0, [0])], 0))] == [3, 1]


def test_lanes_sharing_a_queue_with_nothing_left_end_at_once():
    lanes = [Lane("a", 0), Lane("b", 0)]
    assert run(lanes, attempts=[]) == [] and lanes[1].ran == []


def test_a_fast_lane_keeps_plan_order_and_takes_the_slow_lanes_tail_every_attempt_once():
    """Neighbouring workloads stay on one device (a worker reuses what the last workload left), and
    the faster device still takes over what the slower one would reach last."""
    w = [Workload(mode="prefill", batch=1, q_len=32 * (i + 1), kv_len=32 * (i + 1), q_heads=2, kv_heads=1,
                  head_dim=16, head_dim_v=16, dtype="fp32") for i in range(8)]
    attempts = [Attempt(f"k{i}{b}", x, B(b), 0) for i, x in enumerate(w) for b in "xy"]
    slow, fast = Lane("slow", 0, seconds=0.05), Lane("fast", 0, seconds=0.001)
    written = run([slow, fast], attempts)
    assert sorted(k for k, _ in written) == sorted(a.key for a in attempts)  # none lost, none twice
    group = lambda keys: [int(k[1]) for k in keys[::2]]  # noqa: E731
    assert group(slow.ran) == list(range(len(slow.ran) // 2))  # a prefix of its run, in plan order
    assert group(fast.ran)[:4] == [4, 5, 6, 7]  # its own run first
    assert group(fast.ran)[4:] == sorted(group(fast.ran)[4:], reverse=True) != []  # then the slow run's tail
