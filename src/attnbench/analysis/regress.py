"""`compare`: per device model × workload × backend, NEW's time over BASE's with a bootstrap interval.

A line is compared when it is OK in both stores (times as in analysis/stats.py). Two runs of the same
code do not give the same times: a line's time drifts between runs by more than its repeats within one
run spread (docs/method/regression.md measures it on the committed H200 reruns), so the interval of a
rerun often lies above 1 and a gate that asked only that would fail plain reruns. Each line therefore
has a *gate* (`gate`): its class and that class's between-run floor (FLOORS), or the reason it is not
gated (NOT_GATED). Its verdict:

- `regressed`: ratio ≥ threshold and the interval's lower end above the floor (the slowdown is
  separated from what a rerun moves);
- `slower`: ratio ≥ threshold without that (within the floor, not gated, or no interval at all);
- `improved` / `faster`: the same the other way (ratio ≤ 1 / threshold, upper end < 1 / floor);
- `same`: otherwise.

A line OK in BASE whose attempts in NEW all ended otherwise is `lost`; one NEW did not measure at all
is `missing` (a smaller grid is not a regression); one only NEW has OK is `new`. The interval
resamples each store's process repeats when both have ≥ 3, else their pooled raw samples
(stats.ratio_interval); with one sample per repeat and fewer repeats there is none, and the verdict
says `not separable`.
"""
from __future__ import annotations

import pandas as pd

from .frames import GROUP, evidence, json_ready, per_backend
from .stats import MIN_PAIRED, NONE, ratio_interval

KEY = [*GROUP, "backend"]
SHOWN = ["mode", "batch", "q_len", "kv_len", "q_heads", "kv_heads", "head_dim", "dtype", "causal", "launch", "l2"]

# The between-run floor of each class: a rerun of the committed H200 quick grid (3 runs, 6 ordered
# pairs) and its two-GPU run (2 ordered pairs) never put a gated line's interval lower end above it;
# docs/method/regression.md has the figures (largest lower ends 1.027, 1.051 and 1.311).
GRAPH, EAGER, COMPILED_US = "graph", "eager", "compiled <50us"
FLOORS = {GRAPH: 1.05, EAGER: 1.08, COMPILED_US: 1.35}
# Backends that generate and autotune their kernels in each run: at µs scale the kernel one run picks
# can be 31% slower than another run's, the three repeats of a run agreeing (they share its compiler
# cache). Above COMPILED_US_BELOW µs the choice moved them by under 3%.
COMPILED_FAMILIES = frozenset({"compile", "flex", "jax"})
COMPILED_US_BELOW = 50.0
# Lines the gate reports and never fails on: their between-run drift is the host's or the clock's, or
# cannot be seen (fewer than 3 process repeats: the pooled samples' interval is blind to the drift
# between processes, which is the larger one). Host-bound eager lines moved up to 2.4x between runs.
HOST_BOUND, CLOCK_LOW, HOST_UNMEASURED, FEW_REPEATS = "host-bound", "clock-low", "host unmeasured", "<3 repeats"
NOT_GATED = (HOST_BOUND, CLOCK_LOW, HOST_UNMEASURED, FEW_REPEATS)


def _verdict(ratio: float, lo, hi, threshold: float, floor: float | None) -> str:
    if ratio >= threshold:
        return "regressed" if floor is not None and lo is not None and lo > floor else "slower"
    if ratio <= 1.0 / threshold:
        return "improved" if floor is not None and hi is not None and hi < 1.0 / floor else "faster"
    return "same"


def _host_unmeasured(df: pd.DataFrame) -> set:
    """Keys of lines with a CUDA eager row whose host share was not measured (no kernel time: stores
    before schema 3): such a row may be host-bound, and nothing tells."""
    if df.empty or "timer" not in df.columns:
        return set()
    hb = df["host_bound"] if "host_bound" in df.columns else pd.Series(None, index=df.index, dtype=object)
    rows = df[(df["status"] == "OK") & (df["launch"] == "eager") & (df["timer"] == "cuda_event") & hb.isna()]
    return set(rows.groupby(KEY, sort=False).size().index)


def gate(b, n, unmeasured: bool) -> tuple[str, float | None]:
    """A compared line's class and between-run floor, or the reason it is not gated and None."""
    if b["host_bound"] or n["host_bound"]:
        return HOST_BOUND, None
    if b["clock_low"] or n["clock_low"]:
        return CLOCK_LOW, None
    if unmeasured:
        return HOST_UNMEASURED, None
    if min(int(b["repeats"]), int(n["repeats"])) < MIN_PAIRED:
        return FEW_REPEATS, None
    if b.get("family") in COMPILED_FAMILIES and min(b["median_us"], n["median_us"]) < COMPILED_US_BELOW:
        return COMPILED_US, FLOORS[COMPILED_US]
    cls = GRAPH if b.get("launch") == "graph" else EAGER
    return cls, FLOORS[cls]


def compare(base: pd.DataFrame, new: pd.DataFrame, threshold: float = 1.05) -> list[dict]:
    """One record per line of either store (see the module's docstring), worst first."""
    lb, ln = per_backend(base).set_index(KEY), per_backend(new).set_index(KEY)
    unmeasured = _host_unmeasured(base) | _host_unmeasured(new)
    out = []
    for key in lb.index.intersection(ln.index):
        b, n = lb.loc[key], ln.loc[key]
        ratio = float(n["median_us"] / b["median_us"])
        lo, hi, method = ratio_interval(evidence(b), evidence(n))
        cls, floor = gate(b, n, key in unmeasured)
        out.append({**_shown(key, b), "base_us": float(b["median_us"]), "new_us": float(n["median_us"]),
                    "ratio": ratio, "lo": lo, "hi": hi, "method": method, "gate": cls, "floor": floor,
                    "verdict": _verdict(ratio, lo, hi, threshold, floor), "separable": method != NONE,
                    "host_bound": bool(b["host_bound"] or n["host_bound"]),
                    "clock_low": bool(b["clock_low"] or n["clock_low"])})
    # every status NEW's attempts of a line ended in, one pass over NEW
    new_statuses = new.groupby(KEY, sort=False)["status"].agg(lambda s: sorted(set(s))).to_dict() if len(new) else {}
    for key in lb.index.difference(ln.index):
        b = lb.loc[key]
        lost = key in new_statuses
        statuses = new_statuses.get(key, [])
        out.append({**_shown(key, b), "base_us": float(b["median_us"]), "new_us": None, "ratio": None,
                    "lo": None, "hi": None, "method": None, "gate": None, "floor": None,
                    "verdict": "lost" if lost else "missing", "new_status": statuses, "separable": None,
                    "host_bound": bool(b["host_bound"]), "clock_low": bool(b["clock_low"])})
    for key in ln.index.difference(lb.index):
        n = ln.loc[key]
        out.append({**_shown(key, n), "base_us": None, "new_us": float(n["median_us"]), "ratio": None,
                    "lo": None, "hi": None, "method": None, "gate": None, "floor": None, "verdict": "new",
                    "separable": None, "host_bound": bool(n["host_bound"]), "clock_low": bool(n["clock_low"])})
    order = {"lost": 0, "regressed": 1, "slower": 2}
    out.sort(key=lambda r: (order.get(r["verdict"], 3), -(r["ratio"] or 0)))
    return json_ready(out)


def _shown(key: tuple, line) -> dict:
    # the key's fields are the frame's index, not the line's: the device model and backend come from it
    device, workload_key, backend = key
    return {"device_name": device, **{c: line[c] for c in SHOWN if c in line.index}, "workload_key": workload_key,
            "backend": backend}


def verdict(rows: list[dict]) -> dict:
    """How many lines got each verdict, how many slower ones could not be separated at all, and how many
    compared lines are not gated, per reason (NOT_GATED)."""
    counts = {k: 0 for k in ("regressed", "slower", "same", "faster", "improved", "lost", "missing", "new")}
    for r in rows:
        counts[r["verdict"]] += 1
    counts["compared"] = sum(counts[k] for k in ("regressed", "slower", "same", "faster", "improved"))
    counts["not_separable"] = sum(1 for r in rows if r["separable"] is False and r["verdict"] == "slower")
    counts["not_gated"] = {k: sum(1 for r in rows if r["gate"] == k) for k in NOT_GATED}
    counts["slower_not_gated"] = sum(1 for r in rows if r["verdict"] == "slower" and r["gate"] in NOT_GATED)
    return counts
