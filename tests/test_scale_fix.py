"""Analysis and report at study scale (issue 43.3): the off-roofline flag vectorised (the same lines as the
per-row walk it replaced, in a fraction of its time); the re-measure column made once per workload and run."""
from __future__ import annotations

import json
import time

import numpy as np
import pandas as pd
import pytest

from attnbench.analysis.ceilings import OFF_ROOF_FACTOR, OFF_ROOF_PCT, off_roofline, shares

H200 = {"cc": "9.0", "sms": 132, "read_gbps": 4300.0, "copy_gbps": 4250.0, "matmul_tflops_bf16": 790.0,
        "matmul_tflops_fp16": 790.0}
NO_READ = {"cc": "9.0", "sms": 132, "copy_gbps": 3000.0, "matmul_tflops_bf16": 700.0}  # the copy's bandwidth
NO_CC = {"read_gbps": 4000.0, "matmul_tflops_bf16": 800.0}  # no clock peak: the matmul's share instead


def _per_row(lines: pd.DataFrame, ceilings: dict) -> list[dict]:
    """The flag as it was computed before issue 43.3: a walk over each group's rows with shares() per row."""
    lines = lines[lines["role"] != "accuracy_reference"]
    lines = lines[pd.to_numeric(lines["median_us"], errors="coerce") > 0]
    out = []
    for _, g in lines.groupby(["side", "device_name", "workload_key"], sort=True, dropna=False):
        if len(g) < 2:
            continue
        fastest = g.loc[g["median_us"].idxmin()]
        for r in g.to_dict(orient="records"):
            lead = float(r["median_us"] / fastest["median_us"])
            if r["backend"] == fastest["backend"] or lead < OFF_ROOF_FACTOR:
                continue
            s = shares(r, ceilings.get((r.get("label"), r.get("device_name"))) or {})
            compute = s["pct_peak_clock"] if s["pct_peak_clock"] is not None else s["pct_matmul"]
            known = [v for v in (compute, s["pct_read"]) if v is not None]
            if not known or max(known) >= OFF_ROOF_PCT:
                continue
            out.append({"side": r["side"], "device_name": r["device_name"], "mode": r["mode"],
                        "workload_key": r["workload_key"], "batch": r["batch"], "q_len": r["q_len"],
                        "kv_len": r["kv_len"], "dtype": r["dtype"], "launch": r["launch"], "backend": r["backend"],
                        "median_us": r["median_us"], "pct_compute": compute, "pct_read": s["pct_read"],
                        "faster": fastest["backend"], "faster_median_us": float(fastest["median_us"]), "lead": lead})
    return sorted(out, key=lambda d: -d["lead"])


def _random_lines(n_workloads: int, seed: int = 0) -> pd.DataFrame:
    """Lines of three stores (one with the copy's bandwidth only, one without a compute capability, one with no
    ceilings), some clocks unread, some models missing, ties for the fastest, references and zero medians."""
    rng = np.random.default_rng(seed)
    rows = []
    for w in range(n_workloads):
        side = ("a", "b", "c", "d")[w % 4]
        base = {"side": side, "label": side, "device_name": "NVIDIA H200", "workload_key": f"w{w // 4}",
                "mode": ("prefill", "decode")[w % 2], "batch": int(rng.integers(1, 64)), "q_len": 1,
                "kv_len": int(2 ** rng.integers(8, 16)), "dtype": ("bf16", "fp16", "fp32")[w % 3], "launch": "graph"}
        for k, backend in enumerate(("sdpa-flash", "sdpa-cudnn", "flex", "compile", "eager")[:1 + w % 5]):
            med = float(rng.choice([10.0, 10.0, 40.0, 200.0, 1000.0, 0.0])) * (1 + 0.01 * k * (w % 3))
            rows.append({**base, "backend": backend, "role": "accuracy_reference" if k == 4 else "contestant",
                         "median_us": med, "flops": float(rng.choice([0.0, 1e6, 1e9, np.nan])),
                         "bytes": float(rng.choice([0.0, 1e5, 1e8, np.nan])),
                         "sm_clock_mhz": float(rng.choice([1980.0, 1500.0, np.nan]))})
    return pd.DataFrame(rows)


CEILINGS = {("a", "NVIDIA H200"): H200, ("b", "NVIDIA H200"): NO_READ, ("c", "NVIDIA H200"): NO_CC}


def test_off_roofline_flags_the_same_lines_as_the_per_row_walk():
    lines = _random_lines(600)
    got, want = off_roofline(lines, CEILINGS), _per_row(lines, CEILINGS)
    assert len(want) > 20 and any(r["pct_compute"] is None or r["pct_read"] is None for r in want)
    assert json.dumps(got) == json.dumps(want)  # values, order and None where a share is unknown
    assert [type(v) for v in got[0].values()] == [type(v) for v in want[0].values()]


def test_off_roofline_over_a_study_s_lines_is_vectorised():
    """12k lines (the portability sweep's): the per-row walk took ~5 s of CPU; vectorised, ~0.1 s."""
    lines = _random_lines(4000, seed=1)
    assert len(lines) > 11000
    t = time.process_time()
    off_roofline(lines, CEILINGS)
    assert time.process_time() - t < 1.5


def test_the_re_measure_column_makes_one_yaml_block_per_workload(monkeypatch):
    """The report's failures table (13k failed attempts of ~500 workloads in the portability sweep) asked one
    YAML dump per row; each distinct workload's block, key and label are made once, every row's text as before."""
    from conftest import make_row

    from attnbench.analysis import repro

    runs = [{"run_id": "run-a", "argv": "attnbench run --grid quick --seed 7 --tol 4 --db a.sqlite",
             "provenance": {"libraries": {"triton": "3.6.0"}}},
            {"run_id": "run-b", "argv": "attnbench run --grid quick --device cuda:1 --plugin 'my p.py'"}]
    rows = [make_row(i % 5, attempt_key=f"k{i}", status="UNSUPPORTED", backend=("be 1", "sdpa")[i % 2],
                     run_id=("run-a", "run-b", "run-c")[i % 3], torch_version=("2.11", None)[i % 2],
                     device_name=("NVIDIA H200", "CPU test")[i % 7 == 0])
            for i in range(120)]
    df = pd.DataFrame(rows)
    by_id = {r["run_id"]: r for r in runs}
    want = [(repro.command(r, by_id.get(r["run_id"], {}), repro.workload_of(r)), repro.yaml_block(repro.workload_of(r)),
             repro.versions(r, by_id.get(r["run_id"], {}))) for r in df.to_dict("records")]
    calls = []
    dump = repro.yaml_block
    monkeypatch.setattr(repro, "yaml_block", lambda w: calls.append(w) or dump(w))
    frame = repro.repro_frame(df, runs)
    assert len(calls) == 5  # one per workload, not 120
    assert list(zip(frame["command"], frame["yaml"], frame["versions"])) == want
    assert frame["workload_key"].tolist() == [repro.workload_of(r).key() for r in rows]
    assert "'be 1'" in frame["command"].iloc[0] and "'my p.py'" in frame["command"].iloc[1]


def test_line_figures_are_laid_out_without_constrained_layout_and_nothing_overlaps():
    """perf_lines places its panels from measured text sizes (no layout engine: constrained layout's extra pass
    over every tick was a third of the figure's drawing); drawn, no panel's labels reach into another's, the
    legend's or the suptitle's, and all stays on the figure."""
    import io

    import matplotlib
    from matplotlib.backends.backend_agg import RendererAgg

    from attnbench.report.html.figures import STYLE, backend_colors, perf_lines

    rows = [{"backend": bk, "role": "contestant", "batch": b, "kv_len": n, "median_us": (1 + k) * n * b / 50,
             "value": 700 * n / (n + 3000) / (1 + k), "peak_mem_mib": n * b / 7, "host_bound": n == 256 and k == 0,
             "clock_low": False}
            for b in (1, 16, 128) for k, bk in enumerate(("sdpa-flash", "flex", "compile")) for n in (256, 4096, 32768)]
    with matplotlib.rc_context(STYLE):
        fig = perf_lines(pd.DataFrame(rows), ["time", "throughput", "memory"], "TFLOP/s", 790.0, "measured matmul",
                         "sequence length N", "a heading long enough to wrap onto a second line " * 4,
                         backend_colors(["sdpa-flash", "flex", "compile"]))
        assert fig.get_layout_engine() is None
        fig.savefig(io.BytesIO(), format="svg")
        r = RendererAgg(*(int(v) for v in fig.get_size_inches() * fig.dpi), fig.dpi)
        boxes = [ax.get_tightbbox(r) for ax in fig.axes if ax.get_subplotspec() is not None]
        legend, sup = fig.legends[0].get_window_extent(r), fig.get_suptitle() and fig._suptitle.get_window_extent(r)
    W, H = fig.get_size_inches() * fig.dpi
    for i, a in enumerate(boxes):
        assert a.x0 >= -1 and a.y0 >= -1 and a.x1 <= W + 1 and a.y1 <= H + 1
        assert not a.overlaps(legend) and not a.overlaps(sup)
        for b in boxes[i + 1:]:
            assert not a.overlaps(b)
