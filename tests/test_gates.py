"""Plausibility gates (runner/gates.py): a time the work cannot have taken is never OK."""
from __future__ import annotations

import pytest

from attnbench.runner import gates
from conftest import FAKES, rows_of

CEILINGS = {"matmul_tflops_bf16": 700.0, "matmul_tflops_fp16": 690.0, "matmul_tflops_fp32": 50.0,
            "read_gbps": 4000.0, "copy_gbps": 3900.0}
L2 = 60 << 20


def values(median_us=100.0, kernel_us=None, launch="eager", flops=1e9, nbytes=None, l2="warm", n=12):
    return {"status": "OK", "reason": None, "samples_us": [median_us] * n, "kernel_us": kernel_us,
            "launch": launch, "flops": flops, "bytes": nbytes, "l2": l2}


def test_a_median_below_the_kernels_device_time_is_implausible():
    v = gates.judge(values(median_us=73.0, kernel_us=1730.0), CEILINGS, L2)
    assert v["status"] == "IMPLAUSIBLE" and "did not see the work" in v["reason"] and "1.73e+03" in v["reason"]
    assert v["timed_over_kernel"] == pytest.approx(73 / 1730)
    # at the floor it passes; just under it fails
    assert gates.judge(values(median_us=70.0, kernel_us=100.0), CEILINGS, L2)["status"] == "OK"
    assert gates.judge(values(median_us=69.0, kernel_us=100.0), CEILINGS, L2)["status"] == "IMPLAUSIBLE"


def test_host_bound_is_derived_for_eager_rows_only():
    v = gates.judge(values(median_us=40.0, kernel_us=10.0), CEILINGS, L2)
    assert v["status"] == "OK" and v["host_bound"] is True and v["timed_over_kernel"] == 4.0
    v = gates.judge(values(median_us=14.0, kernel_us=10.0), CEILINGS, L2)
    assert v["host_bound"] is False
    v = gates.judge(values(median_us=40.0, kernel_us=10.0, launch="graph"), CEILINGS, L2)
    assert v["host_bound"] is False and v["timed_over_kernel"] == 4.0
    v = gates.judge(values(median_us=40.0), CEILINGS, L2)  # CPU: no kernel time, nothing derived
    assert "host_bound" not in v and "timed_over_kernel" not in v


def test_throughput_beyond_the_fastest_measured_matmul_is_implausible():
    # 700 TFLOP/s measured: 1.5x is 1050; 1e9 FLOP in 0.9 us is 1111 TFLOP/s
    v = gates.judge(values(median_us=0.9, flops=1e9), CEILINGS, L2)
    assert v["status"] == "IMPLAUSIBLE" and "matmul ceiling" in v["reason"]
    assert gates.judge(values(median_us=1.0, flops=1e9), CEILINGS, L2)["status"] == "OK"  # 1000 TFLOP/s
    # the fastest dtype bounds every dtype: a CPU kernel may compute bf16 in a faster unit than fp16's
    cpu = {"matmul_tflops_bf16": 0.78, "matmul_tflops_fp16": 0.0023}
    assert gates.flop_ceiling(cpu) == pytest.approx(0.78e12)
    # a CPU's ceilings are rough: only 10x above the fastest is implausible there
    assert gates.judge(values(median_us=2.0, flops=1e7), cpu, None, "cpu")["status"] == "OK"  # 5 TFLOP/s
    v = gates.judge(values(median_us=1.0, flops=1e7), cpu, None, "cpu")  # 10 TFLOP/s
    assert v["status"] == "IMPLAUSIBLE" and "limit 10x" in v["reason"]
    assert gates.judge(values(median_us=2.0, flops=1e7), cpu, None, "cuda")["status"] == "IMPLAUSIBLE"


def test_bandwidth_is_gated_only_where_l2_cannot_hold_the_bytes():
    big = 1 << 30  # 1 GiB of KV in 100 us: 10.7 TB/s against 4 TB/s read
    v = gates.judge(values(median_us=100.0, flops=1.0, nbytes=big), CEILINGS, L2)
    assert v["status"] == "IMPLAUSIBLE" and "read bandwidth" in v["reason"]
    assert gates.judge(values(median_us=300.0, flops=1.0, nbytes=big), CEILINGS, L2)["status"] == "OK"
    small = 8 << 20  # fits in L2 when warm: no HBM bound applies
    assert gates.judge(values(median_us=1.0, flops=1.0, nbytes=small), CEILINGS, L2)["status"] == "OK"
    v = gates.judge(values(median_us=1.0, flops=1.0, nbytes=small, l2="cold"), CEILINGS, L2)
    assert v["status"] == "IMPLAUSIBLE"  # flushed L2: HBM it is
    assert gates.judge(values(median_us=1.0, flops=1.0, nbytes=big), CEILINGS, None)["status"] == "OK"


def test_only_ok_timed_rows_are_judged_and_a_zero_median_is_never_ok():
    assert gates.judge({"status": "CRASH", "reason": "x"}, CEILINGS, L2) == {"status": "CRASH", "reason": "x"}
    v = gates.judge(values(median_us=0.0), CEILINGS, L2)
    assert v["status"] == "IMPLAUSIBLE"


CACHED = """
from attnbench.backends.base import Backend, Prepared
from attnbench.backends.layout import from_bhnd, to_bhnd
from attnbench.backends.reference import attention_math


class Cached(Backend):
    # computes once in prepare() and hands back the same tensor: correct, and no work per call
    def prepare(self, w, inputs):
        q, k, v = (to_bhnd(t, w.layout) for t in (inputs.q, inputs.k, inputs.v))
        o = from_bhnd(attention_math(q, k, v, w.causal, w.causal_align, inputs.scale), w.layout).detach()
        return Prepared(step=lambda: o)


BACKENDS = [Cached(name="fake-cached", family="plugin", modes=("prefill",))]  # declares no kernels
"""


@pytest.mark.slow
def test_a_cached_result_with_no_declared_kernels_is_never_ok_on_cpu(tmp_path):
    """Nothing to probe (no declared families) and no work per call: a check on other input values
    (the hard inputs before timing, the recheck after it: its output does not follow them) or the
    ceiling gate catches it, while a correct backend of the same run stays OK."""
    from attnbench.cli.main import main

    plugin = tmp_path / "cached.py"
    plugin.write_text(CACHED)
    db = tmp_path / "c.sqlite"
    grid = tmp_path / "g.yaml"
    grid.write_text("workloads:\n  - {mode: prefill, batch: 4, seqlen: 1k, q_heads: 8, head_dim: 64, dtype: fp32}\n")
    assert main(["run", "--repeats", "1", "--config", str(grid), "--plugin", str(plugin), "--plugin", FAKES, "--backends",
                 "fake-cached,fake-good", "--db", str(db), "--max-time", "0.1", "--device", "cpu"]) == 0
    rows = {r["backend"]: r for r in rows_of(db)}
    assert rows["fake-good"]["status"] == "OK", rows["fake-good"]["reason"]
    cached = rows["fake-cached"]
    assert cached["status"] in ("INCORRECT", "IMPLAUSIBLE") and cached["samples_us"] is None, cached
    assert any(t in cached["reason"] for t in ("on new input values", "on outliers inputs", "matmul ceiling"))


def test_a_cache_is_named_only_when_new_values_cost_both_many_times_and_milliseconds_more():
    # a 5 ms prefill timed at 20 µs: answered from a cache
    why = gates.answered_from_cache([5100.0, 5200.0, 5050.0], 20.0)
    assert why and "5050 µs (3 calls)" in why and "252x the timed median" in why
    # the fastest call on new values decides: one fast one clears the others' stalls
    assert gates.answered_from_cache([5100.0, 30.0, 5050.0], 20.0) is None
    # many times slower, but by less than the margin (a single call's launch and sync on a tiny kernel)
    assert gates.answered_from_cache([900.0, 950.0], 8.0) is None
    # milliseconds more, but not FRESH_RATIO times (a lower clock right after the checks)
    assert gates.answered_from_cache([14_000.0], 10_000.0) is None
    assert gates.answered_from_cache([], 20.0) is None and gates.answered_from_cache([5000.0], 0.0) is None
