"""The measured device ceilings each device model is judged against, each line's share of them (the gate's stored
pct_peak_clock and pct_read), the off-roofline flag, and rows measured beside other work."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..measure.peaks import flop_per_sm_clk, off_chip, pct_peak, pct_read, peak_tflops

# Off the roofline (docs/method/ceilings.md): a line below OFF_ROOF_PCT % of both its compute ceiling (the dense
# peak at its sampled clock) and its bandwidth ceiling (measured read), while another backend on the same side,
# device and workload is OFF_ROOF_FACTOR x faster. On the H200 the best kernels reach 60-75% of the clock peak
# (prefill) or about the read ceiling (large-KV decode), so 20% of both is far from either; a 3x lead is beyond
# what clocks (up to 13% between moments) or hosts (1.07-1.43x between lent H200 hosts) move.
OFF_ROOF_PCT = 20.0
OFF_ROOF_FACTOR = 3.0


def ceilings_by_device(runs: list[dict]) -> dict[str, dict]:
    """Latest measured ceilings per device model (copy GB/s, matmul TFLOP/s per dtype), with the device's L2 size
    (l2_bytes, from the run's device provenance, where known: the gate's off-chip rule, measure/peaks.off_chip)."""
    out: dict[str, dict] = {}
    for r in runs:  # runs come oldest first; later runs overwrite
        prov = r.get("provenance") or {}
        c = prov.get("ceilings")
        if c and r.get("device_name"):
            l2 = (prov.get("device") or {}).get("l2_bytes")
            out[r["device_name"]] = {**c, "l2_bytes": l2} if l2 and "l2_bytes" not in c else c
    return out


def _col(frame: pd.DataFrame, name: str) -> pd.Series:
    """A numeric column as float64 (NaN where absent or unreadable)."""
    if name not in frame.columns:
        return pd.Series(np.nan, index=frame.index)
    return pd.to_numeric(frame[name], errors="coerce").astype("float64")


def _shares(lines: pd.DataFrame, c: dict, dtype) -> pd.DataFrame:
    """The shares of `lines` (one device's ceilings `c`, one dtype): a line's pct_peak_clock and pct_read are the
    ones the gate stored (runner/gates.py; the median of its repeats' rows, analysis/frames.per_backend). A line
    whose rows predate those columns (no sm_clock_max_mhz and no stored share) has them computed by the gate's
    functions (measure/peaks.py) at its median SM clock and against read_gbps (copy_gbps where none was
    measured), its read share only where its bytes are off chip as the gate decides it. pct_matmul: of the
    measured matmul."""
    med, flops, nbytes = _col(lines, "median_us"), _col(lines, "flops"), _col(lines, "bytes")
    stored_peak, stored_read = _col(lines, "pct_peak_clock"), _col(lines, "pct_read")
    judged = _col(lines, "sm_clock_max_mhz").notna() | stored_peak.notna() | stored_read.notna()
    rate = (flops / (med * 1e-6)).where((flops != 0) & flops.notna() & (med != 0) & med.notna())
    out = pd.DataFrame(np.nan, index=lines.index, columns=list(SHARES))
    per_clk, sms = flop_per_sm_clk(c.get("cc"), dtype or ""), c.get("sms")
    if per_clk and sms:
        clock = _col(lines, "sm_clock_mhz")
        out["peak_tflops_clock"] = peak_tflops(per_clk, sms, clock.where(clock != 0))
        out["pct_peak_clock"] = pct_peak(rate, out["peak_tflops_clock"]).where(rate.notna())
        clock = _col(lines, "sm_clock_max_mhz")  # the gate's clock, where the rows recorded it
        out["peak_tflops_clock"] = peak_tflops(per_clk, sms, clock.where(clock != 0)).fillna(out["peak_tflops_clock"])
        sheet = c.get("datasheet_clock_mhz")
        out["datasheet_tflops"] = peak_tflops(per_clk, sms, sheet) if sheet else np.nan
    matmul, read = c.get(f"matmul_tflops_{dtype}"), c.get("read_gbps") or c.get("copy_gbps")
    if matmul:
        out["pct_matmul"] = pct_peak(rate, matmul)
    if read:
        ok = (nbytes != 0) & nbytes.notna() & (med != 0) & med.notna()
        far = pd.Series(off_chip(_text(lines, "l2"), nbytes, c.get("l2_bytes")), index=lines.index, dtype=bool)
        out["pct_read"] = pct_read(nbytes, med, read).where(ok & far)
    out["pct_peak_clock"] = stored_peak.where(judged, out["pct_peak_clock"])
    out["pct_read"] = stored_read.where(judged, out["pct_read"])
    return out


def _text(frame: pd.DataFrame, name: str) -> pd.Series:
    return frame[name] if name in frame.columns else pd.Series(None, index=frame.index, dtype=object)


SHARES = ("peak_tflops_clock", "datasheet_tflops", "pct_peak_clock", "pct_matmul", "pct_read")


def shares_frame(lines: pd.DataFrame, ceilings: dict) -> pd.DataFrame:
    """The shares (_shares: SHARES) of every line at once, by the line's (label, device_name) ceilings, indexed as
    `lines` (NaN where unknown)."""
    out = pd.DataFrame(np.nan, index=lines.index, columns=list(SHARES))
    keys = [_text(lines, k) for k in ("label", "device_name", "dtype")]
    # a few (store, device, dtype) triples: each one's ceilings are constants over its rows
    for (label, device, dtype), idx in pd.DataFrame(dict(zip("ldt", keys))).groupby(
            ["l", "d", "t"], sort=False, dropna=False).groups.items():
        label, device, dtype = (None if isinstance(v, float) and v != v else v for v in (label, device, dtype))
        out.loc[idx] = _shares(lines.loc[idx], ceilings.get((label, device)) or {}, dtype).to_numpy()
    return out


def shares(r: dict, c: dict) -> dict:
    """One line's shares of its device's ceilings `c` (as shares_frame; None where unknown)."""
    s = _shares(pd.DataFrame([r]), c, r.get("dtype")).iloc[0]
    return {k: (float(v) if pd.notna(v) else None) for k, v in s.items()}


def off_roofline(lines: pd.DataFrame, ceilings: dict) -> list[dict]:
    """Lines far below both ceilings (compute: the clock peak, else the measured matmul; bandwidth: read) while
    another backend on the same side, device and workload runs OFF_ROOF_FACTOR x faster: each named with the
    fastest alternative, the lead and both shares. `ceilings[(label, device_name)]` as Basis holds them.
    Vectorised (a study's 12k lines in ~0.1 s): per group its first fastest line, then the leads and shares."""
    if lines is None or lines.empty:
        return []
    if "role" in lines.columns:  # an accuracy reference is measured, not a contestant (nor an alternative)
        lines = lines[lines["role"] != "accuracy_reference"]
    lines = lines[pd.to_numeric(lines["median_us"], errors="coerce") > 0].reset_index(drop=True)
    if lines.empty:
        return []
    keys = [k for k in ("side", "device_name", "workload_key") if k in lines.columns]
    group = lines.groupby(keys, sort=True, dropna=False).ngroup().to_numpy() if keys else np.zeros(len(lines), int)
    med = lines["median_us"].to_numpy(dtype="float64")
    size = np.bincount(group)
    low = np.full(len(size), np.inf)
    np.minimum.at(low, group, med)
    first = np.full(len(size), len(lines))  # each group's first line at its minimum (as idxmin picks it)
    np.minimum.at(first, group, np.where(med == low[group], np.arange(len(lines)), len(lines)))
    fastest = first[group]
    lead = med / med[fastest]
    backend = lines["backend"].to_numpy(dtype=object)
    cand = (size[group] >= 2) & (backend != backend[fastest]) & (lead >= OFF_ROOF_FACTOR)
    if not cand.any():
        return []
    rows = lines[cand]
    s = shares_frame(rows, ceilings)
    compute = s["pct_peak_clock"].fillna(s["pct_matmul"])
    known = pd.concat([compute, s["pct_read"]], axis=1)
    off = (known.notna().any(axis=1) & ~(known >= OFF_ROOF_PCT).any(axis=1)).to_numpy()
    pick = np.flatnonzero(cand)[off]  # in group order, then row order within the group, as the groups were walked
    pick = pick[np.argsort(group[pick], kind="stable")]
    pick = pick[np.argsort(-lead[pick], kind="stable")]
    shown = lines.iloc[pick]
    out = pd.DataFrame({k: shown[k] if k in shown.columns else None
                        for k in ("side", "device_name", "mode", "workload_key", "batch", "q_len", "kv_len", "dtype",
                                  "launch", "backend", "median_us")})
    fast = lines.iloc[fastest[pick]]
    for k, v in (("pct_compute", compute), ("pct_read", s["pct_read"])):
        v = v.reindex(shown.index)
        out[k] = v.astype(object).where(v.notna(), None)  # an unknown share is None, as shares() gives it
    out["faster"] = fast["backend"].to_numpy()
    out["faster_median_us"] = med[fastest[pick]]
    out["lead"] = lead[pick]
    return out.to_dict(orient="records")


def row_flags(ok: pd.DataFrame) -> dict:
    """For `show`: OK rows measured while another process was on their GPU (gpu_shared) with those PIDs, and
    OK rows above 100% of a ceiling (pct_peak_clock, pct_read), named rather than silent."""
    def col(name):
        return pd.to_numeric(ok[name], errors="coerce") if name in ok.columns else pd.Series(float("nan"),
                                                                                               index=ok.index)

    shared = ok[col("gpu_shared").fillna(0) > 0] if len(ok) else ok
    pids: set[str] = set()
    for c in ("gpu_others_before", "gpu_others_after"):
        for v in (shared[c].dropna() if c in shared.columns else ()):
            pids.update(p for p in str(v).split(",") if p)
    over_read = int((col("pct_read") > 100).sum())
    pids_sorted = sorted(pids, key=lambda p: int(p) if p.isdigit() else 0)
    return {"gpu_shared": {"rows": int(len(shared)), "pids": pids_sorted},
            "over_ceiling": {"clock_peak": int((col("pct_peak_clock") > 100).sum()), "read": over_read,
                             "max_pct_read": float(col("pct_read").max()) if over_read else None}}


def flag_lines(overview: dict) -> list[str]:
    """`show`'s lines for row_flags (none when nothing is flagged)."""
    out = []
    s = overview.get("gpu_shared") or {}
    if s.get("rows"):
        out.append(f"{s['rows']} OK rows were measured while another process was on their GPU (gpu_shared; PIDs "
                   f"{', '.join(s['pids']) or '?'}): their times may include its work; run --exclusive refuses such a GPU")
    o = overview.get("over_ceiling") or {}
    if o.get("read"):
        out.append(f"{o['read']} OK rows read faster than the measured read ceiling (pct_read up to "
                   f"{o['max_pct_read']:.0f}%): a kernel streaming better than the reductions measured, below the "
                   "DRAM's theoretical bandwidth (docs/method/ceilings.md)")
    if o.get("clock_peak"):
        out.append(f"{o['clock_peak']} OK rows above 100% of the dense peak at their sampled clock (pct_peak_clock; "
                   "within the 5% the gate allows for the clock between readings)")
    return out
