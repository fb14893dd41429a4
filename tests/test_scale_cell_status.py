"""Issue 43.3: cell_status counts every blank cell's statuses at once; the frame is the per-cell walk's."""
from __future__ import annotations

import numpy as np
import pandas as pd

from attnbench.analysis.slices import cell_status

KEYS = ["label", "device_name", "workload_key", "backend"]


def _per_cell(df: pd.DataFrame, group) -> pd.DataFrame:
    """The walk cell_status was: value_counts per blank cell, the first non-empty string reason."""
    keys = [*group, "backend"]
    has_ok = df.assign(_ok=df["status"] == "OK").groupby(keys, dropna=False)["_ok"].transform("any")
    out = []
    for k, g in df[~has_ok].groupby(keys, sort=True, dropna=False):
        reason = next((r for r in g["reason"] if isinstance(r, str) and r), None)
        out.append({**dict(zip(keys, k)), "status": "/".join(g["status"].value_counts().index),
                    "attempts": int(len(g)), "reason": reason})
    return pd.DataFrame(out, columns=[*keys, "status", "attempts", "reason"])


def _frame(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    statuses = np.array(["OK", "ERROR", "TIMEOUT", "OOM", "UNSUPPORTED", "WRONG"])
    reasons = np.array(["", "out of memory", "no kernel", None, "timed out"], dtype=object)
    return pd.DataFrame({
        "label": rng.choice(["a", "b"], n), "device_name": rng.choice(["H200", "CPU", None], n),
        "workload_key": rng.choice([f"w{i}" for i in range(15)], n), "backend": rng.choice(["x", "y", "z"], n),
        "status": rng.choice(statuses, n, p=[0.2, 0.3, 0.2, 0.1, 0.1, 0.1]),
        "reason": rng.choice(reasons, n)})


def test_the_blank_cells_are_the_per_cell_walks():
    """Ties between statuses (first seen first), a missing device, empty and missing reasons, cells with an
    OK row left out: the same frame as the walk, on several draws."""
    group = ("label", "device_name", "workload_key")
    for seed in range(4):
        df = _frame(600, seed)
        got = cell_status(df, group)
        assert len(got) > 20 and got["status"].str.contains("/").any()
        pd.testing.assert_frame_equal(got, _per_cell(df, group))


def test_ties_keep_the_order_statuses_first_occur():
    df = pd.DataFrame({"label": "a", "device_name": "H200", "workload_key": "w", "backend": "x",
                       "status": ["TIMEOUT", "ERROR", "ERROR", "TIMEOUT", "OOM"],
                       "reason": [None, "", "first said", "later", None]})
    got = cell_status(df, ("label", "device_name", "workload_key")).iloc[0]
    assert (got["status"], got["attempts"], got["reason"]) == ("TIMEOUT/ERROR/OOM", 5, "first said")


def test_no_blank_cell():
    df = _frame(50, 0).assign(status="OK")
    got = cell_status(df, ("label", "device_name", "workload_key"))
    assert got.empty and list(got.columns) == [*KEYS, "status", "attempts", "reason"]
