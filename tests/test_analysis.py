"""Statistics behind `attnbench show` (analysis/): per-backend lines, winners, outcomes, overview, kernels."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from attnbench.analysis.ceilings import ceilings_by_device
from attnbench.analysis.frames import WORKLOAD_COLS, per_backend
from attnbench.analysis.kernels import library_kernel
from attnbench.analysis.outcomes import status_counts
from attnbench.analysis.overview import run_overview
from attnbench.analysis.winners import SEPARATION_RATIO, best_per_workload, separation
from attnbench.report.terminal import overview_line
from conftest import make_row

RUNS = [{"device_name": "CPU test", "provenance": {"ceilings": {"copy_gbps": 10.0, "matmul_tflops_bf16": 1.0}}}]


def frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows)


def ok(i, backend, median, repeat=0, **kw):
    r = make_row(0, backend=backend, median_us=median, p95_us=median * 1.1, repeat=repeat,
                 attempt_key=f"{backend}-{repeat}-{i}-{kw.get('device_name', '')}", **kw)
    return r


def test_per_backend_takes_the_median_of_repeat_medians_and_the_worst_p95():
    df = frame([ok(0, "a", 10.0, 0), ok(1, "a", 30.0, 1), ok(2, "a", 20.0, 2), ok(3, "b", 5.0, 0),
                make_row(0, backend="c", status="CRASH", attempt_key="c")])
    pb = per_backend(df).set_index("backend")
    assert set(pb.index) == {"a", "b"}  # only OK rows
    assert pb.loc["a", "median_us"] == 20.0 and pb.loc["a", "repeats"] == 3
    assert pb.loc["a", "p95_us"] == pytest.approx(33.0)


def test_best_per_workload_excludes_references_unless_asked():
    df = frame([ok(0, "fast", 10.0), ok(1, "slow", 40.0), ok(2, "ref", 1.0, role="accuracy_reference")])
    best = best_per_workload(df, RUNS)
    (row,) = best.to_dict(orient="records")
    assert row["best"] == "fast" and row["runner_up"] == "slow" and row["ratio"] == pytest.approx(4.0)
    assert row["contestants"] == 2 and row["metric"] == "TFLOP/s"
    assert row["value"] == pytest.approx(row_flops(df) / 10e-6 / 1e12)
    assert row["pct_ceiling"] == pytest.approx(100 * row["value"] / 1.0)
    assert best_per_workload(df, RUNS, include_references=True).iloc[0]["best"] == "ref"


def row_flops(df):
    return float(df["flops"].iloc[0])


def test_decode_is_judged_in_modelled_gb_per_s():
    r = ok(0, "d", 4.0, mode="decode", q_len=1, bytes=4.0e6)
    (row,) = best_per_workload(frame([r]), RUNS).to_dict(orient="records")
    assert row["metric"] == "GB/s" and row["value"] == pytest.approx(1000.0)
    assert row["pct_ceiling"] == pytest.approx(10000.0)


def test_decode_percentage_is_of_the_read_bandwidth():
    """Decode only reads: its share is of the measured read ceiling (issue 39.4), the copy's only where a store
    has no read figure."""
    runs = [{"device_name": "CPU test", "provenance": {"ceilings": {"copy_gbps": 10.0, "read_gbps": 20.0,
                                                                    "matmul_tflops_bf16": 1.0}}}]
    r = ok(0, "d", 4.0, mode="decode", q_len=1, bytes=4.0e6)
    (row,) = best_per_workload(frame([r]), runs).to_dict(orient="records")
    assert row["pct_ceiling"] == pytest.approx(100 * 1000.0 / 20.0)
    del runs[0]["provenance"]["ceilings"]["read_gbps"]
    (row,) = best_per_workload(frame([r]), runs).to_dict(orient="records")
    assert row["pct_ceiling"] == pytest.approx(100 * 1000.0 / 10.0)


def test_no_ceiling_no_percentage_and_empty_frames():
    (row,) = best_per_workload(frame([ok(0, "a", 10.0)]), []).to_dict(orient="records")
    assert row["pct_ceiling"] is None
    empty = frame([make_row(0, status="OOM")])
    assert best_per_workload(empty, RUNS).empty
    assert status_counts(frame([])).empty


def test_ceilings_latest_run_wins():
    runs = [{"device_name": "X", "provenance": {"ceilings": {"copy_gbps": 1.0}}},
            {"device_name": "X", "provenance": {"ceilings": {"copy_gbps": 2.0}}},
            {"device_name": "Y", "provenance": {}}]
    assert ceilings_by_device(runs) == {"X": {"copy_gbps": 2.0}}


def test_status_counts():
    df = frame([ok(0, "a", 1.0), make_row(1, backend="a", status="CRASH", attempt_key="x"),
                make_row(2, backend="b", status="CRASH", attempt_key="y")])
    sc = status_counts(df)
    assert sc.loc["a", "OK"] == 1 and sc.loc["a", "CRASH"] == 1 and sc.loc["b", "CRASH"] == 1
    assert sc.loc["b", "OK"] == 0


def test_devices_are_not_pooled():
    df = frame([ok(0, "a", 10.0, device_name="GPU-1"), ok(1, "b", 20.0, device_name="GPU-1"),
                ok(2, "a", 1000.0, device_name="GPU-2"), ok(3, "b", 30.0, device_name="GPU-2")])
    best = best_per_workload(df, [])
    assert len(best) == 2
    assert dict(zip(best["device_name"], best["best"])) == {"GPU-1": "a", "GPU-2": "b"}


def test_per_backend_pools_the_raw_samples_of_all_repeats():
    a0 = ok(0, "a", 10.0, 0, samples_us=[1.0, 2.0])
    a1 = ok(1, "a", 11.0, 1, samples_us=[3.0])
    pb = per_backend(frame([a0, a1])).set_index("backend")
    assert sorted(pb.loc["a", "samples"]) == [1.0, 2.0, 3.0]
    # as read back from the store: JSON text
    a0["samples_us"], a1["samples_us"] = "[1.0, 2.0]", "[3.0]"
    assert sorted(per_backend(frame([a0, a1])).set_index("backend").loc["a", "samples"]) == [1.0, 2.0, 3.0]


def test_separation_bootstrap_lower_bound():
    import random

    rng = random.Random(0)
    fast = [10 + rng.random() for _ in range(50)]
    slow = [20 + rng.random() for _ in range(50)]
    lb = separation(fast, slow)
    assert 1.8 < lb < 2.1  # about 2x, a little below the point estimate
    assert separation(fast, slow) == lb  # seeded
    same = [10 + rng.random() for _ in range(50)]
    assert separation(fast, same) < 1.0  # no separation: the interval reaches below 1
    assert separation([1.0], slow) is None and separation(fast, []) is None


def _pair(fast_median, slow_median, fast_samples, slow_samples):
    return frame([ok(0, "fast", fast_median, samples_us=fast_samples),
                  ok(1, "slow", slow_median, samples_us=slow_samples)])


def test_a_clear_winner_needs_ten_percent_and_a_separated_bootstrap():
    fast = [10.0 + 0.01 * i for i in range(30)]
    far = [20.0 + 0.01 * i for i in range(30)]
    near = [10.5 + 0.01 * i for i in range(30)]
    mixed = [10.0 + 2.0 * (i % 2) for i in range(30)]
    (r,) = best_per_workload(_pair(10.1, 20.1, fast, far), []).to_dict(orient="records")
    assert r["clear"] is True and r["ratio_l95"] > 1
    (r,) = best_per_workload(_pair(10.1, 10.6, fast, near), []).to_dict(orient="records")
    assert r["ratio"] < SEPARATION_RATIO and r["clear"] is False  # separated but less than 10% ahead
    (r,) = best_per_workload(_pair(10.1, 12.0, fast, mixed), []).to_dict(orient="records")
    assert r["ratio"] >= SEPARATION_RATIO and r["ratio_l95"] <= 1 and r["clear"] is False
    (r,) = best_per_workload(frame([ok(0, "alone", 10.0)]), []).to_dict(orient="records")
    assert r["clear"] is False and r["contestants"] == 1


def test_run_overview_wall_over_timed_and_cv_by_launch():
    rows = []
    # graph: per-repeat medians 10, 10, 12 (CV 0.108); eager: 20, 40 (CV 0.471); one repeat only: no CV
    for rep, med in enumerate((10.0, 10.0, 12.0)):
        rows.append(ok(0, "g", med, rep, launch="graph", workload_key="wg", samples_us=[med] * 4,
                       calls_per_sample=5, created_at=f"2026-01-01T00:00:{10 + rep:02d}Z"))
    for rep, med in enumerate((20.0, 40.0)):
        rows.append(ok(1, "e", med, rep, launch="eager", workload_key="we", samples_us=[med] * 2,
                       calls_per_sample=1))
    rows.append(ok(2, "once", 5.0, 0, launch="eager", workload_key="w1", samples_us=[5.0], calls_per_sample=1))
    rows.append(make_row(3, status="UNSUPPORTED", reason="no", attempt_key="u", samples_us=None, median_us=None))
    df = frame(rows)
    runs = [{"run_id": "run-a", "started_at": "2026-01-01T00:00:00Z", "finished_at": "2026-01-01T00:01:40Z"}]
    o = run_overview(df, runs)
    assert o["attempts"] == 7 and o["status"] == {"OK": 6, "UNSUPPORTED": 1}
    timed_us = (10 + 10 + 12) * 4 * 5 + (20 + 40) * 2 + 5
    assert o["timed_s"] == pytest.approx(timed_us / 1e6)
    assert o["sweep_wall_s"] == 100 and o["wall_over_timed"] == pytest.approx(100 / (timed_us / 1e6))
    g, e = o["cv_by_launch"]["graph"], o["cv_by_launch"]["eager"]
    assert g["pairs"] == 1 and g["median"] == pytest.approx(pd.Series([10, 10, 12.0]).std() / (32 / 3))
    assert e["pairs"] == 1 and e["median"] == pytest.approx(pd.Series([20, 40.0]).std() / 30)
    assert o["cv"]["pairs"] == 2 and o["cv"]["max"] == pytest.approx(e["median"])


def test_run_overview_of_an_interrupted_run_ends_at_its_last_row():
    df = frame([ok(0, "a", 10.0, 0, created_at="2026-01-01T00:00:30Z")])
    o = run_overview(df, [{"run_id": "run-a", "started_at": "2026-01-01T00:00:00Z", "finished_at": None}])
    assert o["sweep_wall_s"] == 30 and o["cv"] == {"pairs": 0} and o["cv_by_launch"] == {}


def test_run_overview_counts_only_runs_with_attempts_in_the_frame():
    df = frame([ok(0, "a", 10.0, 0, run_id="run-a", created_at="2026-01-01T00:00:30Z")])
    runs = [{"run_id": "run-a", "started_at": "2026-01-01T00:00:00Z", "finished_at": "2026-01-01T00:01:40Z"},
            # another tag's run (filtered out of df) and a resume that wrote nothing: neither is this sweep's time
            {"run_id": "run-b", "started_at": "2026-01-02T00:00:00Z", "finished_at": "2026-01-02T01:00:00Z"},
            {"run_id": "run-c", "started_at": "2026-01-03T00:00:00Z", "finished_at": None}]
    o = run_overview(df, runs)
    assert o["sweep_wall_s"] == 100
    assert o["wall_over_timed"] == pytest.approx(100 / o["timed_s"])
    assert run_overview(frame([]), runs)["sweep_wall_s"] == 0


CUDNN = "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_cga1x1x1_kernel0_0"
INDUCTOR = ["triton_red_fused__softmax_add_0", "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT"]


def test_library_kernel_is_the_stored_attention_family_when_it_took_the_most_time():
    assert library_kernel("compile", "cudnn", "cudnn", [CUDNN]) == "cudnn"
    assert library_kernel("plugin", "pytorch-flash", "pytorch-flash", []) == "pytorch-flash"
    assert library_kernel("sdpa", "cudnn", "cudnn", [CUDNN]) is None  # pinned and named after its kernel
    assert library_kernel("compile", "triton", None, INDUCTOR) is None  # Inductor's own code
    assert library_kernel("compile", "triton", float("nan"), INDUCTOR) is None  # NULL as pandas reads it
    # an attention kernel ran, but something else took the most device time
    assert library_kernel("compile", "unfused-gemm", "cudnn", [CUDNN]) is None
    # the stored families are believed over the names: no re-classification
    assert library_kernel("compile", "cudnn", "cudnn", INDUCTOR) == "cudnn"
    assert library_kernel("compile", "triton", None, [CUDNN]) is None


def test_library_kernel_of_rows_from_before_the_stored_families_classifies_the_first_name():
    for null in (None, float("nan")):
        assert library_kernel("compile", null, null, [CUDNN, "Memset (Device)"]) == "cudnn"
        assert library_kernel("plugin", null, null, ["pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits>"]) \
            == "pytorch-flash"
        assert library_kernel("sdpa", null, null, [CUDNN]) is None
        assert library_kernel("compile", null, null, INDUCTOR) is None
        assert library_kernel("compile", null, null, ["Memset (Device)", CUDNN]) is None  # by most device time only
        assert library_kernel("compile", null, null, None) is None and library_kernel("compile", null, null, []) is None


def test_best_and_runner_up_carry_the_library_kernel_they_ran():
    df = frame([ok(0, "sdpa-cudnn", 10.0, family="sdpa", dispatch_kernels=[CUDNN], dispatch_main_family="cudnn",
                   dispatch_attention_family="cudnn"),
                ok(1, "compile", 11.0, 0, family="compile", dispatch_kernels=[CUDNN], dispatch_main_family="cudnn",
                   dispatch_attention_family="cudnn"),
                ok(2, "compile", 11.0, 1, family="compile", dispatch_kernels=json.dumps(INDUCTOR),
                   dispatch_main_family="triton", dispatch_attention_family=None),
                ok(3, "flex", 30.0, family="flex", dispatch_kernels=["triton_tem_fused_flex_attention_0"],
                   dispatch_main_family="triton", dispatch_attention_family=None)])
    (row,) = best_per_workload(df, []).to_dict(orient="records")
    assert row["best"] == "sdpa-cudnn" and row["best_kernel"] is None
    assert row["runner_up"] == "compile" and row["runner_up_kernel"] == "cudnn"  # one repeat was rewritten
    pb = per_backend(df).set_index("backend")
    assert pd.isna(pb.loc["flex", "kernel"]) and pb.loc["compile", "kernel"] == "cudnn"


def test_per_backend_reads_legacy_kernel_names_when_the_families_are_absent():
    # a frame without the two family columns (an old import), kernel names as JSON text (as stored)
    rows = [ok(0, "compile", 11.0, family="compile", dispatch_kernels=json.dumps([CUDNN])),
            ok(1, "flex", 30.0, family="flex", dispatch_kernels=["triton_tem_fused_flex_attention_0"])]
    pb = per_backend(frame(rows)).set_index("backend")
    assert pb.loc["compile", "kernel"] == "cudnn" and pd.isna(pb.loc["flex", "kernel"])


def test_workload_columns_are_the_device_and_every_workload_axis():
    from attnbench.workloads.axes import NAMES

    assert WORKLOAD_COLS == ["device_name", *NAMES]
    r = ok(0, "a", 10.0, layout="BNHD", dropout=0.0)
    (row,) = best_per_workload(frame([r]), []).to_dict(orient="records")
    assert {c: row[c] for c in WORKLOAD_COLS} == {c: r[c] for c in WORKLOAD_COLS}


def test_wall_by_phase_splits_the_sweep_wall_into_samples_gates_and_what_no_attempt_holds():
    """Samples, warm-up and the rest of timing from the OK rows; each gate's phases from every row;
    what the attempts' wall_s does not cover is 'outside attempts'; largest first."""
    import json

    a = ok(0, "a", 10.0, samples_us=[1000.0] * 4, calls_per_sample=5, warmup_us=3000.0, wall_s=1.0,
           phases_s=json.dumps({"timing": 0.05, "cold_call": 0.5, "hard": 0.2, "probe": 0.1}))
    b = make_row(1, status="INCORRECT", reason="x", attempt_key="bad", samples_us=None, median_us=None,
                 wall_s=0.5, phases_s=json.dumps({"cold_call": 0.3, "check": 0.1}))
    df = frame([a, b])
    o = run_overview(df, [{"run_id": "run-a", "started_at": "2026-01-01T00:00:00Z",
                           "finished_at": "2026-01-01T00:00:02Z"}])
    got = dict(o["wall_by_phase"])
    assert got["timed samples"] == pytest.approx(0.02) and got["warm-up"] == pytest.approx(0.003)
    assert got["timing, between samples"] == pytest.approx(0.05 - 0.02 - 0.003)
    assert got["first call (compiles)"] == pytest.approx(0.8) and got["first check"] == pytest.approx(0.1)
    assert got["hard-input checks"] == pytest.approx(0.2) and got["dispatch probes"] == pytest.approx(0.1)
    assert got["outside attempts"] == pytest.approx(2.0 - 1.5)
    assert got["in attempts, between phases"] == pytest.approx(1.5 - 0.85 - 0.4)
    assert sum(got.values()) == pytest.approx(2.0)  # the whole wall, once
    values = [v for _, v in o["wall_by_phase"]]
    assert values == sorted(values, reverse=True)
    assert run_overview(frame([ok(0, "a", 10.0, phases_s=None)]), [])["wall_by_phase"] == []  # no phases


def test_a_run_on_two_devices_is_judged_on_its_device_time():
    """Two devices busy for a 2 s run spent 4 device-seconds: the phases add up to that (never 180% of
    the wall), and wall ÷ timed is per device."""
    import json

    rows = [ok(i, "a", 10.0, samples_us=[1000.0] * 4, calls_per_sample=100, warmup_us=0.0, wall_s=1.5,
               phases_s=json.dumps({"timing": 0.5, "cold_call": 0.5})) for i in range(2)]
    run = {"run_id": "run-a", "started_at": "2026-01-01T00:00:00Z", "finished_at": "2026-01-01T00:00:02Z",
           "provenance": {"devices": [{"label": "cpu:0"}, {"label": "cpu:1"}]}}
    o = run_overview(frame(rows), [run])
    assert o["sweep_wall_s"] == 2.0 and o["devices"] == 2 and o["sweep_device_s"] == 4.0
    assert o["timed_s"] == pytest.approx(0.8) and o["wall_over_timed"] == pytest.approx(4.0 / 0.8)
    got = dict(o["wall_by_phase"])
    assert got["outside attempts"] == pytest.approx(4.0 - 3.0) and sum(got.values()) == pytest.approx(4.0)
    one = run_overview(frame(rows), [{**run, "provenance": {}}])  # a one-device run (or an older store)
    assert one["devices"] == 1 and one["sweep_device_s"] == 2.0 and one["wall_over_timed"] == pytest.approx(2.5)
    from attnbench.report import terminal

    line = terminal.overview_line(o)
    assert "sweep wall 2 s on 2 devices (4 device-s) for 0.8 s of timed samples (×5.0)" in line, line
    assert "on 1 devices" not in terminal.overview_line(one)


def test_a_runs_start_up_is_part_of_its_wall_and_a_phase_of_its_own():
    """The command's start-up before the run (interpreter, workers, provenance, plan) is wall the
    sweep spent: counted in wall ÷ timed, per device on several, and not as 'outside attempts'."""
    import json

    rows = [ok(i, "a", 10.0, samples_us=[1000.0] * 4, calls_per_sample=100, warmup_us=0.0, wall_s=1.5,
               phases_s=json.dumps({"timing": 0.5, "cold_call": 0.5})) for i in range(2)]
    run = {"run_id": "run-a", "started_at": "2026-01-01T00:00:00Z", "finished_at": "2026-01-01T00:00:02Z",
           "provenance": {"devices": [{"label": "cpu:0"}, {"label": "cpu:1"}], "startup_s": 0.5}}
    o = run_overview(frame(rows), [run])
    assert o["sweep_wall_s"] == 2.5 and o["sweep_device_s"] == 5.0 and o["startup_s"] == 1.0
    assert o["wall_over_timed"] == pytest.approx(5.0 / 0.8)
    got = dict(o["wall_by_phase"])
    assert got["start-up before the run"] == pytest.approx(1.0)
    assert got["outside attempts"] == pytest.approx(4.0 - 3.0) and sum(got.values()) == pytest.approx(5.0)
    older = run_overview(frame(rows), [{**run, "provenance": {"devices": run["provenance"]["devices"]}}])
    assert older["sweep_wall_s"] == 2.0 and "start-up before the run" not in dict(older["wall_by_phase"])


def test_the_overview_counts_the_late_graph_samples_of_ok_rows():
    rows = [ok(0, "a", 10.0, late_samples=3), ok(1, "b", 11.0, late_samples=0), ok(2, "c", 12.0, late_samples=1),
            ok(3, "d", 13.0, late_samples=None),  # a row from before the column
            make_row(4, status="INCORRECT", reason="x", attempt_key="bad", late_samples=7)]
    assert run_overview(frame(rows), [])["late_samples"] == {"samples": 4, "rows": 2}
    old = frame([ok(0, "a", 10.0)]).drop(columns=["late_samples"], errors="ignore")  # an export before schema 9
    assert run_overview(old, [])["late_samples"] == {"samples": 0, "rows": 0}


def test_run_overview_gives_no_wall_over_timed_when_ok_rows_lost_their_samples():
    # a store resumed from a slimmed one: the older OK rows hold no samples, so the timed share is unknown
    rows = [ok(0, "a", 10.0, 0, samples_us=[10.0] * 4, calls_per_sample=1),
            ok(1, "b", 20.0, 0, workload_key="w2", samples_us=None, calls_per_sample=1)]
    df = frame(rows)
    df["samples_us"] = df["samples_us"].astype(object).where(df["backend"] == "a", np.nan)
    runs = [{"run_id": "run-a", "started_at": "2026-01-01T00:00:00Z", "finished_at": "2026-01-01T00:01:40Z"}]
    o = run_overview(df, runs)
    assert o["timed_s"] == pytest.approx(40e-6) and o["ok_rows_without_samples"] == 1
    assert o["wall_over_timed"] is None
    assert "1 OK rows hold no samples" in overview_line(o) and "×" not in overview_line(o)


def test_the_timing_of_ok_rows_without_samples_is_a_phase_of_its_own():
    """A slimmed store's OK rows kept their timing phase but not their samples: that time is not 'between
    samples' of the rows that kept theirs (it read 35% of a resumed sweep's wall on the H200)."""
    import json

    rows = [ok(0, "a", 10.0, 0, samples_us=[1000.0] * 4, calls_per_sample=5, warmup_us=3000.0, wall_s=0.1,
               phases_s=json.dumps({"timing": 0.05})),
            ok(1, "b", 20.0, 0, workload_key="w2", samples_us=None, calls_per_sample=1, warmup_us=4000.0,
               wall_s=0.8, phases_s=json.dumps({"timing": 0.7}))]
    df = frame(rows)
    df["samples_us"] = df["samples_us"].astype(object).where(df["backend"] == "a", np.nan)
    got = dict(run_overview(df, [])["wall_by_phase"])
    assert got["timed samples"] == pytest.approx(0.02) and got["warm-up"] == pytest.approx(0.003)
    assert got["timing, between samples"] == pytest.approx(0.05 - 0.02 - 0.003)
    assert got["timing, samples not kept"] == pytest.approx(0.7)
    full = frame([rows[0]])
    assert "timing, samples not kept" not in dict(run_overview(full, [])["wall_by_phase"])
