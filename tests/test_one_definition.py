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
