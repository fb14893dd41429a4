"""Review of issues 39.4 and 40: the FP8 schemes, the outlier defaults, the ceiling shares and the DRAM misread rule
are each defined once; every user refers to that one definition (a copy, even an equal one, fails here)."""
from __future__ import annotations

import pytest

from attnbench.backends import fp8_emulated, fp8_quant
from attnbench.backends.cudnn_fe import CudnnFrontend
from attnbench.measure import distributions, fp8_contract, table3


def test_every_fp8_scheme_user_holds_the_named_tables_objects():
    cudnn = fp8_quant.SCHEMES["cudnn"]
    assert CudnnFrontend.fp8_scheme is cudnn and fp8_contract.DEFAULT_SCHEMES["fp8_e4m3"] is cudnn
    assert fp8_contract.CUDNN_FP8 is cudnn
    table = {id(s) for s in fp8_quant.SCHEMES.values()}
    assert all(id(s) in table for s in fp8_emulated.SCHEMES.values())
    assert set(fp8_emulated.SCHEMES) == {f"fp8-emu-{n}" for n in fp8_quant.SCHEMES}
    rows = [s for _, s in table3.ROWS.values() if s is not None]
    assert len(rows) == 4 and all(id(s) in table for s in rows)
    # the scheme as it was stored (cuDNN's string): unchanged
    assert cudnn == fp8_quant.parse_scheme("e4m3,tensor,p-e4m3x448,o-e4m3")
    assert {s.p_scale for n, s in fp8_quant.SCHEMES.items() if n != "cudnn"} == {fp8_quant.FA3_P_SCALE} == {256.0}


def test_fa3_outliers_defaults_are_the_outliers_pair(monkeypatch):
    d = distributions.parse("fa3-outliers")
    assert (d.rate, d.std) == (distributions.OUTLIER_P, distributions.OUTLIER_STD) == (0.001, 10.0)
    monkeypatch.setattr(distributions, "OUTLIER_P", 0.25)
    monkeypatch.setattr(distributions, "OUTLIER_STD", 3.0)
    assert (distributions.parse("fa3-outliers").rate, distributions.parse("fa3-outliers").std) == (0.25, 3.0)


# ---- issue 39.4: "% of clock peak" and "% of read ceiling" are the gate's, the misread rule is measure/peaks.py's
H200 = {"cc": "9.0", "sms": 132, "read_gbps": 4300.0, "copy_gbps": 4250.0, "dram_peak_gbps": 4915.2,
        "matmul_tflops_bf16": 790.0, "l2_bytes": 50 << 20}


def _judged(l2="cold", clock=1755.0, nbytes=1.5e9):
    from attnbench.runner import gates

    row = {"status": "OK", "samples_us": [500.0] * 5, "flops": 300e9, "bytes": nbytes, "dtype": "bf16",
           "sm_clock_max_mhz": clock, "launch": "graph", "l2": l2}
    return gates.judge(row, H200, H200["l2_bytes"], "cuda")


def test_analysis_shows_the_shares_the_gate_stored():
    from attnbench.analysis.ceilings import shares

    row = _judged()
    assert row["status"] == "OK" and row["pct_read"] and row["pct_peak_clock"]
    line = {"median_us": 500.0, "flops": 300e9, "bytes": 1.5e9, "dtype": "bf16", "l2": "cold",
            "sm_clock_mhz": 1620.0, "sm_clock_max_mhz": 1755.0,  # the median clock below the highest
            "pct_peak_clock": row["pct_peak_clock"], "pct_read": row["pct_read"]}
    s = shares(line, H200)
    assert (s["pct_peak_clock"], s["pct_read"]) == (row["pct_peak_clock"], row["pct_read"])
    assert s["peak_tflops_clock"] == pytest.approx(row["peak_tflops_clock"])
    # a row the gate judged on chip (warm, bytes within 2x L2) has no read share, in the store or in analysis
    warm = _judged(l2="warm", nbytes=1e6)
    small = {**line, "bytes": 1e6, "l2": "warm", "pct_read": warm.get("pct_read")}
    assert warm.get("pct_read") is None and shares(small, H200)["pct_read"] is None
    # a row stored before those columns: the gate's functions, at its median clock, off chip as the gate decides
    old = {k: v for k, v in line.items() if k not in ("sm_clock_max_mhz", "pct_peak_clock", "pct_read")}
    at_median = _judged(clock=1620.0)
    s = shares(old, H200)
    assert (s["pct_peak_clock"], s["pct_read"]) == (at_median["pct_peak_clock"], at_median["pct_read"])
    assert shares({**old, "bytes": 1e6, "l2": "warm"}, H200)["pct_read"] is None


def test_the_dram_misread_rule_has_one_owner(monkeypatch):
    from attnbench.measure import peaks

    assert peaks.dram_peak(H200) == 4915.2 and peaks.dram_peak({**H200, "dram_peak_gbps": 2400.0}) is None
    assert peaks.dram_peak({"dram_peak_gbps": 3000.0}) == 3000.0
    # 4,600 GB/s: above 1.02 x a believed 4,400 DRAM figure, below 1.15 x the 4,300 read: the gate asks peaks
    fast = {**H200, "dram_peak_gbps": 4400.0}
    row = {"status": "OK", "samples_us": [1e6 / 4600.0] * 5, "flops": 0.0, "bytes": 1e9, "dtype": "bf16",
           "sm_clock_max_mhz": 1755.0, "launch": "graph", "l2": "cold"}
    from attnbench.runner import gates

    assert gates.judge(row, fast, H200["l2_bytes"], "cuda")["status"] == "IMPLAUSIBLE"
    monkeypatch.setattr(peaks, "dram_peak", lambda c: None)  # the rule says: not a ceiling
    assert gates.judge(row, fast, H200["l2_bytes"], "cuda")["status"] == "OK"
