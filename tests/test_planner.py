"""Planner: grid × backends × repeats, capability and memory gates, seeded order, attempt keys."""
from __future__ import annotations

import pytest

from attnbench.backends.base import Backend, DeviceInfo
from attnbench.backends.registry import BackendError, builtin, select
from attnbench.runner.planner import MEMORY_FRACTION, attempt_key, plan
from attnbench.status import Status
from attnbench.workloads import Workload
from attnbench.workloads.grids import get_grid
from attnbench.workloads.cost import input_bytes

CPU = DeviceInfo("cpu", "CPU test", None, 64 << 30)
H100 = DeviceInfo("cuda", "NVIDIA H100", (9, 0), 80 << 30)
T4 = DeviceInfo("cuda", "Tesla T4", (7, 5), 16 << 30)


def W(**kw) -> Workload:
    base = dict(mode="prefill", batch=1, q_len=64, kv_len=64, q_heads=4, kv_heads=2, head_dim=32, head_dim_v=32)
    return Workload(**{**base, **kw})


class Plain(Backend):
    def prepare(self, w, inputs):  # never called by the planner
        raise AssertionError


class Sized(Plain):
    """memory_estimate is a fixed number, so the 0.9 budget edge can be placed exactly."""

    def __init__(self, *a, size: int = 0, **kw):
        super().__init__(*a, **kw)
        self.size = size

    def memory_estimate(self, w):
        return self.size


def by_backend(attempts):
    return {a.backend.name: a for a in attempts}


def test_unsupported_reasons_come_from_supports():
    backends = [Plain(name="cuda-only", family="x", devices=("cuda",)),
                Plain(name="fwd-only", family="x", modes=("train_fwd",)),
                Plain(name="half-only", family="x", dtypes=("bf16", "fp16")),
                Plain(name="no-gqa", family="x", supports_gqa=False),
                Plain(name="small-d", family="x", max_head_dim=16),
                Plain(name="fine", family="x")]
    got = by_backend(plan([W(dtype="fp32")], backends, CPU, 1, "t", 0))
    assert got["fine"].planned is None and got["fine"].reason is None
    for name, text in [("cuda-only", "does not run on cpu"), ("fwd-only", "mode prefill not offered"),
                       ("half-only", "dtype fp32 not offered"), ("no-gqa", "GQA"), ("small-d", "head_dim 32 > 16")]:
        a = got[name]
        assert a.planned is Status.UNSUPPORTED, name
        assert text in a.reason, (name, a.reason)
        assert a.reason == a.backend.supports(a.workload, CPU)


def test_capability_graph_cold_l2_and_availability():
    cudnn = select(["sdpa-cudnn"])[0]
    (a,) = plan([W()], [cudnn], T4, 1, "t", 0)
    assert a.planned is Status.UNSUPPORTED and "compute capability >= 8.0" in a.reason and "7.5" in a.reason
    (a,) = plan([W()], [cudnn], H100, 1, "t", 0)
    assert a.planned is None
    (a,) = plan([W(mode="decode", q_len=1, launch="graph")], [Plain(name="p", family="x")], CPU, 1, "t", 0)
    assert a.planned is Status.UNSUPPORTED and "CUDA-graph" in a.reason
    (a,) = plan([W(l2="cold")], [Plain(name="p", family="x")], CPU, 1, "t", 0)
    assert a.planned is Status.UNSUPPORTED and "l2=cold" in a.reason

    class Missing(Plain):
        def availability(self):
            return "libfoo not importable"

    (a,) = plan([W()], [Missing(name="m", family="x")], H100, 1, "t", 0)
    assert a.planned is Status.UNSUPPORTED and a.reason == "libfoo not importable"


def test_builtin_unsupported_on_cpu():
    got = by_backend(plan([W(mode="train_fwd")], builtin(), CPU, 1, "t", 0))
    assert got["sdpa-efficient"].planned is Status.UNSUPPORTED
    assert got["sdpa-cudnn"].planned is Status.UNSUPPORTED
    assert got["flex"].planned is Status.UNSUPPORTED and "backward" in got["flex"].reason
    for name in ("reference", "sdpa-math", "sdpa-flash", "compile"):
        assert got[name].planned is None, got[name].reason


def test_oom_predicted_against_ninety_percent_of_device_memory():
    total = 1000 << 20
    dev = DeviceInfo("cuda", "Fake GPU", (9, 0), total)
    budget = total * MEMORY_FRACTION
    assert MEMORY_FRACTION == 0.9
    backends = [Sized(name="under", family="x", size=int(budget)),
                Sized(name="over", family="x", size=int(budget) + 1),
                Sized(name="between", family="x", size=int(total * 0.95)),
                Sized(name="huge", family="x", size=10 * total)]
    got = by_backend(plan([W()], backends, dev, 1, "t", 0))
    assert got["under"].planned is None
    for name in ("over", "between", "huge"):
        assert got[name].planned is Status.OOM_PREDICTED, name
        assert "GiB" in got[name].reason and "Fake GPU" in got[name].reason
    # no memory figure: nothing is predicted
    got = by_backend(plan([W()], backends, DeviceInfo("cuda", "Fake GPU", (9, 0), None), 1, "t", 0))
    assert all(a.planned is None for a in got.values())


def test_unsupported_wins_over_oom_prediction():
    dev = DeviceInfo("cuda", "Fake GPU", (9, 0), 1 << 20)
    (a,) = plan([W()], [Sized(name="s", family="x", size=1 << 40, dtypes=("fp16",))], dev, 1, "t", 0)
    assert a.planned is Status.UNSUPPORTED


def test_real_reference_is_predicted_oom_on_a_small_gpu():
    big = W(batch=64, q_len=16384, kv_len=16384, q_heads=32, kv_heads=32, head_dim=128, head_dim_v=128)
    got = by_backend(plan([big], select(["reference", "sdpa-flash"]), H100, 1, "t", 0))
    assert got["reference"].planned is Status.OOM_PREDICTED  # materialised scores: terabytes
    assert got["sdpa-flash"].planned is None  # fused: ~1.5x inputs
    assert select(["sdpa-flash"])[0].memory_estimate(big) == int(input_bytes(big) * 1.5)


def test_repeats_multiply_attempts_and_keys_are_unique():
    ws = get_grid("smoke")
    bs = builtin()
    for repeats in (1, 2, 3):
        attempts = plan(ws, bs, CPU, repeats, "t", 0)
        assert len(attempts) == len(ws) * len(bs) * repeats
        assert len({a.key for a in attempts}) == len(attempts)
        assert [a.repeat for a in attempts] == sorted(a.repeat for a in attempts)  # repeat-major
        for r in range(repeats):
            sub = [a for a in attempts if a.repeat == r]
            assert {(a.workload.key(), a.backend.name) for a in sub} == {(w.key(), b.name) for w in ws for b in bs}


def test_attempt_keys_are_stable_and_depend_on_every_part():
    ws, bs = get_grid("smoke"), builtin()
    one = [a.key for a in plan(ws, bs, CPU, 2, "t", 0)]
    two = [a.key for a in plan(ws, bs, CPU, 2, "t", 0)]
    assert one == two
    # another input seed is another measurement: new keys, so a resume does not skip it
    assert not set(one) & {a.key for a in plan(ws, bs, CPU, 2, "t", 7)}
    assert attempt_key("t", "dev", W(), "b", 0, 1) != attempt_key("t", "dev", W(), "b", 0, 2)
    w = W()
    k = attempt_key("t", "dev", w, "b", 0)
    assert len(k) == 24 and k == attempt_key("t", "dev", W(), "b", 0)
    assert len({k, attempt_key("u", "dev", w, "b", 0), attempt_key("t", "dev2", w, "b", 0),
                attempt_key("t", "dev", W(batch=2), "b", 0), attempt_key("t", "dev", w, "c", 0),
                attempt_key("t", "dev", w, "b", 1)}) == 6
    assert attempt_key("default", "CPU test", Workload(mode="prefill", batch=1, q_len=128, kv_len=128, q_heads=4,
                                                       kv_heads=2, head_dim=32, head_dim_v=32, dtype="bf16"),
                       "sdpa-flash", 0) == "5e5f5dfdf21b3802c33fd611"  # pinned: resume depends on it


def test_backend_order_is_shuffled_per_workload_and_deterministic_per_seed():
    ws = get_grid("smoke")
    bs = builtin()

    def orders(seed):
        attempts = plan(ws, bs, CPU, 2, "t", seed)
        out = {}
        for a in attempts:
            out.setdefault((a.repeat, a.workload.key()), []).append(a.backend.name)
        return out

    a, b = orders(0), orders(0)
    assert a == b
    assert all(sorted(o) == sorted(x.name for x in bs) for o in a.values())
    assert len({tuple(o) for o in a.values()}) > 1, "every workload got the same order"
    assert any(tuple(o) != tuple(x.name for x in bs) for o in a.values()), "never shuffled"
    assert orders(1) != a and orders(2) != a
    # each workload's attempts are contiguous (so backends share the drift of one workload)
    seq = [(x.repeat, x.workload.key()) for x in plan(ws, bs, CPU, 2, "t", 0)]
    changes = sum(1 for p, q in zip(seq, seq[1:]) if p != q)
    assert changes == len(set(seq)) - 1


def test_registry_select_and_errors(fakes_path):
    names = [b.name for b in builtin()]
    assert names[:2] == ["reference", "sdpa-math"] and len(names) == len(set(names))
    assert [b.name for b in select(["sdpa-flash", "reference", "sdpa-flash"])] == ["sdpa-flash", "reference"]
    with pytest.raises(BackendError, match="unknown backend 'nope'"):
        select(["reference", "nope"])
    with_fakes = select(None, [fakes_path])
    assert {"fake-good", "fake-crash", "fake-mutates"} <= {b.name for b in with_fakes}
    with pytest.raises(BackendError, match="two backends are named"):
        select(None, [fakes_path, fakes_path])


def test_entry_point_plugins_enter_through_the_same_door(tmp_path, monkeypatch):
    """A package that declares [project.entry-points."attnbench.backends"] is listed and selected
    like a built-in; clashing names are refused."""
    import importlib.metadata as md
    import sys

    from attnbench.backends import registry

    (tmp_path / "ep_pkg.py").write_text(
        "from attnbench.backends.base import Backend\n"
        "BACKENDS = [Backend(name='ep-kernel', family='plugin')]\n"
        "def clash():\n    return [Backend(name='sdpa-flash', family='plugin')]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("ep_pkg", None)
    eps = md.EntryPoints([md.EntryPoint(name="mine", value="ep_pkg:BACKENDS", group=registry.ENTRY_POINT_GROUP)])
    monkeypatch.setattr(registry.metadata, "entry_points", lambda group: eps if group == registry.ENTRY_POINT_GROUP
                        else md.EntryPoints([]))
    assert [b.name for b in registry.select(["ep-kernel"])] == ["ep-kernel"]
    assert "ep-kernel" in [b.name for b in registry.all_backends()]
    eps = md.EntryPoints([md.EntryPoint(name="bad", value="ep_pkg:clash", group=registry.ENTRY_POINT_GROUP)])
    with pytest.raises(registry.BackendError, match="two backends are named 'sdpa-flash'"):
        registry.all_backends()
