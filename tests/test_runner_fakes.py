"""The runner against misbehaving fake backends (tests/plugins/fakes.py).

In-process: runner/attempt.py turns every failure of one attempt into a status.
Spawned (slow): the whole sweep through the CLI survives crashes and hangs and writes one row per attempt."""
from __future__ import annotations

import hashlib
import json
import sqlite3
import statistics
from pathlib import Path
from types import SimpleNamespace

import pytest

from attnbench.backends.base import Backend, DeviceInfo
from attnbench.backends.registry import load_plugin_file
from attnbench.measure import correctness
from attnbench.runner import attempt, checks, gates
from attnbench.runner.planner import plan
from attnbench.workloads import Workload
from attnbench.workloads.grids import load_yaml_grid
from conftest import ALL_FAKES, FAKES, TINY_GRID, rows_of

PREFILL = Workload(mode="prefill", batch=1, q_len=32, kv_len=32, q_heads=2, kv_heads=1, head_dim=16, head_dim_v=16,
                   dtype="fp32")
DECODE = Workload(mode="decode", batch=1, q_len=1, kv_len=64, q_heads=2, kv_heads=1, head_dim=16, head_dim_v=16,
                  dtype="fp32")
TRAIN_FWD = Workload(mode="train_fwd", batch=1, q_len=32, kv_len=32, q_heads=2, kv_heads=1, head_dim=16,
                     head_dim_v=16, dtype="fp32", causal=True)
# four KV groups: a kernel that runs its fused path for one of them does a quarter of the work there
PREFILL_GQA = Workload(mode="prefill", batch=1, q_len=128, kv_len=128, q_heads=8, kv_heads=4, head_dim=32,
                       head_dim_v=32, dtype="fp32")
FAST = dict(warmup_s=0.0, min_samples=3, max_samples=5, max_time_s=0.05)


def fakes() -> dict[str, Backend]:
    return {b.name: b for b in load_plugin_file(FAKES)}


def spec(w: Workload, **over) -> dict:
    return {"op": "attempt", "workload": w.to_dict(), "device": "cpu", "seed": 0, "timing": FAST,
            **over}


def run_one(name: str, w: Workload, cache=None, **over) -> dict:
    return attempt.run(spec(w, **over), fakes()[name], cache or attempt.WorkloadCache())


# ---- one attempt, in this process ---------------------------------------------------------------

@pytest.mark.parametrize("w", [PREFILL, DECODE], ids=["prefill", "decode"])
def test_good_is_ok_with_samples_and_checks(w):
    res = run_one("fake-good", w)
    assert res["status"] == "OK", res["reason"]
    assert res["reason"] is None
    assert 3 <= len(res["samples_us"]) <= 5 and all(s > 0 for s in res["samples_us"])
    assert res["calls_per_sample"] >= 1 and res["timer"] == "host_clock"
    assert res["err_ratio"] <= 3 and res["dispatch_status"] == "probed"
    assert "unfused-gemm" in res["dispatch_families"]
    assert set(res["phases_s"]) == {"inputs", "prepare", "cold_call", "check", "probe", "memory", "timing", "recheck",
                                    "hard"}
    assert res["hard_err_ratio"] <= correctness.HARD_TOLERANCES[w.dtype] and res["undeclared_share"] == 0.0
    assert res["cold_start_us"] > 0 and res["peak_mem_bytes"] is None


@pytest.mark.parametrize("name,w,status,text", [
    ("fake-wrong", PREFILL, "INCORRECT", "o: error"),
    ("fake-wrong", DECODE, "INCORRECT", f"tolerance {correctness.TOLERANCES['fp32']:g}x"),
    ("fake-unwritten", PREFILL, "INCORRECT", "NaN/Inf"),
    ("fake-liar", PREFILL, "DISPATCH_MISMATCH", "declared ['pytorch-flash-cpu'] but observed ['unfused-gemm']"),
    ("fake-refuses", PREFILL, "UNSUPPORTED", "fake: this library refuses every configuration"),
    ("fake-raises", DECODE, "ERROR", "ValueError: fake: a bug in the kernel wrapper"),
    # right on new values, answered from a cache when they did not change: its calls on new values
    # (the hard-input checks', the recheck's) took far longer than the timed ones
    ("fake-cached-by-version", PREFILL, "IMPLAUSIBLE", "the timed calls answered from a cache"),
    ("fake-cached-by-version", DECODE, "IMPLAUSIBLE", "the timed calls answered from a cache"),
    # the work runs on a thread of its own after the call returns: the check reads what it left
    ("fake-background-thread", PREFILL, "INCORRECT", "NaN/Inf"),
    ("fake-background-thread", DECODE, "INCORRECT", "NaN/Inf"),
    # a compile error's first line only says where: the error itself, its last line, follows it
    ("fake-compile-fails", PREFILL, "ERROR", "InductorError: CompilationError: at 194:23: … "
     "ValueError('fake: shared memory 262144 exceeds the limit 232448')"),
    ("fake-oom", PREFILL, "OOM", "OutOfMemoryError: fake: tried to allocate 1.00 TiB"),
    ("fake-mutates", DECODE, "INCORRECT", "the KV cache"),
    ("fake-host-oom", PREFILL, "OOM", "DefaultCPUAllocator: not enough memory"),
    ("fake-library-oom", PREFILL, "OOM", "XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory"),
    # the first line alone would not say why the row is OOM: the allocator's line follows it
    ("fake-autotune-oom", PREFILL, "OOM", "All configs failed during profiling or were excluded from selection. "
     "(config 0: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 137438953472 bytes.)"),
    ("fake-side-only", PREFILL, "DISPATCH_MISMATCH", "declared ['pytorch-flash-cpu'] but observed ['unfused-gemm']"),
    ("fake-wrong-dtype", PREFILL, "INCORRECT", "o is float64, expected float32"),
    ("fake-detached", TRAIN_FWD, "INCORRECT", "o does not require grad"),
    ("fake-later-garbage", PREFILL, "INCORRECT", "after timing, on new input values"),
    ("fake-later-garbage", DECODE, "INCORRECT", "after timing, on new input values"),
    # answers from its cache when the same tensors come back: the hard-input pass already sees it
    ("fake-cached-result", PREFILL, "INCORRECT", "on outliers inputs"),
    ("fake-cached-result", DECODE, "INCORRECT", "on outliers inputs"),
    # computes only into a poisoned (NaN) buffer: checks on new values find what the last call left
    ("fake-computes-into-nan", PREFILL, "INCORRECT", "on outliers inputs"),
    ("fake-computes-into-nan", DECODE, "INCORRECT", "on outliers inputs"),
    # an output that computes when read: the check reads the values as stored (its NaN buffer)
    ("fake-lazy-output", PREFILL, "INCORRECT", "NaN/Inf"),
    ("fake-lazy-output", DECODE, "INCORRECT", "NaN/Inf"),
    # the softmax scale is an input the backends share: changing it is writing an input
    ("fake-changes-scale", PREFILL, "INCORRECT", "input scale changed during the hard-input check"),
    # process-wide state that the worker's next attempts share: set back, and the row is not OK
    ("fake-sets-threads", PREFILL, "ERROR", "changed process-wide settings the next attempts share: torch threads"),
    ("fake-fast-clock", DECODE, "IMPLAUSIBLE", "replaced time.perf_counter_ns"),
    ("fake-falls-back-late", PREFILL_GQA, "DISPATCH_MISMATCH", "after timing: declared ['pytorch-flash-cpu'] but"),
    ("fake-partly-fused", PREFILL_GQA, "DISPATCH_MISMATCH", "undeclared kernels took"),
    ("fake-named-like-a-kernel", PREFILL, "DISPATCH_MISMATCH", "declared ['pytorch-flash-cpu'] but observed"),
    ("fake-no-max-softmax", PREFILL, "INCORRECT", "on large-logits inputs"),
    ("fake-no-max-softmax", DECODE, "INCORRECT", "on large-logits inputs"),
    ("fake-saturates", PREFILL, "INCORRECT", "on outliers inputs"),
    ("fake-saturates", DECODE, "INCORRECT", "on outliers inputs"),
    ("fake-scales-q", PREFILL, "INCORRECT", "input q changed during the first call"),
    ("fake-rounds-cache", DECODE, "INCORRECT", "input k changed during the first call (the KV cache"),
])
def test_each_failure_becomes_its_status(name, w, status, text):
    res = run_one(name, w)
    assert res["status"] == status, res
    assert text in res["reason"]
    if status in ("INCORRECT", "DISPATCH_MISMATCH") and "after timing" not in res["reason"]:
        assert "samples_us" not in res  # nothing is timed after a failed check or probe


def test_what_an_attempt_changes_in_the_process_is_set_back_for_the_next():
    """A backend that changes the thread count, or replaces the timer's clock, fails its own row;
    the next attempt in the same process runs with the settings and clock the worker had."""
    import time

    import torch

    threads, clock = torch.get_num_threads(), time.perf_counter_ns
    torch.set_num_threads(2)
    try:
        cache = attempt.WorkloadCache()
        assert run_one("fake-sets-threads", PREFILL, cache)["status"] == "ERROR"
        assert torch.get_num_threads() == 2
        assert run_one("fake-fast-clock", PREFILL, cache)["status"] == "IMPLAUSIBLE"
        assert time.perf_counter_ns is clock
        assert run_one("fake-good", PREFILL, cache)["status"] == "OK"
    finally:
        torch.set_num_threads(threads)


def test_a_changed_scale_is_not_handed_to_the_next_backend():
    """The inputs a backend changed a plain attribute of (the softmax scale) are drawn again for
    the next backend of the workload, even in a cache no one cleared."""
    cache = attempt.WorkloadCache()
    assert run_one("fake-changes-scale", DECODE, cache)["status"] == "INCORRECT"
    assert run_one("fake-good", DECODE, cache)["status"] == "OK"
    assert cache.inputs.scale == 1 / DECODE.head_dim ** 0.5


def test_every_watched_setting_reads_and_sets_back():
    """Each process-wide setting the attempt guard watches can be read and set to its own value on
    this torch (an API that moved would otherwise surface as a failed attempt)."""
    from attnbench.runner import process_state

    before = process_state.read()
    assert {"torch threads", "autograd enabled", "default dtype", "SDPA flash enabled"} <= {
        s.name for s, _ in before.settings}
    for s, was in before.settings:
        s.set(was)
        assert s.get() == was, s.name
    assert process_state.undo(before) == ([], [])


def test_side_families_are_not_an_undeclared_path():
    res = run_one("fake-partly-fused-side", PREFILL_GQA)
    assert res["status"] == "OK", res["reason"]
    assert res["undeclared_share"] == 0.0 and "unfused-gemm" in res["dispatch_families"]


def test_kernel_time_is_the_faster_of_the_two_probes_where_they_do_not_split_calls(monkeypatch):
    """A probe that met a GPU at idle clocks overstates the kernels: where neither probe could tell each
    call's device time, the timing cross-check uses the smaller per-call mean of the probes before and
    after timing."""
    from attnbench.measure import dispatch

    real, seen = dispatch.probe, []

    def probe(*a, **k):
        p = real(*a, **k)
        p.kernel_us = [900.0, 450.0][len(seen)]
        seen.append(p.kernel_us)
        return p

    monkeypatch.setattr(dispatch, "probe", probe)
    res = run_one("fake-good", PREFILL)
    assert seen == [900.0, 450.0] and res["kernel_us"] == 450.0


def test_kernel_time_is_the_median_call_where_the_probes_split_their_calls(monkeypatch):
    """Where each probed call's device time is known, one call's kernel time is their median: the first
    call of each probe (an L2 holding what the checks read) is long in both probes, so neither probe's
    mean is the steady call; work hidden in every call still weighs on the median."""
    from attnbench.measure import dispatch

    real = dispatch.probe
    for first, late, want in (([68.6, 52.0, 47.5], [68.3, 46.8], 52.0),  # flex decode B8 under a graph, H200
                              ([900.0, 900.0, 900.0], [], 900.0),         # the late probe could not split
                              ([], [40.0, 41.0], 24.0)):                  # nor the first: the smaller mean
        lists = iter([(first, 24.0), (late, 30.0)])

        def probe(*a, **k):
            p = real(*a, **k)
            p.call_kernel_us, p.kernel_us = next(lists)
            return p

        monkeypatch.setattr(dispatch, "probe", probe)
        res = run_one("fake-good", PREFILL)
        assert res["kernel_us"] == pytest.approx(want), (first, late)
        judged = gates.judge(res, {}, None, "cpu")
        assert judged["timed_over_kernel"] == pytest.approx(statistics.median(res["samples_us"]) / want)
    # the gate judges against it: timed calls far short of the median call are IMPLAUSIBLE
    lists = iter([([2e6, 1e6, 1e6], 24.0), ([2e6, 1e6], 24.0)])  # both means would pass them
    judged = gates.judge(run_one("fake-good", PREFILL), {}, None, "cpu")
    assert judged["status"] == "IMPLAUSIBLE" and "did not see the work" in judged["reason"], judged["reason"]


def test_correct_backends_sharing_a_worker_after_a_mutating_one_stay_ok():
    """Inputs and the float64 reference are shared by the backends of a workload in one worker; a
    backend that wrote its inputs is failed, and the worker's cache is rebuilt for the next."""
    from attnbench.runner import worker  # noqa: F401  (the cache policy lives in worker_main)

    cache = attempt.WorkloadCache()
    assert run_one("fake-scales-q", PREFILL, cache)["status"] == "INCORRECT"
    cache.clear()  # what worker_main does after a non-OK attempt
    assert run_one("fake-good", PREFILL, cache)["status"] == "OK"
    # the post-timing check restores the shared inputs exactly: a second backend sees the same values
    before = attempt.fingerprint(cache.inputs)
    assert run_one("fake-good", PREFILL, cache)["status"] == "OK"
    assert attempt.fingerprint(cache.inputs) == before


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("mode", ["prefill", "decode"])
def test_a_bug_in_one_head_of_eight_is_caught_whatever_slices_the_seed_picks(seed, mode):
    w = Workload(mode=mode, batch=4, q_len=1 if mode == "decode" else 48, kv_len=64, q_heads=8, kv_heads=2,
                 head_dim=16, head_dim_v=16, dtype="fp32", causal=mode == "prefill")
    res = run_one("fake-one-head-wrong", w, seed=seed)
    assert res["status"] == "INCORRECT" and res["reason"].startswith("o: error"), res["reason"]
    assert run_one("fake-good", w, seed=seed)["status"] == "OK"


def test_wrong_passes_with_a_huge_tolerance():
    assert run_one("fake-wrong", PREFILL, tol=1e9)["status"] == "OK"


def test_broken_cuda_context_is_a_fatal_crash():
    class Broken(Backend):
        def prepare(self, w, inputs):
            def fn():
                raise RuntimeError("CUDA error: an illegal memory access was encountered\nmore")

            return fn

    res = attempt.run(spec(PREFILL), Broken(name="broken", family="plugin"), attempt.WorkloadCache())
    assert res["status"] == "CRASH" and res.get("fatal") is True
    assert "CUDA context broken" in res["reason"] and "more" not in res["reason"]


def test_a_graph_the_host_cannot_queue_in_time_is_unsupported_not_timed(monkeypatch):
    """Timing refuses a graph whose replay the host cannot queue within the longest lead (no sample
    would be device time: measure/timing.py GraphSampler); the attempt says so as UNSUPPORTED and
    carries no time."""
    from attnbench.measure import timing

    def refuse(*a, **k):
        raise timing.GraphTimingError("graph samples cannot be timed as device time: the host took longer "
                                      "than 10 ms to queue one replay of 1 call(s)")

    monkeypatch.setattr(timing, "measure", refuse)
    res = run_one("fake-good", PREFILL)
    assert res["status"] == "UNSUPPORTED" and "cannot be timed as device time" in res["reason"]
    assert "median_us" not in res and "samples_us" not in res


def test_cache_is_shared_within_a_workload_and_replaced_across():
    cache = attempt.WorkloadCache()
    a, _ = cache.get(PREFILL, "cpu", 0)
    b, _ = cache.get(PREFILL, "cpu", 0)
    assert a is b
    c, _ = cache.get(DECODE, "cpu", 0)
    assert c is not a
    cache.clear()
    assert cache.inputs is None and cache.refs == {}


def test_poisoned_output_buffer_is_refilled_between_attempts():
    cache = attempt.WorkloadCache()
    assert run_one("fake-good", PREFILL, cache)["status"] == "OK"
    cache.inputs.out.zero_()
    assert run_one("fake-unwritten", PREFILL, cache)["status"] == "INCORRECT"  # zeros left behind would hide it


def test_unwritten_rows_of_a_kernels_own_allocation_fail_after_a_correct_backend():
    """A kernel that writes half of its own torch.empty output, run right after a correct backend of
    the same workload in the same worker: the C allocator may hand it the previous backend's freed
    (correct) output. The poisoned block before the first call, or else the recheck on new input
    values, must fail it; a correct backend after it stays OK."""
    cache = attempt.WorkloadCache()
    for w in (PREFILL, DECODE):
        assert run_one("fake-good", w, cache)["status"] == "OK"
        res = run_one("fake-empty-half", w, cache)
        assert res["status"] == "INCORRECT", res
        assert run_one("fake-good", w, cache)["status"] == "OK"


# ---- rows ----------------------------------------------------------------------------------------

# ---- the whole sweep, spawned workers --------------------------------------------------------------

EXPECTED = {  # (backend, mode) -> status
    ("fake-good", "prefill"): "OK", ("fake-good", "decode"): "OK",
    ("fake-crash", "prefill"): "CRASH", ("fake-crash", "decode"): "CRASH",
    ("fake-hang", "prefill"): "TIMEOUT", ("fake-hang", "decode"): "TIMEOUT",
    ("fake-oom", "prefill"): "OOM", ("fake-oom", "decode"): "OOM",
    ("fake-wrong", "prefill"): "INCORRECT", ("fake-wrong", "decode"): "INCORRECT",
    ("fake-unwritten", "prefill"): "INCORRECT",
    ("fake-liar", "prefill"): "DISPATCH_MISMATCH", ("fake-liar", "decode"): "DISPATCH_MISMATCH",
    ("fake-refuses", "prefill"): "UNSUPPORTED", ("fake-refuses", "decode"): "UNSUPPORTED",
    ("fake-raises", "prefill"): "ERROR", ("fake-raises", "decode"): "ERROR",
    ("fake-mutates", "prefill"): "UNSUPPORTED", ("fake-mutates", "decode"): "INCORRECT",
}


def _seed_with_good_after_crash(grid_path) -> int:
    """A seed whose shuffled order puts fake-good after fake-crash in every workload and after fake-hang
    in at least one."""
    _, ws = load_yaml_grid(grid_path)
    bs = [b for b in load_plugin_file(FAKES) if b.name in ALL_FAKES.split(",")]
    for seed in range(100):
        names = [a.backend.name for a in plan(ws, bs, DeviceInfo("cpu"), 1, "t", seed)]
        per_w = [names[i:i + len(bs)] for i in range(0, len(names), len(bs))]
        if all(o.index("fake-good") > o.index("fake-crash") for o in per_w) and \
                any(o.index("fake-good") > o.index("fake-hang") for o in per_w):
            return seed
    raise AssertionError("no such seed")


@pytest.fixture(scope="module")
def fake_sweep(tmp_path_factory):
    from attnbench.cli.main import main

    d = tmp_path_factory.mktemp("fakes")
    grid = d / "tiny.yaml"
    grid.write_text(TINY_GRID)
    seed = _seed_with_good_after_crash(grid)
    db = d / "fakes.sqlite"
    rc = main(["run", "--repeats", "1", "--config", str(grid), "--plugin", FAKES, "--backends", ALL_FAKES, "--timeout", "5",
               "--modes", "prefill,decode", "--db", str(db), "--seed", str(seed), "--max-time", "0.05",
               "--device", "cpu"])
    return SimpleNamespace(rc=rc, db=db, rows=rows_of(db), seed=seed)


@pytest.mark.slow
def test_sweep_exits_zero_with_one_row_per_attempt(fake_sweep):
    rc, db, rows = fake_sweep.rc, fake_sweep.db, fake_sweep.rows
    assert rc == 0
    n_backends = len(ALL_FAKES.split(","))
    assert len(rows) == 2 * n_backends * 1
    assert len({r["attempt_key"] for r in rows}) == len(rows)
    assert {(r["backend"], r["mode"]) for r in rows} == {(b, m) for b in ALL_FAKES.split(",")
                                                          for m in ("prefill", "decode")}
    assert {r["run_id"] for r in rows} == {rows[0]["run_id"]}
    con = sqlite3.connect(db)
    (run,) = con.execute("SELECT run_id, finished_at, provenance FROM runs").fetchall()
    assert run[0] == rows[0]["run_id"] and run[1]
    prov = json.loads(run[2])
    assert prov["device"]["type"] == "cpu" and prov["seed"] == fake_sweep.seed
    assert len(prov["source_sha256"]) == 64
    assert set(prov["sweep_overhead_s"]) == {"provenance", "worker_start", "worker_stop",
                                                "release", "store"}
    assert all(v >= 0 for v in prov["sweep_overhead_s"].values()) 
    assert prov["sweep_overhead_s"]["worker_start"] > 0 and prov["sweep_overhead_s"]["provenance"] > 0
    # the plugin file that produced the rows is identified by its digest
    assert prov["plugins"] == {FAKES: hashlib.sha256(open(FAKES, "rb").read()).hexdigest()}
    con.close()


@pytest.mark.slow
@pytest.mark.parametrize("backend,mode", sorted(EXPECTED))
def test_sweep_status_per_fake(fake_sweep, backend, mode):
    rows = fake_sweep.rows
    (r,) = [r for r in rows if r["backend"] == backend and r["mode"] == mode]
    assert r["status"] == EXPECTED[(backend, mode)], r["reason"]
    if r["status"] == "OK":
        assert r["reason"] is None and r["median_us"] > 0 and json.loads(r["samples_us"])
        assert r["p95_us"] >= r["median_us"] and r["err_ratio"] <= 3
    else:
        assert r["reason"] and r["median_us"] is None and r["samples_us"] is None
    assert r["wall_s"] is not None


@pytest.mark.slow
def test_sweep_reasons(fake_sweep):
    rows = fake_sweep.rows
    get = {(r["backend"], r["mode"]): r["reason"] for r in rows}
    assert "SIGABRT" in get[("fake-crash", "prefill")]
    assert "no result after 5s" in get[("fake-hang", "decode")]
    assert "KV cache" in get[("fake-mutates", "decode")]
    assert "NaN/Inf" in get[("fake-unwritten", "prefill")]
    assert "not offered" in get[("fake-mutates", "prefill")]
    hang = [r for r in rows if r["backend"] == "fake-hang"]
    assert all(5 <= r["wall_s"] < 30 for r in hang)


@pytest.mark.slow
def test_sweep_goes_on_after_a_crash_and_a_hang(fake_sweep):
    rows = fake_sweep.rows
    for mode in ("prefill", "decode"):
        order = [r["backend"] for r in rows if r["mode"] == mode]
        assert order.index("fake-good") > order.index("fake-crash")
    good = [r for r in rows if r["backend"] == "fake-good"]
    assert [r["status"] for r in good] == ["OK", "OK"]
    after_hang = [i for i, r in enumerate(rows) if r["backend"] == "fake-hang"]
    assert any(r["backend"] == "fake-good" and i > h for h in after_hang for i, r in enumerate(rows))


@pytest.mark.slow
def test_sweep_leaves_a_worker_log(fake_sweep):
    db = fake_sweep.db
    assert (db.parent / (db.name + ".log")).exists()


@pytest.mark.slow
def test_sweep_mutating_backend_does_not_poison_the_next(tmp_path):
    """fake-mutates scribbles on the cached KV inputs; the next backend in the same worker must get clean ones."""
    from attnbench.cli.main import main

    grid = tmp_path / "decode.yaml"
    grid.write_text("workloads:\n  - {mode: decode, batch: 1, q_heads: 2, kv_heads: 1, head_dim: 16, seqlen: 64, "
                    "dtype: fp32}\n")
    _, ws = load_yaml_grid(grid)
    bs = [b for b in load_plugin_file(FAKES) if b.name in ("fake-good", "fake-mutates")]
    seed = next(s for s in range(100)
                if [a.backend.name for a in plan(ws, bs, DeviceInfo("cpu"), 1, "t", s)][0] == "fake-mutates")
    db = tmp_path / "m.sqlite"
    assert main(["run", "--repeats", "1", "--config", str(grid), "--plugin", FAKES, "--backends", "fake-good,fake-mutates",
                 "--seed", str(seed), "--max-time", "0.05", "--db", str(db), "--device", "cpu"]) == 0
    rows = rows_of(db)
    assert [r["backend"] for r in rows] == ["fake-mutates", "fake-good"]
    assert rows[0]["status"] == "INCORRECT"
    assert rows[1]["status"] == "OK", rows[1]["reason"]


@pytest.mark.slow
def test_rows_state_the_software_they_ran_under(fake_sweep):
    import torch

    for r in fake_sweep.rows:
        assert r["torch_version"] == torch.__version__
        assert r["cudnn_version"] is None or isinstance(r["cudnn_version"], int)
        assert r["attnbench_sha"] is None or len(r["attnbench_sha"].split("+")[0]) == 40


def test_workers_of_a_repeat_start_together(monkeypatch):
    """Every worker a repeat needs is started before the first one is waited for, so their start-up
    overlaps; nothing is timed while they start."""
    from attnbench.backends.registry import select
    from attnbench.runner.executors import local as local_mod
    from attnbench.runner.executors.local import LocalConfig, LocalExecutor
    from attnbench.workloads.grids import get_grid

    events = []

    class FakeWorker:
        def __init__(self, plugins, wait=True, **kw):
            events.append(("start", kw["warm"]["compiler"]))
            self.alive = True

        def ready(self):
            events.append(("ready",))
            return self

        def close(self):
            pass

    monkeypatch.setattr(local_mod, "Worker", FakeWorker)
    backends = select(["sdpa-math", "flex", "compile"])
    attempts = plan(get_grid("smoke")[2:3], backends, DeviceInfo("cpu"), 1, "t", 0)
    sw = LocalExecutor(LocalConfig())
    sw._prestart({sw._slot(a.backend) for a in attempts})
    assert [e[0] for e in events] == ["start"] * 3 + ["ready"] * 3
    assert sorted(e[1] for e in events if e[0] == "start") == [False, True, True]  # compilers warmed for flex/compile
    assert set(sw.workers) == {"shared", "backend:flex", "backend:compile"}


def test_isolation_slots():
    from attnbench.backends.registry import select
    from attnbench.runner.executors.local import LocalConfig, LocalExecutor
    from attnbench.workloads.grids import get_grid

    w = get_grid("smoke")[2]
    by_name = {b.name: b for b in select(["sdpa-math", "flex"])}
    attempts = {a.backend.name: a.backend for a in plan([w], list(by_name.values()), DeviceInfo("cpu"), 1, "t", 0)}
    relaxed = LocalExecutor(LocalConfig())
    strict = LocalExecutor(LocalConfig(strict_isolation=True))
    assert relaxed._slot(attempts["sdpa-math"]) == strict._slot(attempts["sdpa-math"]) == "shared"
    assert relaxed._slot(attempts["flex"]) == "backend:flex"
    assert strict._slot(attempts["flex"]) is None  # a fresh process for this attempt alone


FAKE_PROVENANCE = {"torch": "x", "device": {"type": "cpu", "name": "CPU fake", "total_memory": 1 << 30}}


class _RecordingWorker:
    """Stands in for a worker process: records the order of requests across workers."""

    def __init__(self, name, events):
        self.name, self.events, self.alive = name, events, True

    def send(self, msg):
        self.events.append(("send", self.name, msg["op"]))

    def receive(self, timeout):
        self.events.append(("receive", self.name))
        return {"ok": True}

    def request_stop(self):
        self.events.append(("stop", self.name))

    def close(self, timeout=10.0):
        self.events.append(("join", self.name))

    def kill(self):
        self.events.append(("kill", self.name))


def test_release_asks_only_the_workers_that_served_the_workload_and_all_at_once():
    from attnbench.runner.executors.local import LocalConfig, LocalExecutor

    events = []
    sw = LocalExecutor(LocalConfig())
    sw.workers = {s: _RecordingWorker(s, events) for s in ("shared", "backend:flex", "backend:compile")}
    sw.used = {"shared", "backend:flex"}
    sw._release()
    assert events == [("send", "backend:flex", "release"), ("send", "shared", "release"),
                      ("receive", "backend:flex"), ("receive", "shared")]
    assert sw.used == set()
    events.clear()
    sw._release()  # nothing ran since: nothing to release
    assert events == []
    assert sw.overhead_s["release"] >= 0


def test_close_stops_every_worker_before_waiting_for_any():
    from attnbench.runner.executors.local import LocalConfig, LocalExecutor

    events = []
    sw = LocalExecutor(LocalConfig())
    sw.workers = {s: _RecordingWorker(s, events) for s in ("shared", "backend:flex", "backend:compile")}
    sw.close()
    kinds = [e[0] for e in events]
    assert kinds == ["stop"] * 3 + ["join"] * 3
    assert sw.workers == {}


def test_an_interrupted_prestart_leaves_no_started_worker(monkeypatch):
    from attnbench.runner.executors import local as local_mod
    from attnbench.runner.executors.local import LocalConfig, LocalExecutor

    events = []

    class FakeWorker:
        def __init__(self, plugins, wait=True, **kw):
            self.n = len([e for e in events if e[0] == "start"])
            events.append(("start", self.n))

        def ready(self):
            if self.n == 1:
                raise KeyboardInterrupt
            events.append(("ready", self.n))
            return self

        def kill(self):
            events.append(("kill", self.n))

    monkeypatch.setattr(local_mod, "Worker", FakeWorker)
    sw = LocalExecutor(LocalConfig())
    with pytest.raises(KeyboardInterrupt):
        sw._prestart({"shared", "backend:flex", "backend:compile"})
    # worker 0 was ready and stays with the sweep (close() stops it); 1 and 2 are killed
    assert events == [("start", 0), ("start", 1), ("start", 2), ("ready", 0), ("kill", 1), ("kill", 2)]
    assert list(sw.workers) == ["backend:compile"]


def test_first_repeat_workers_start_together_and_are_ready_before_the_provenance(monkeypatch):
    from attnbench.backends.registry import select
    from attnbench.runner.executors import local as local_mod
    from attnbench.runner.executors.local import LocalConfig, LocalExecutor

    events = []

    class FakeWorker:
        def __init__(self, plugins, wait=True, **kw):
            self.compiler = kw["warm"]["compiler"]
            events.append(("start", self.compiler, wait))
            self.alive = True

        def ready(self):
            events.append(("ready", self.compiler))
            return self

        def call(self, msg, timeout):
            events.append(("call", msg["op"]))
            return {"ok": True, "provenance": FAKE_PROVENANCE}

    monkeypatch.setattr(local_mod, "Worker", FakeWorker)
    sw = LocalExecutor(LocalConfig())
    started = sw.start("cpu", select(["sdpa-math", "flex"]))
    # both start without waiting; both handshakes come before the ceilings are measured
    assert events == [("start", True, False), ("start", False, False), ("ready", True), ("ready", False),
                      ("call", "provenance")]
    assert set(sw.workers) == {"shared", "backend:flex"}
    assert started.provenance == FAKE_PROVENANCE  # what the shared worker measured, as it measured it
    assert started.device == DeviceInfo("cpu", "CPU fake", None, 1 << 30)
    assert started.placement.device_name == "CPU fake" and started.placement.device_index is None
    from attnbench.runner.worker import run_provenance  # ... which includes the compile workers' settings

    assert "TORCHINDUCTOR_COMPILE_THREADS" in run_provenance("cpu", 0, measure_ceilings=False)["compile_workers_env"]


ENV_PROBE = """
import os
from attnbench.backends.base import Backend


class EnvProbe(Backend):
    def prepare(self, w, inputs):
        raise RuntimeError("threads=" + str(os.environ.get("TORCHINDUCTOR_COMPILE_THREADS")))


def backends():
    return [EnvProbe(name="env-probe", family="plugin", isolation="backend",
                     kernel_families={"cpu": frozenset({"unfused-gemm"})}, description="reports its env")]
"""


@pytest.mark.slow
@pytest.mark.parametrize("user_value, seen", [(None, "1"), ("3", "3")])
def test_compiler_workers_compile_in_process_unless_the_user_says_otherwise(tmp_path, monkeypatch, user_value, seen):
    from attnbench.cli.main import main

    plugin = tmp_path / "envprobe.py"
    plugin.write_text(ENV_PROBE)
    if user_value is None:
        monkeypatch.delenv("TORCHINDUCTOR_COMPILE_THREADS", raising=False)
    else:
        monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", user_value)
    db = tmp_path / "env.sqlite"
    assert main(["run", "--repeats", "1", "--grid", "smoke", "--modes", "prefill", "--plugin", str(plugin), "--backends", "env-probe",
                 "--db", str(db), "--device", "cpu"]) == 0
    rows = rows_of(db)
    assert rows and {r["status"] for r in rows} == {"ERROR"}
    assert all(f"threads={seen}" in r["reason"] for r in rows)
    prov = json.loads(sqlite3.connect(db).execute("SELECT provenance FROM runs").fetchone()[0])
    assert prov["compile_workers_env"]["TORCHINDUCTOR_COMPILE_THREADS"] == seen


def test_a_resumed_sweep_keeps_the_workers_started_for_the_provenance(monkeypatch, tmp_path):
    """Repeat 0 already stored: the workers started with the provenance serve repeat 1 (they are
    fresh processes); only the next repeat gets new ones."""
    from attnbench.backends.registry import select
    from attnbench.runner.executors import local as local_mod
    from attnbench.runner.conduct import RunRequest, conduct
    from attnbench.runner.executors.local import LocalConfig, LocalExecutor
    from attnbench.store.db import Store
    from attnbench.workloads.grids import get_grid

    started = []

    class FakeWorker:
        def __init__(self, plugins, wait=True, **kw):
            started.append(self)
            self.alive, self.stopped = True, False

        def ready(self):
            return self

        def call(self, msg, timeout):
            if msg["op"] == "provenance":
                return {"ok": True, "provenance": FAKE_PROVENANCE}
            return {"status": "UNSUPPORTED", "reason": "fake"}

        def send(self, msg):
            pass

        def receive(self, timeout):
            return {"ok": True}

        def request_stop(self):
            self.stopped = True

        def close(self, timeout=10.0):
            self.stopped = True

    monkeypatch.setattr(local_mod, "Worker", FakeWorker)
    store = Store(tmp_path / "s.sqlite")
    req = RunRequest("cpu", get_grid("smoke")[:1], select(["sdpa-math"]), repeats=1, tag="t")
    report = conduct(LocalExecutor(LocalConfig()), store, req)  # an earlier invocation stored repeat 0
    assert dict(report.counts) == {"UNSUPPORTED": 1} and len(started) == 1
    started.clear()
    req.repeats = 3
    report = conduct(LocalExecutor(LocalConfig()), store, req)
    first = started[0]
    assert dict(report.counts) == {"UNSUPPORTED": 2} and report.resumed == 1  # repeats 1 and 2
    assert len(started) == 2 and first.stopped  # one more worker, for repeat 2 only
    store.close()


CACHE_PROBE = """
import os
from attnbench.backends.base import Backend


class CacheProbe(Backend):
    def prepare(self, w, inputs):
        raise RuntimeError("cache=" + str(os.environ.get("TORCHINDUCTOR_CACHE_DIR")) + " triton="
                           + str(os.environ.get("TRITON_CACHE_DIR")))


def backends():
    return [CacheProbe(name="cache-probe", family="plugin", isolation="backend",
                       kernel_families={"cpu": frozenset({"unfused-gemm"})}, description="reports its caches")]
"""


@pytest.mark.slow
@pytest.mark.parametrize("named,devices", [(False, None), (True, None), (False, "cpu:0,cpu:1")])
def test_compile_workers_use_the_runs_own_compiler_cache(tmp_path, named, devices):
    """Cold starts depend on a cache the run controls and records: the sweep's own beside its store,
    empty at its start and removed when it has finished, or one the user names, kept. Several devices
    of one run share it (a kernel compiled for one is not compiled again for its neighbour)."""
    from attnbench.cli.main import main

    plugin = tmp_path / "cacheprobe.py"
    plugin.write_text(CACHE_PROBE)
    db = tmp_path / "c.sqlite"
    cache = tmp_path / "cc"
    argv = ["run", "--repeats", "1", "--grid", "smoke", "--where", "mode=prefill", "--where", "causal=false", "--plugin", str(plugin),
            "--backends", "cache-probe", "--db", str(db)]
    argv += ["--devices", devices, "--replicate"] if devices else ["--device", "cpu"]
    assert main(argv + (["--compile-cache", str(cache)] if named else [])) == 0
    rows = rows_of(db)
    assert len(rows) == (2 if devices else 1)
    prov = json.loads(sqlite3.connect(db).execute("SELECT provenance FROM runs").fetchone()[0])
    used = prov["compile_cache"]["dir"]
    assert prov["compile_cache"]["kind"] == ("named" if named else "fresh")
    assert prov["compile_cache"]["kept"] is True  # for a later run: the sweep's until it has finished, or the named one
    for row in rows:  # every device's workers compiled into the one cache
        assert f"cache={used}/inductor triton={used}/triton" in row["reason"]
    assert prov["compile_workers_env"]["TORCHINDUCTOR_CACHE_DIR"] == f"{used}/inductor"
    if named:
        assert used == str(cache)
    else:
        assert used == str(db.resolve()) + ".compile-cache" and not Path(used).exists()  # removed: the sweep is done


@pytest.mark.slow
def test_a_later_repeat_loads_what_jax_compiled_in_an_earlier_one(tmp_path):
    """jax-xla compiles in the run's compiler cache: its first repeat writes XLA executables there,
    and a later repeat's fresh process loads them instead of compiling again (a hit writes nothing)."""
    pytest.importorskip("jax")
    from attnbench.cli.main import main

    cache = tmp_path / "cc"
    argv = ["--grid", "smoke", "--where", "mode=prefill", "--where", "causal=false", "--backends", "jax-xla",
            "--device", "cpu", "--max-time", "0.05", "--compile-cache", str(cache)]
    assert main(["run", "--repeats", "1", "--db", str(tmp_path / "a.sqlite")] + argv) == 0
    entries = {p.name: p.stat().st_mtime_ns for p in (cache / "jax").iterdir()}
    assert any(name.startswith("jit_") for name in entries)  # the attention function, among others
    assert main(["run", "--repeats", "2", "--tag", "again", "--db", str(tmp_path / "b.sqlite")] + argv) == 0
    assert [r["status"] for r in rows_of(tmp_path / "b.sqlite")] == ["OK", "OK"]
    assert {p.name: p.stat().st_mtime_ns for p in (cache / "jax").iterdir()} == entries
    prov = json.loads(sqlite3.connect(tmp_path / "b.sqlite").execute("SELECT provenance FROM runs").fetchone()[0])
    assert prov["compile_workers_env"]["JAX_COMPILATION_CACHE_DIR"] == f"{cache}/jax"


@pytest.mark.slow
def test_a_new_workload_asks_the_worker_s_backends_to_give_back_their_pools(tmp_path, monkeypatch):
    """A library's own memory pool (XLA's) is invisible to torch's allocator: when the workers drop a
    workload, each backend's release() is called, so the next workload's backends find the memory."""
    from attnbench.cli.main import main

    log = tmp_path / "released.txt"
    monkeypatch.setenv("ATTNBENCH_FAKE_RELEASE_LOG", str(log))  # inherited by the spawned workers
    grid = tmp_path / "tiny.yaml"
    grid.write_text(TINY_GRID)
    rc = main(["run", "--repeats", "1", "--config", str(grid), "--plugin", FAKES, "--backends", "fake-holds-pool",
               "--db", str(tmp_path / "s.sqlite"), "--max-time", "0.05", "--device", "cpu"])
    assert rc == 0 and [r["status"] for r in rows_of(tmp_path / "s.sqlite")] == ["OK", "OK"]
    # after each of its two attempts (holds_pool), and when the first workload is dropped
    assert log.read_text().split().count("fake-holds-pool") >= 3


def test_every_attempt_returns_the_memory_torch_cached_and_a_pool_holder_its_pool(monkeypatch):
    """After each attempt the worker empties PyTorch's cache (where CUDA is initialised) and releases
    a backend that holds a pool of its own, so another worker's next backend finds the GPU free."""
    import torch

    from attnbench.backends.base import Backend
    from attnbench.runner import worker

    calls = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("empty_cache"))

    class Pool(Backend):
        def release(self):
            calls.append(f"release {self.name}")

    worker.after_attempt(Pool(name="plain", family="x"))
    assert calls == ["empty_cache"]
    calls.clear()
    worker.after_attempt(Pool(name="jaxlike", family="x", holds_pool=True))
    assert calls == ["release jaxlike", "empty_cache"]
    calls.clear()
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)  # a CPU worker never touches CUDA
    worker.after_attempt(Pool(name="plain", family="x"))
    assert calls == []


def test_a_fault_reported_when_the_worker_gives_memory_back_is_a_crash_row_not_a_lost_one(monkeypatch):
    """A kernel's illegal access can surface only at empty_cache() after the attempt: the row then
    says CRASH with the error (the worker stops after sending it); an attempt that already broke the
    context is sent as it is, nothing run through that context again."""
    import torch

    from attnbench.backends.base import Backend
    from attnbench.runner import worker

    calls = []

    def broken():
        calls.append("empty_cache")
        raise RuntimeError("CUDA error: an illegal memory access was encountered\nmore")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "empty_cache", broken)
    b = Backend(name="b", family="x")
    res = worker.finish({"status": "OK", "reason": None, "median_us": 5.0}, b)
    assert res["status"] == "CRASH" and res["fatal"]  # the record clears what a CRASH row cannot hold
    assert res["reason"] == ("CUDA context broken after the attempt: RuntimeError: CUDA error: "
                             "an illegal memory access was encountered")
    fatal = {"status": "CRASH", "reason": "CUDA context broken: x", "fatal": True}
    calls.clear()
    assert worker.finish(fatal, b) is fatal and calls == []


def _running(pid: int) -> bool:
    """Whether the process exists and is not a zombie (an orphan's zombie may wait for a reaper)."""
    from attnbench.procinfo import state

    return state(pid) not in (None, "Z")


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_child_processes_of_a_backend_do_not_outlive_its_worker(tmp_path, monkeypatch):
    """A backend that starts a child and hangs (TIMEOUT: its worker killed), and one that starts a
    child and returns right values (OK, the child never stopped): when the run ends neither child is
    left running, though each was started to sleep for ten minutes."""
    from attnbench.cli.main import main

    pids = tmp_path / "children"
    monkeypatch.setenv("ATTNBENCH_FAKE_CHILD_PIDS", str(pids))
    grid = tmp_path / "g.yaml"
    grid.write_text("workloads:\n  - {mode: prefill, batch: 1, q_heads: 2, kv_heads: 1, head_dim: 16, seqlen: 32, "
                    "dtype: fp32}\n")
    db = tmp_path / "c.sqlite"
    assert main(["run", "--repeats", "1", "--config", str(grid), "--plugin", FAKES, "--backends",
                 "fake-hangs-with-child,fake-leaves-child,fake-good", "--timeout", "5", "--max-time", "0.05",
                 "--db", str(db), "--device", "cpu"]) == 0
    status = {r["backend"]: r["status"] for r in rows_of(db)}
    assert status == {"fake-hangs-with-child": "TIMEOUT", "fake-leaves-child": "OK", "fake-good": "OK"}
    started = [int(p) for p in pids.read_text().split()]
    assert len(started) == 2
    assert not [p for p in started if _running(p)]


def test_the_confirmation_at_one_moment_decides_a_cache_not_the_checks_calls_alone(monkeypatch):
    # the checks' calls on new values were all slow (a host that stalled through each of them looks
    # like a cache): the verdict waits for new and same values timed back to back, here alike
    assert run_one("fake-cached-by-version", PREFILL)["status"] == "IMPLAUSIBLE"
    monkeypatch.setattr(checks, "fresh_and_same", lambda *a, **k: ([41.0, 40.0, 42.0], [40.0, 39.0, 41.0]))
    res = run_one("fake-cached-by-version", PREFILL)
    assert res["status"] == "OK", res["reason"]
