"""What the HTML report shows per workload × backend beside per_backend: peak memory, the status of a cell
with no OK row, the speedup over a baseline backend, and whether the condition flags were recorded."""
from __future__ import annotations

import pandas as pd

from .frames import GROUP


def line_memory(df: pd.DataFrame, group=GROUP) -> pd.DataFrame:
    """Per `group` × backend over OK rows: `peak_mem_bytes`, the largest over repeats (NaN when none was
    measured, as on a CPU)."""
    keys = [*group, "backend"]
    ok = df[df["status"] == "OK"]
    mem = pd.to_numeric(ok["peak_mem_bytes"], errors="coerce") if "peak_mem_bytes" in ok else pd.Series(dtype=float)
    return ok[keys].assign(peak_mem_bytes=mem).groupby(keys, sort=False, dropna=False)["peak_mem_bytes"] \
        .max().reset_index()


def cell_status(df: pd.DataFrame, group=GROUP) -> pd.DataFrame:
    """Per `group` × backend with no OK row at all: `status` (every status its attempts ended in, most
    frequent first, joined by '/'), `attempts` and the first attempt's `reason`."""
    keys = [*group, "backend"]
    has_ok = df.assign(_ok=df["status"] == "OK").groupby(keys, dropna=False)["_ok"].transform("any")
    failed = df[~has_ok]
    out = []
    for k, g in failed.groupby(keys, sort=True, dropna=False):
        counts = g["status"].value_counts()
        reason = next((r for r in g["reason"] if isinstance(r, str) and r), None)
        out.append({**dict(zip(keys, k)), "status": "/".join(counts.index), "attempts": int(len(g)),
                    "reason": reason})
    return pd.DataFrame(out, columns=[*keys, "status", "attempts", "reason"])


def speedups(lines: pd.DataFrame, baseline: str, contest_cols) -> pd.DataFrame:
    """`lines` (per_backend) with `speedup` = the baseline backend's time in the same contest over the
    line's own (above 1: faster than the baseline); NaN where the baseline has no OK line there."""
    cols = list(contest_cols)
    base = lines.loc[lines["backend"] == baseline, [*cols, "median_us"]].rename(columns={"median_us": "_base"})
    out = lines.merge(base, on=cols, how="left")
    return out.assign(speedup=out["_base"] / out["median_us"]).drop(columns="_base")


def flags_recorded(df: pd.DataFrame) -> dict[str, int]:
    """How many OK rows recorded each condition flag (host_bound, clock_low): rows written before a flag
    existed leave it NULL, and a report must not read that as 'not flagged'."""
    ok = df[df["status"] == "OK"]
    return {c: int(ok[c].notna().sum()) if c in ok.columns else 0 for c in ("host_bound", "clock_low")}
