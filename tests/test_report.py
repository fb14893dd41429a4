"""show's tables (report/terminal.py) from analysis frames: kernel time beside eager time, and a lead
that is the host's or a clock's is said to be so."""
from __future__ import annotations

import pandas as pd
from rich.console import Console

from attnbench.analysis.winners import best_per_workload, caveat
from attnbench.report import terminal
from conftest import make_row


def render(parts) -> str:
    c = Console(width=400, record=True)
    for p in parts:
        c.print(p)
    return " ".join(c.export_text().split())


def frame(fast: dict, slow: dict) -> pd.DataFrame:
    a = make_row(0, backend="fast", **fast)
    b = make_row(0, backend="slow", attempt_key="k-slow", median_us=20.0,
                 samples_us=[20.0 + 0.1 * j for j in range(12)], **slow)
    return pd.DataFrame([a, b])


def test_a_host_bound_lead_is_clear_only_with_its_caveat():
    df = frame({"kernel_us": 2.0, "host_bound": True, "sm_clock_mhz": 1980.0},
               {"kernel_us": 4.0, "host_bound": False, "sm_clock_mhz": 1980.0})
    best = best_per_workload(df, [])
    (r,) = best.to_dict(orient="records")
    assert r["best"] == "fast" and r["clear"] and r["caveat"] == "host-bound" and r["kernel_us"] == 2.0
    out = render(terminal.show(best, {"attempts": 2, "status": {"OK": 2}}, None, "s.sqlite", 2))
    assert "kernel µs" in out and "│ 10.6 │ 11.1 │ 2.0 │" in out, out
    assert "yes (host-bound)" in out and "clear (host-bound), host:" in out


def test_a_lead_smaller_than_the_clock_gap_says_clock():
    df = frame({"kernel_us": 9.0, "host_bound": False, "sm_clock_mhz": 1980.0},
               {"kernel_us": 18.0, "host_bound": False, "sm_clock_mhz": 1000.0})
    (r,) = best_per_workload(df, []).to_dict(orient="records")
    assert r["clear"] and r["caveat"] == "clock"  # 1.9x ahead, but at 1.98x the clock
    fast, slow = pd.Series({"host_bound": False, "sm_clock_mhz": 1980.0}), pd.Series({"host_bound": False,
                                                                                       "sm_clock_mhz": 1900.0})
    assert caveat(fast, slow, 1.9) is None  # a 4% clock gap cannot explain a 1.9x lead


def test_cpu_rows_get_no_kernel_column_and_no_caveat():
    best = best_per_workload(frame({}, {}), [])
    (r,) = best.to_dict(orient="records")
    assert r["clear"] and r["caveat"] is None
    out = render(terminal.show(best, {"attempts": 2, "status": {"OK": 2}}, None, "s.sqlite", 2))
    assert "kernel µs" not in out and "│ yes │" in out.replace("yes │", "yes │") and "(host-bound)" not in out


def test_the_status_view_says_how_many_graph_samples_were_dropped_late():
    import pandas as pd

    best = best_per_workload(frame({}, {}), [])
    counts = pd.DataFrame({"OK": [2]}, index=pd.Index(["fast"], name="backend"))
    overview = {"attempts": 2, "status": {"OK": 2}, "late_samples": {"samples": 5, "rows": 3}}
    out = " ".join(render(terminal.show(best, overview, counts, "s.sqlite", 2)).split())
    assert "5 graph samples in 3 OK rows were dropped, not timed" in out, out
    overview["late_samples"] = {"samples": 0, "rows": 0}
    out = render(terminal.show(best, overview, counts, "s.sqlite", 2))
    assert "dropped, not timed" not in out
    out = render(terminal.show(best, overview | {"late_samples": {"samples": 5, "rows": 3}}, None, "s.sqlite", 2))
    assert "dropped, not timed" not in out  # only with --status
