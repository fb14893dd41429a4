"""Rows whose OK no dispatch check stands behind (issue 42.2): the backend declares no kernel families on the
device, or its probe could not run. Tables mark their backend's name with MARK, and say so once in NOTE."""
from __future__ import annotations

import pandas as pd

MARK = "?"
NOTE = ("name?: dispatch unchecked: the backend declares no kernel families on this device (or its probe could "
        "not run), so nothing checked which kernels its OK rows ran (dispatch_checked = 0)")


def unchecked(df: pd.DataFrame) -> pd.Series:
    """Per row: OK and dispatch_checked stored as 0 (rows of stores before the column hold NULL: not marked)."""
    if "dispatch_checked" not in df.columns or df.empty:
        return pd.Series(False, index=df.index)
    flag = pd.to_numeric(df["dispatch_checked"], errors="coerce")
    return (df["status"] == "OK") & (flag == 0)


def unchecked_pairs(df: pd.DataFrame) -> set[tuple[str, str]]:
    """(device_name, backend) of every unchecked OK row."""
    rows = df[unchecked(df)]
    return set(zip(rows["device_name"].astype(str), rows["backend"].astype(str)))


def mark(frame: pd.DataFrame, pairs: set[tuple[str, str]], columns=("best", "runner_up", "backend")) -> pd.DataFrame:
    """A copy of a table's frame with MARK after each backend name of `columns` that `pairs` holds for its device."""
    if not pairs or frame.empty:
        return frame
    out = frame.copy()
    devices = out["device_name"].astype(str) if "device_name" in out.columns else pd.Series("", index=out.index)
    for c in columns:
        if c in out.columns:
            out[c] = [f"{n}{MARK}" if isinstance(n, str) and (d, n) in pairs else n for d, n in zip(devices, out[c])]
    return out
