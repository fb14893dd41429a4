"""What the HTML report shows per workload × backend beside per_backend: peak memory, the status of a cell
with no OK row, the speedup over a baseline backend, and whether the condition flags were recorded."""
from __future__ import annotations

import numpy as np
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
    frequent first, ties in the order they first occur, joined by '/'), `attempts` and the first attempt's
    `reason` (its first non-empty one). Counted per (cell, status) at once, not per cell (a study's ~1,000
    blank cells took ~5 s through value_counts each)."""
    keys = [*group, "backend"]
    has_ok = df.assign(_ok=df["status"] == "OK").groupby(keys, dropna=False)["_ok"].transform("any")
    failed = df.loc[~has_ok.to_numpy(), [*keys, "status", "reason"]]
    cell = failed.groupby(keys, sort=True, dropna=False).ngroup().to_numpy()
    order = np.argsort(cell, kind="stable")  # cells in key order, attempts in store order within each
    f = failed.iloc[order].assign(_cell=cell[order], _pos=np.arange(len(order)))
    first = f.drop_duplicates("_cell")
    out = first[keys].reset_index(drop=True)
    out["attempts"] = f.groupby("_cell").size().to_numpy()
    named = f[f["status"].notna()]
    counts = named.groupby(["_cell", "status"], sort=False).agg(n=("_pos", "size"), at=("_pos", "min")).reset_index()
    counts = counts.sort_values(["_cell", "n", "at"], ascending=[True, False, True], kind="stable")
    joined = counts.groupby("_cell", sort=True)["status"].agg("/".join)
    out.insert(len(keys), "status", joined.reindex(range(len(out)), fill_value="").to_numpy())
    said = f["reason"].map(lambda r: isinstance(r, str) and bool(r), na_action="ignore").fillna(False).astype(bool)
    reason = f[said.to_numpy()].drop_duplicates("_cell").set_index("_cell")["reason"]
    out["reason"] = reason.reindex(range(len(out))).astype(object).where(lambda r: r.notna(), None).to_numpy()
    return out


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
