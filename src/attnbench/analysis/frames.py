"""The frame every analysis starts from: one line per workload × backend over OK rows."""
from __future__ import annotations

import json

import pandas as pd

from ..workloads.axes import NAMES
from .kernels import library_kernel

# A workload is measured per device model: its axes plus the device are what lines are grouped by.
WORKLOAD_COLS = ["device_name", *NAMES]
PER_BACKEND_COLS = WORKLOAD_COLS + ["workload_key", "backend", "role", "median_us", "p95_us", "repeats", "flops",
                                    "bytes", "samples", "kernel", "kernel_us", "host_bound", "sm_clock_mhz",
                                    "clock_low", "stationary"]


def json_list(v) -> list:
    """A JSON-list column of a row (raw samples, kernel names): stored as JSON text, already a list
    after an import, or empty."""
    return json.loads(v) if isinstance(v, str) else list(v or [])


def _column_or_null(df: pd.DataFrame, name: str) -> pd.Series:
    # frames built by hand (tests) may predate the column; the store always has it
    return df[name] if name in df.columns else pd.Series(None, index=df.index, dtype=object)


def per_backend(df: pd.DataFrame) -> pd.DataFrame:
    """One line per (workload, backend) over OK rows: median of per-repeat medians, worst p95, repeats,
    pooled raw samples, and the library attention kernel(s) it ran when its name does not say (see
    kernels.library_kernel)."""
    ok = df[df["status"] == "OK"]
    if ok.empty:
        return pd.DataFrame(columns=PER_BACKEND_COLS)
    kernels = [library_kernel(fam, main, attention, json_list(names)) for fam, main, attention, names in
               zip(ok["family"], _column_or_null(ok, "dispatch_main_family"),
                   _column_or_null(ok, "dispatch_attention_family"), ok["dispatch_kernels"])]
    conditions = {c: _column_or_null(ok, c) for c in ("kernel_us", "host_bound", "sm_clock_mhz", "clock_low",
                                                       "stationary")}
    ok = ok.assign(samples=ok["samples_us"].map(json_list), kernel=kernels, **conditions)
    g = ok.groupby(["device_name", "workload_key", "backend"], sort=False)
    pooled = g["samples"].agg(lambda col: [x for s in col for x in s])
    agg = g.agg(median_us=("median_us", "median"), p95_us=("p95_us", "max"), repeats=("repeat", "nunique"),
                role=("role", "first"), flops=("flops", "first"), bytes=("bytes", "first"),
                **{c: (c, "first") for c in WORKLOAD_COLS if c != "device_name"})
    agg["samples"] = pooled
    agg["kernel"] = g["kernel"].agg(lambda col: "/".join(sorted({k for k in col if isinstance(k, str)})) or None)
    # conditions over the repeats: kernel time and clock as medians; flags when any repeat had them
    agg["kernel_us"] = g["kernel_us"].agg(_median_or_none)
    agg["sm_clock_mhz"] = g["sm_clock_mhz"].agg(_median_or_none)
    agg["host_bound"] = g["host_bound"].agg(lambda col: _any_true(col))
    agg["clock_low"] = g["clock_low"].agg(lambda col: _any_true(col))
    agg["stationary"] = g["stationary"].agg(lambda col: not _any_true(col == 0) if col.notna().any() else None)
    return agg.reset_index()


def _median_or_none(col: pd.Series):
    vals = pd.to_numeric(col, errors="coerce").dropna()
    return float(vals.median()) if len(vals) else None


def _any_true(col: pd.Series) -> bool:
    return bool(pd.to_numeric(col, errors="coerce").fillna(0).astype(bool).any())
