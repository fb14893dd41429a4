"""Ceilings a row cannot silently exceed (issue 39.4): the read-only bandwidth probe, the compute peak at the
row's sampled SM clock beside the datasheet's, the gate above them, the decode share of the read ceiling, and the
off-roofline flag."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from attnbench.analysis.ceilings import OFF_ROOF_FACTOR, OFF_ROOF_PCT, off_roofline, shares
from attnbench.analysis.winners import throughput
from attnbench.measure import ceilings as ceilings_mod
from attnbench.measure import peaks
from attnbench.runner import gates

H200 = {"cc": "9.0", "sms": 132, "read_gbps": 4300.0, "copy_gbps": 4250.0, "dram_peak_gbps": 4915.2,
        "matmul_tflops_bf16": 790.0, "matmul_tflops_fp16": 790.0, "matmul_tflops_fp32": 50.0,
        "datasheet_clock_mhz": 1830}
L2 = 60 << 20


def test_the_read_ceiling_is_the_fastest_read_only_probe(monkeypatch):
    """Each probe's figure is kept; the ceiling is the fastest (a real read-only stream: a lower bound)."""
    seconds = iter([0.010, 0.004, 0.002, 0.003] + [0.001] * 10)  # copy, then sum, rows, columns, matmuls
    monkeypatch.setattr(ceilings_mod, "median_seconds", lambda fn, device, reps: next(seconds))
    monkeypatch.setattr(ceilings_mod, "host_op_us", lambda device: 1.0)
    c = ceilings_mod.ceilings("cpu")
    assert set(c["read_gbps_by"]) == {"sum", "rows", "columns"}
    assert c["read_gbps"] == max(c["read_gbps_by"].values()) == c["read_gbps_by"]["rows"]
    assert c["read_gbps"] == pytest.approx(c["read_bytes"] / 0.002 / 1e9, rel=1e-2)


def test_read_probes_only_read_and_reduce_the_whole_buffer():
    import torch

    vals = torch.ones(4 * ceilings_mod.READ_ROW)
    before = vals.clone()
    got = {k: fn() for k, fn in ceilings_mod.read_probes(vals).items()}
    assert float(got["sum"]) == vals.numel() and float(got["rows"].sum()) == vals.numel()
    assert float(got["columns"].sum()) == vals.numel() and torch.equal(vals, before)


def test_the_compute_peak_scales_with_the_clock_beside_the_datasheet_figure():
    assert peaks.tflops_at(H200, "bf16", 1830) == pytest.approx(989.4, abs=0.1)  # the datasheet's
    assert peaks.tflops_at(H200, "bf16", 1980) == pytest.approx(1070.5, abs=0.1)  # boost
    assert peaks.tflops_at(H200, "fp8_e4m3", 1830) == pytest.approx(2 * 989.4, abs=0.2)
    assert peaks.tflops_at(H200, "bf16", None) is None
    assert peaks.tflops_at({"cc": "7.5", "sms": 40}, "bf16", 1500) is None  # no rate known: no clock peak
    assert peaks.datasheet_clock_mhz("NVIDIA H200") == 1830
    s = shares({"median_us": 1000.0, "flops": 600e9, "bytes": None, "dtype": "bf16", "sm_clock_mhz": 1625}, H200)
    assert s["peak_tflops_clock"] == pytest.approx(878.6, abs=0.1)
    assert s["datasheet_tflops"] == pytest.approx(989.4, abs=0.1)
    assert s["pct_peak_clock"] == pytest.approx(100 * 600 / 878.6, rel=1e-3)  # 68%, not 61% of the datasheet


def _row(median_us, flops=0.0, nbytes=None, dtype="bf16", clock=1755.0):
    return {"status": "OK", "samples_us": [median_us] * 5, "flops": flops, "bytes": nbytes, "dtype": dtype,
            "sm_clock_max_mhz": clock, "launch": "graph", "l2": "warm"}


def test_a_row_above_its_clock_peak_is_implausible_where_the_matmul_margin_let_it_pass():
    peak = peaks.tflops_at(H200, "bf16", 1755)  # 949 TFLOP/s
    fast = gates.judge(_row(1000.0, flops=1.08 * peak * 1e9), H200, L2)  # 108%: under 1.5 x 790 matmul
    assert fast["status"] == "IMPLAUSIBLE" and "SM clock" in fast["reason"] and "1755" in fast["reason"]
    ok = gates.judge(_row(1000.0, flops=0.7 * peak * 1e9), H200, L2)
    assert ok["status"] == "OK" and ok["pct_peak_clock"] == pytest.approx(70.0)
    assert ok["peak_tflops_clock"] == pytest.approx(peak)
    within = gates.judge(_row(1000.0, flops=1.03 * peak * 1e9), H200, L2)  # the clock between readings
    assert within["status"] == "OK" and within["pct_peak_clock"] > 100
    assert gates.judge(_row(1000.0, flops=1.08 * peak * 1e9, clock=None), H200, L2)["status"] == "OK"  # no NVML


def test_reading_beyond_the_probe_is_named_and_beyond_the_dram_implausible():
    nbytes = 4 << 30  # off chip
    over = gates.judge(_row(nbytes / 4500e3, nbytes=nbytes, dtype="bf16"), H200, L2)  # 4.5 TB/s: cuDNN decode
    assert over["status"] == "OK" and over["pct_read"] == pytest.approx(100 * 4500 / 4300, rel=1e-3)
    beyond = gates.judge(_row(nbytes / 5200e3, nbytes=nbytes), H200, L2)  # above 4915 x 1.02; under 1.5 x 4300
    assert beyond["status"] == "IMPLAUSIBLE" and "theoretical" in beyond["reason"]
    no_dram = {k: v for k, v in H200.items() if k != "dram_peak_gbps"}
    assert gates.judge(_row(nbytes / 5200e3, nbytes=nbytes), no_dram, L2)["status"] == "IMPLAUSIBLE"  # 1.21x
    assert gates.judge(_row(nbytes / 4800e3, nbytes=nbytes), no_dram, L2)["status"] == "OK"  # 1.12x
    misread = {**H200, "dram_peak_gbps": 2400.0}  # NVML's figure below the measured read: not believed
    assert gates.judge(_row(nbytes / 4500e3, nbytes=nbytes), misread, L2)["status"] == "OK"


def test_decode_share_is_of_the_read_ceiling_not_the_copy():
    rows = pd.DataFrame([{"mode": "decode", "median_us": 1000.0, "flops": 1e9, "bytes": 4.3e12 * 1e-3,
                          "dtype": "bf16"}])
    got = throughput(rows, lambda r: {"read_gbps": 4300.0, "copy_gbps": 2150.0})
    assert got["pct_ceiling"].iloc[0] == pytest.approx(100.0)  # of the read; the copy would say 200%


def _lines(slow_us: float, slow_backend="flex", fast_us=100.0):
    base = {"side": "a", "label": "a", "device_name": "NVIDIA H200", "workload_key": "w", "mode": "decode",
            "batch": 8, "q_len": 4, "kv_len": 4096, "dtype": "bf16", "launch": "graph", "role": "contestant",
            "flops": 2e9, "bytes": 0.2e9, "sm_clock_mhz": 1980.0, "l2": "cold"}
    return pd.DataFrame([{**base, "backend": "sdpa-cudnn", "median_us": fast_us},
                         {**base, "backend": slow_backend, "median_us": slow_us}])


def test_off_roofline_names_the_slow_line_and_its_faster_alternative():
    ceil = {("a", "NVIDIA H200"): {**H200, "l2_bytes": 50 << 20}}  # the read share: off chip, as the gate takes it
    # 0.2 GB in 500 µs: 9% of the read ceiling, 4 TFLOP/s: <1% of the clock peak; 5x the fastest
    (flag,) = off_roofline(_lines(500.0), ceil)
    assert flag["backend"] == "flex" and flag["faster"] == "sdpa-cudnn" and flag["lead"] == pytest.approx(5.0)
    assert flag["pct_read"] < OFF_ROOF_PCT and flag["pct_compute"] < OFF_ROOF_PCT
    assert off_roofline(_lines(OFF_ROOF_FACTOR * 100.0 * 0.9), ceil) == []  # not far enough behind
    assert off_roofline(_lines(500.0, fast_us=20.0).assign(bytes=2e9), ceil) == []  # 2 GB in 500 µs: 93% of read
    assert off_roofline(_lines(500.0).iloc[[1]], ceil) == []  # no alternative


def test_analyze_prints_the_off_roofline_flag(tmp_path):
    """Through the analyze text: the flag, its faster alternative and the lead."""
    from types import SimpleNamespace

    from attnbench.report.analysis_text import off_roofline_lines

    ceil = {("a", "NVIDIA H200"): {**H200, "l2_bytes": 50 << 20}}
    eff = SimpleNamespace(off_roofline=off_roofline(_lines(500.0), ceil), shared={"a": 2})
    text = "\n".join(off_roofline_lines(SimpleNamespace(efficiency=eff)))
    assert "flex" in text and "sdpa-cudnn is 5.0x faster" in text and "2 OK rows measured while another" in text


# ---- on the GPU
# prefill at the anchor shape (compute-bound) and decode B64 Nkv 16k under a graph (4.3 GB of KV: off chip, read-bound)
GRID = """name: ceilings-test
workloads:
  - {mode: prefill, batch: 4, seqlen: 4k, q_heads: 32, head_dim: 128, causal: false}
  - {mode: decode, batch: 64, seqlen: 16k, q_heads: 32, kv_heads: 8, head_dim: 128, launch: graph}
"""


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.gpu
def test_the_read_probe_beats_the_copy_and_stays_under_the_dram():
    if not _cuda():
        pytest.skip("needs a CUDA device")
    from attnbench.measure.peaks import device_peaks

    c = ceilings_mod.ceilings("cuda")
    assert c["read_gbps"] > c["copy_gbps"] / 2, c  # a copy reads half its counted bytes
    top = device_peaks("cuda").get("dram_peak_gbps")  # NVML's figure itself: ceilings() drops one below the read
    if top is None:
        pytest.skip("NVML gave no DRAM bandwidth")
    assert c["read_gbps"] < top, c


@pytest.mark.gpu
def test_no_ok_row_above_its_clock_peak_or_read_ceiling(tmp_path):
    """A run of a few prefill and decode rows on the GPU: every OK row within 100% of its sampled-clock compute
    peak and of the DRAM's theoretical bandwidth; a row above the measured read ceiling (cuDNN's decode read
    4.57 TB/s on the H200 against the best probe's 4.38, 103-104%) is real and named by `show`, not silent."""
    if not _cuda():
        pytest.skip("needs a CUDA device")
    db, grid = tmp_path / "s.sqlite", tmp_path / "g.yaml"
    grid.write_text(GRID)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    cmd = [sys.executable, "-m", "attnbench", "run", "--device", "cuda", "--config", str(grid), "--backends",
           "sdpa-cudnn,sdpa-flash", "--repeats", "1", "--max-time", "0.2", "--db", str(db)]
    subprocess.run(cmd, check=True, env=env, timeout=300)
    import sqlite3

    con = sqlite3.connect(db)
    rows = con.execute("SELECT backend, mode, pct_peak_clock, pct_read FROM attempts WHERE status='OK'").fetchall()
    assert rows
    ceil = json.loads(con.execute("SELECT provenance FROM runs").fetchone()[0])["ceilings"]
    dram = ceil.get("dram_peak_gbps") or float("inf")
    over = [r for r in rows if (r[2] or 0) > 100 or (r[3] or 0) * ceil["read_gbps"] / 100 > dram]
    assert not over, json.dumps(over)
    above_read = [r for r in rows if (r[3] or 0) > 100]
    if above_read:  # real, and named where rows are shown
        shown = subprocess.run([sys.executable, "-m", "attnbench", "show", "--db", str(db)], env=env, text=True,
                               capture_output=True, check=True).stdout
        assert "faster than the measured read ceiling" in " ".join(shown.split()), shown
    assert any(r[2] is not None for r in rows if r[1] == "prefill")  # the clock peak was known
    assert any(r[3] is not None for r in rows if r[1] == "decode")  # and an off-chip decode row read
    # real kernels cannot pass the clock peak or the DRAM: a row the new gate refused would be its false alarm
    refused = con.execute("SELECT backend, mode, reason FROM attempts WHERE status='IMPLAUSIBLE'").fetchall()
    assert not refused, refused


@pytest.mark.gpu
def test_the_triton_read_stream_reads_every_element_once():
    """The streaming variant of the read ceiling sums what torch sums (so it read the whole buffer) and is one
    of the variants the run measures on a GPU with Triton."""
    if not _cuda():
        pytest.skip("needs a CUDA device")
    import torch

    from attnbench.measure import read_stream

    if read_stream.triton is None:
        pytest.skip("Triton is not installed")
    vals = torch.rand(ceilings_mod.READ_ROW * 64 + 0, device="cuda")
    got = read_stream.stream_probe(vals)()
    assert torch.allclose(got.sum().double(), vals.sum().double(), rtol=1e-4)
    assert "stream" in ceilings_mod.read_probes(vals)
