"""CUDA-only behaviour of the runner and measurement (skipped without a GPU)."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]

HERE = Path(__file__).parent
FAKES = str(HERE / "plugins" / "fakes.py")
GPU_FAKES = str(HERE / "plugins" / "gpu_fakes.py")

GRID = """
name: gpu-test
workloads:
  - {mode: prefill, batch: 2, seqlen: 1k, q_heads: 8, head_dim: 64, causal: true}
  - {mode: prefill, batch: 2, seqlen: 1k, q_heads: 8, head_dim: 64, causal: false, l2: cold}
  - {mode: decode, batch: 4, kv_len: 2k, q_heads: 8, kv_heads: 2, head_dim: 128, launch: [eager, graph]}
  - {mode: train_fwd_bwd, batch: 2, seqlen: 512, q_heads: 8, head_dim: 64, causal: true}
"""


def run_cli(tmp_path, grid: str, backends: str, *extra) -> list[dict]:
    from attnbench.cli.main import main

    cfg = tmp_path / "grid.yaml"
    cfg.write_text(grid)
    db = tmp_path / "gpu.sqlite"
    rc = main(["run", "--repeats", "1", "--config", str(cfg), "--device", "cuda", "--db", str(db), "--backends", backends,
               "--plugin", FAKES, "--plugin", GPU_FAKES, "--timeout", "120", *extra])
    assert rc == 0
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    return [dict(r) for r in con.execute("SELECT * FROM attempts ORDER BY rowid")]


def by(rows, backend):
    return [r for r in rows if r["backend"] == backend]


def test_real_backends_and_failures_on_gpu(tmp_path):
    rows = run_cli(tmp_path, GRID, "sdpa-flash,sdpa-cudnn,sdpa-efficient,reference,fake-illegal-address,"
                                   "fake-eager-flex,fake-real-oom,fake-good")
    assert len(rows) == 5 * 8 and len({r["attempt_key"] for r in rows}) == len(rows)
    for r in by(rows, "sdpa-flash"):
        assert r["status"] == "OK", r["reason"]
        assert json.loads(r["dispatch_families"]) == ["pytorch-flash"]
    for r in by(rows, "sdpa-cudnn"):
        if r["status"] == "OK":
            assert json.loads(r["dispatch_families"]) == ["cudnn"]
    assert {r["status"] for r in by(rows, "fake-illegal-address")} == {"CRASH"}
    assert all("CUDA context broken" in r["reason"] for r in by(rows, "fake-illegal-address")), \
        [r["reason"] for r in by(rows, "fake-illegal-address")]
    for r in by(rows, "fake-eager-flex"):
        assert r["status"] == ("UNSUPPORTED" if r["causal"] else "DISPATCH_MISMATCH"), r["reason"]
    assert {r["status"] for r in by(rows, "fake-real-oom")} == {"OOM"}
    good = by(rows, "fake-good")
    assert all(r["status"] == "OK" for r in good), [r["reason"] for r in good]  # the sweep survived the crashes
    ok = [r for r in rows if r["status"] == "OK"]
    for r in ok:
        assert r["peak_mem_bytes"] and r["peak_mem_bytes"] > 0
        assert r["err_ratio"] <= 3.0
        assert r["timer"] == ("cuda_graph" if r["launch"] == "graph" else "cuda_event")
        samples = json.loads(r["samples_us"])
        assert len(samples) >= 10 and r["median_us"] > 0
        if r["l2"] == "cold":
            assert r["calls_per_sample"] == 1
    assert any(r["sm_clock_mhz"] for r in ok), "NVML clocks missing"


def test_flex_never_measured_on_the_recompile_slow_path(tmp_path):
    """Twelve shapes in one Flex worker: past dynamo's recompile limit an unguarded process would
    run the eager fallback; every attempt must instead run the compiled Triton kernel."""
    grid = "name: recompile\nworkloads:\n  - {mode: prefill, batch: 1, q_heads: 4, head_dim: 64, causal: true, " \
           "seqlen: [256, 384, 512, 640, 768, 896, 1024, 1152, 1280, 1408, 1536, 1664]}\n"
    rows = run_cli(tmp_path, grid, "flex")
    assert len(rows) == 12
    for r in rows:
        assert r["status"] == "OK", r["reason"]
        assert json.loads(r["dispatch_families"]) == ["triton"]
        assert any("flex" in k for k in json.loads(r["dispatch_kernels"]))
        assert r["cold_start_us"] > r["median_us"]  # compilation is reported apart, not in samples


def test_oom_predicted_without_running(tmp_path):
    grid = "name: huge\nworkloads:\n  - {mode: prefill, batch: 64, seqlen: 64k, q_heads: 32, head_dim: 128}\n"
    rows = run_cli(tmp_path, grid, "reference")
    assert [r["status"] for r in rows] == ["OOM_PREDICTED"]
    assert "GiB" in rows[0]["reason"]


def test_graph_samples_are_device_time_and_eager_samples_carry_the_host():
    """A step that makes the host wait 300 µs before launching a tiny kernel: eager samples must show
    the host's cost (≥ 300 µs a call), graph samples (prefilled) the kernel's device time only, and
    repeated graph measurements must agree within 10%."""
    import time

    from attnbench.measure.timing import TimingConfig, event_overhead_us, time_cuda

    x = torch.zeros(1 << 16, device="cuda")

    def slow_host_step():
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 300e-6:
            pass
        x.add_(1)

    cfg = TimingConfig.for_device("cuda", 0.2)
    eager = time_cuda(slow_host_step, "cuda", cfg, "eager")
    assert eager.timer == "cuda_event" and sorted(eager.samples_us)[len(eager.samples_us) // 2] >= 290
    medians = []
    for _ in range(3):
        g = time_cuda(slow_host_step, "cuda", cfg, "graph")
        assert g.timer == "cuda_graph" and g.calls_per_sample > 1  # a µs kernel gets a block of calls
        medians.append(sorted(g.samples_us)[len(g.samples_us) // 2])
    assert max(medians) < 30, medians  # far below the host's 300 µs: launch latency is hidden
    assert max(medians) / min(medians) < 1.10, medians
    assert event_overhead_us("cuda", 50, ahead=True) < event_overhead_us("cuda", 50)



@pytest.mark.parametrize("l2", ["warm", "cold"])
def test_chunked_graph_samples_agree_with_one_sample_behind_each_delay(l2):
    """GraphSampler queues a chunk of samples behind one delay; the same graphs timed one sample per
    delay and sync (interleaved, three rounds) must give medians within 6% (on the H200, calls of
    100-400 µs ran 3-5% faster back to back than each after its own delay and sync; host latency
    in a sample would add 100% and more to these µs kernels). Blocks of >= 100 µs (as
    time_cuda captures them) have no late sample, and warm chunks fill more of their wall with
    samples; a one-call graph of a µs matmul is faster than the host can queue it, so the chunks drop
    late samples there, and what they keep still agrees."""
    import math
    import statistics
    import time

    from attnbench.measure import timing

    flush = timing._L2Flusher("cuda") if l2 == "cold" else None

    def one_per_delay(graph, k, n):  # chunks of one: a lead and a sync for every sample
        one = timing.GraphSampler(graph.replay, k, "cuda", flush, most=1)
        one.plan(n)
        return [one() for _ in range(n)]

    for n, blocks in ((512, False), (512, True), (4096, True)):
        x = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        graph = timing.capture_graph(lambda: x @ x, 1, "cuda")
        k = 1
        if blocks and not flush:
            k = max(1, math.ceil(100.0 / statistics.median(one_per_delay(graph, 1, 5))))
            graph = timing.capture_graph(lambda: x @ x, k, "cuda")
        sampler = timing.GraphSampler(graph.replay, k, "cuda", flush)
        one, chunked, wall = [], [], [0.0, 0.0]
        for _ in range(3):
            t0 = time.perf_counter()
            one += one_per_delay(graph, k, 50)
            t1 = time.perf_counter()
            sampler.plan(50)
            chunked += [sampler() for _ in range(50)]
            wall[0] += t1 - t0
            wall[1] += time.perf_counter() - t1
        ratio = statistics.median(chunked) / statistics.median(one)
        assert abs(ratio - 1) < 0.06, (n, k, l2, ratio)
        if flush:  # cold samples stay one a lead: none late, no fill to gain
            assert sampler.late == 0
        elif blocks:
            assert sampler.late == 0, (n, k)
            assert sum(chunked) * k / wall[1] > sum(one) * k / wall[0], (n, k)
        else:
            assert sampler.late > 0, (n, k)


HIDDEN = """
name: hidden-work
workloads:
  - {mode: prefill, batch: 4, seqlen: 4k, q_heads: 32, head_dim: 128, causal: true}
  - {mode: decode, batch: 32, kv_len: 16k, q_heads: 32, kv_heads: 8, head_dim: 128, launch: [eager, graph]}
"""


def test_work_the_timer_cannot_see_is_never_ok(tmp_path):
    """A kernel left on its own stream, or left out of the captured graph, is timed by the events as
    (almost) nothing; the probe's trace still holds its device time, so the row is IMPLAUSIBLE, while
    the same kernel called properly beside it stays OK."""
    rows = run_cli(tmp_path, HIDDEN, "sdpa-flash,fake-own-stream,fake-outside-graph")
    for r in rows:  # shown with -s
        print("ROW", r["backend"], r["mode"], r["launch"], r["status"], r["kernel_us"], r["timed_over_kernel"],
              (r["reason"] or "")[:120])
    for r in by(rows, "sdpa-flash"):
        assert r["status"] == "OK", r["reason"]
        assert r["kernel_us"] > 0 and 0.7 <= r["timed_over_kernel"], r
        assert len(json.loads(r["kernel_calls_us"])) == 5, r["kernel_calls_us"]  # three calls before timing, two after
        if r["launch"] == "graph":
            assert r["timed_over_kernel"] < 1.3  # device time only: close to the kernels' own time
    own = by(rows, "fake-own-stream")
    assert all(r["status"] != "OK" and r["samples_us"] is None for r in own), own
    (prefill,) = [r for r in own if r["mode"] == "prefill"]  # the shape of the report: B=4 N=4k causal
    assert prefill["status"] == "IMPLAUSIBLE" and "did not see the work" in prefill["reason"], prefill
    statuses = {(r["mode"], r["launch"]): r["status"] for r in by(rows, "fake-outside-graph")}
    # the graph replays nothing: the recheck on new inputs (INCORRECT) or the kernel-time gate
    # (IMPLAUSIBLE) says so first
    graph = statuses.pop(("decode", "graph"))
    assert statuses == {("prefill", "eager"): "OK", ("decode", "eager"): "OK"} and graph in ("INCORRECT", "IMPLAUSIBLE")


def test_a_stream_left_current_is_set_back(tmp_path):
    """A backend that leaves its own stream current fails its rows (ERROR, naming the stream); the
    backends after it in the same worker run on the default stream and stay OK."""
    rows = run_cli(tmp_path, HIDDEN, "fake-sets-stream,sdpa-flash,sdpa-math")
    for r in rows:
        print("ROW", r["backend"], r["mode"], r["launch"], r["status"], (r["reason"] or "")[:120])
    sets = by(rows, "fake-sets-stream")
    assert sets and all(r["status"] != "OK" and "CUDA stream" in r["reason"] for r in sets), sets
    assert all(r["status"] == "OK" for r in rows if r["backend"] != "fake-sets-stream"), rows


def _uuid(index: int) -> str:
    return "GPU-" + str(torch.cuda.get_device_properties(index).uuid)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_the_attempts_gpu_is_the_one_measured(tmp_path):
    """On cuda:1 every CUDA action and NVML reading is GPU 1's: rows carry its index and UUID, graph
    decode times agree with GPU 0's, and hidden work is still caught."""
    per_device = {}
    for dev in ("cuda:0", "cuda:1"):
        d = tmp_path / dev.replace(":", "")
        d.mkdir()
        rows = run_cli(d, HIDDEN, "sdpa-flash,fake-own-stream", "--device", dev)
        per_device[dev] = rows
        for r in by(rows, "sdpa-flash"):
            assert r["status"] == "OK", r["reason"]
            assert r["device_index"] == int(dev[-1]) and r["device_uuid"] == _uuid(int(dev[-1]))
            assert r["kernel_us"] > 0 and r["sm_clock_mhz"] and r["clock_samples"] >= 2
        assert "OK" not in {r["status"] for r in by(rows, "fake-own-stream")}

    def graph_decode(rows):
        (r,) = [r for r in by(rows, "sdpa-flash") if r["launch"] == "graph"]
        return r["median_us"]

    a, b = graph_decode(per_device["cuda:0"]), graph_decode(per_device["cuda:1"])
    assert 0.85 < a / b < 1.15, (a, b)


def test_the_probe_finds_the_attempts_gpu_and_no_work_elsewhere():
    """The profiler's index of the GPU (one small kernel there) is found, and an attention call and
    a GEMM on it have no device time elsewhere."""
    import torch.nn.functional as F

    from attnbench.measure import dispatch

    q = torch.randn(4, 32, 2048, 128, device="cuda:0", dtype=torch.bfloat16)
    assert dispatch.home_index("cuda:0") is not None
    for step in (lambda: F.scaled_dot_product_attention(q, q, q, is_causal=True), lambda: q @ q.transpose(-1, -2)):
        p = dispatch.probe(step, "cuda:0", calls=2)
        assert p.status == "probed" and p.kernel_us > 0 and p.elsewhere == {}, (p.kernels, p.elsewhere)


def test_the_probe_tells_each_calls_device_time():
    """Each probed eager call's kernels are told to it by the host operator that launched them: one
    figure per call, their mean kernel_us. (A graph replay's kernels are not linked to an operator on
    torch 2.11: its probe reads their total only; the sweep probes the eager step under both
    launches.)"""
    import torch.nn.functional as F

    from attnbench.measure import dispatch, timing

    q = torch.randn(8, 32, 1, 64, device="cuda:0", dtype=torch.bfloat16)
    k = torch.randn(8, 8, 2048, 64, device="cuda:0", dtype=torch.bfloat16)

    def step():
        return F.scaled_dot_product_attention(q, k, k, enable_gqa=True)

    p = dispatch.probe(step, "cuda:0", calls=3)
    print("CALLS", p.call_kernel_us, p.kernel_us, p.kernels[:3])
    assert len(p.call_kernel_us) == 3 and min(p.call_kernel_us) > 0, (p.call_kernel_us, p.kernels)
    assert sum(p.call_kernel_us) / 3 == pytest.approx(p.kernel_us, rel=1e-3)
    late = dispatch.probe(step, "cuda:0", calls=2)
    assert len(late.call_kernel_us) == 2 and min(late.call_kernel_us) > 0, late.call_kernel_us
    replayed = dispatch.probe(timing.capture_graph(step, 1, "cuda:0").replay, "cuda:0", calls=3)

    def launched(names):  # a graph's memset node is not reported as the eager "Memset (Device)" (H200, torch 2.11)
        return {n for n in names if not n.startswith(("Memset", "Memcpy"))}

    assert launched(replayed.kernels) == launched(p.kernels) and launched(p.kernels)
    assert replayed.kernel_us == pytest.approx(p.kernel_us, rel=0.5)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_work_sent_to_another_gpu_is_never_ok(tmp_path):
    """A backend whose kernels run on the next GPU (right results, the caller waits for them) is a
    DISPATCH_MISMATCH naming the other GPU, on either GPU; a real backend beside it is OK: the
    profiler's index of the attempt's own GPU is found, not assumed."""
    for dev in ("cuda:0", "cuda:1"):
        d = tmp_path / dev.replace(":", "")
        d.mkdir()
        rows = run_cli(d, HIDDEN, "fake-other-gpu,sdpa-flash", "--device", dev)
        for r in rows:
            print("ROW", dev, r["backend"], r["mode"], r["launch"], r["status"], (r["reason"] or "")[:140])
        other = by(rows, "fake-other-gpu")
        assert other and all(r["status"] == "DISPATCH_MISMATCH" and "ran on another GPU" in r["reason"]
                             for r in other), other
        assert all(r["status"] == "OK" for r in by(rows, "sdpa-flash")), rows


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_cuda_visible_devices_reads_the_visible_gpu(tmp_path):
    """With only GPU 1 visible, torch calls it cuda:0; NVML (which sees every GPU) must still read GPU 1."""
    import os
    import subprocess
    import sys

    cfg = tmp_path / "grid.yaml"
    cfg.write_text("name: one\nworkloads:\n  - {mode: decode, batch: 8, kv_len: 4k, q_heads: 32, kv_heads: 8, "
                   "head_dim: 128, launch: graph}\n")
    db = tmp_path / "v.sqlite"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "1"}
    subprocess.run([sys.executable, "-m", "attnbench", "run", "--repeats", "1", "--config", str(cfg), "--device", "cuda", "--db",
                    str(db), "--backends", "sdpa-flash"], env=env, check=True, capture_output=True, timeout=600)
    con = sqlite3.connect(db)
    (uuid, index, clock), = con.execute("SELECT device_uuid, device_index, sm_clock_mhz FROM attempts").fetchall()
    prov = json.loads(con.execute("SELECT provenance FROM runs").fetchone()[0])
    assert uuid == _uuid(1) and index == 0 and clock
    assert prov["device"]["uuid"] == _uuid(1)
