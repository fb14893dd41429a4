"""The measured device ceilings each device model is judged against, each line's share of them (the compute
peak at its sampled SM clock, the read bandwidth), the off-roofline flag, and rows measured beside other work."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..measure.peaks import flop_per_sm_clk, tflops_at

# Off the roofline (docs/method/ceilings.md): a line below OFF_ROOF_PCT % of both its compute ceiling (the dense
# peak at its sampled clock) and its bandwidth ceiling (measured read), while another backend on the same side,
# device and workload is OFF_ROOF_FACTOR x faster. On the H200 the best kernels reach 60-75% of the clock peak
# (prefill) or about the read ceiling (large-KV decode), so 20% of both is far from either; a 3x lead is beyond
# what clocks (up to 13% between moments) or hosts (1.07-1.43x between lent H200 hosts) move.
OFF_ROOF_PCT = 20.0
OFF_ROOF_FACTOR = 3.0


def ceilings_by_device(runs: list[dict]) -> dict[str, dict]:
    """Latest measured ceilings per device model (copy GB/s, matmul TFLOP/s per dtype)."""
    out: dict[str, dict] = {}
    for r in runs:  # runs come oldest first; later runs overwrite
        c = (r.get("provenance") or {}).get("ceilings")
        if c and r.get("device_name"):
            out[r["device_name"]] = c
    return out


def _num(v) -> float | None:
    return float(v) if v is not None and pd.notna(v) else None


def shares(r: dict, c: dict) -> dict:
    """A line's (median_us, flops, bytes, dtype, sm_clock_mhz) shares of its device's ceilings `c`: the compute
    peak at its sampled clock (clock_peak_tflops, pct_clock_peak; NULL where the architecture or clock is
    unknown) beside the datasheet figure (datasheet_tflops), the measured matmul's share (pct_matmul) and the
    read ceiling's (pct_read: modelled bytes/s over read_gbps, the copy's where no read was measured)."""
    med, flops, nbytes = _num(r.get("median_us")), _num(r.get("flops")), _num(r.get("bytes"))
    rate = flops / (med * 1e-6) if flops and med else None
    peak = tflops_at(c, r.get("dtype") or "", _num(r.get("sm_clock_mhz")))
    sheet = tflops_at(c, r.get("dtype") or "", c.get("datasheet_clock_mhz"))
    matmul, read = c.get(f"matmul_tflops_{r.get('dtype')}"), c.get("read_gbps") or c.get("copy_gbps")
    return {"clock_peak_tflops": peak, "datasheet_tflops": sheet,
            "pct_clock_peak": 100 * rate / (peak * 1e12) if rate and peak else None,
            "pct_matmul": 100 * rate / (matmul * 1e12) if rate and matmul else None,
            "pct_read": 100 * nbytes / (med * 1e-6) / (read * 1e9) if nbytes and med and read else None}


def _col(frame: pd.DataFrame, name: str) -> pd.Series:
    """A numeric column as float64 (NaN where absent or unreadable)."""
    if name not in frame.columns:
        return pd.Series(np.nan, index=frame.index)
    return pd.to_numeric(frame[name], errors="coerce").astype("float64")


def shares_frame(lines: pd.DataFrame, ceilings: dict) -> pd.DataFrame:
    """`shares` of every line at once (the same float operations in the same order, NaN for None), by the
    line's (label, device_name) ceilings: pct_clock_peak, pct_matmul and pct_read, indexed as `lines`."""
    med, flops, nbytes, mhz = (_col(lines, c) for c in ("median_us", "flops", "bytes", "sm_clock_mhz"))
    rate = (flops / (med * 1e-6)).where((flops != 0) & flops.notna() & (med != 0) & med.notna())
    out = pd.DataFrame(np.nan, index=lines.index, columns=["pct_clock_peak", "pct_matmul", "pct_read"])
    keys = [lines[k] if k in lines.columns else pd.Series(None, index=lines.index, dtype=object)
            for k in ("label", "device_name", "dtype")]
    # a few (store, device, dtype) triples: each one's ceilings are constants over its rows
    for (label, device, dtype), idx in pd.DataFrame(dict(zip("ldt", keys))).groupby(
            ["l", "d", "t"], sort=False, dropna=False).groups.items():
        label, device, dtype = (None if isinstance(v, float) and v != v else v for v in (label, device, dtype))
        c = ceilings.get((label, device)) or {}
        r, m, n = rate[idx], med[idx], nbytes[idx]
        per_clk, sms = flop_per_sm_clk(c.get("cc"), dtype or ""), c.get("sms")
        if per_clk and sms:  # tflops_at: rate per SM per clock x SMs x clock, where the clock was read
            clock = mhz[idx]
            peak = (per_clk * sms * clock * 1e6 / 1e12).where(clock.notna() & (clock != 0))
            out.loc[idx, "pct_clock_peak"] = (100 * r / (peak * 1e12)).where(r.notna() & peak.notna() & (peak != 0))
        matmul, read = c.get(f"matmul_tflops_{dtype}"), c.get("read_gbps") or c.get("copy_gbps")
        if matmul:
            out.loc[idx, "pct_matmul"] = 100 * r / (matmul * 1e12)
        if read:
            ok = (n != 0) & n.notna() & (m != 0) & m.notna()
            out.loc[idx, "pct_read"] = (100 * n / (m * 1e-6) / (read * 1e9)).where(ok)
    return out


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
    compute = s["pct_clock_peak"].fillna(s["pct_matmul"])
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
