"""The frame every analysis starts from: one line per workload × backend over OK rows."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..store.samples import FRAME_COLUMNS, SUMMARY_QUANTILES
from ..workloads.axes import NAMES
from .kernels import library_kernel
from .stats import Evidence, Pooled, json_list, row_quantiles, sample_arrays

# A workload is measured per device model: its axes plus the device are what lines are grouped by.
WORKLOAD_COLS = ["device_name", *NAMES]
GROUP = ("device_name", "workload_key")
PER_BACKEND_COLS = WORKLOAD_COLS + ["workload_key", "backend", "role", "family", "median_us", "p5_us", "p95_us",
                                    "p99_us", "repeats", "n_samples", "flops", "bytes", "samples", "units",
                                    "kernel", "kernel_us", "host_bound", "sm_clock_mhz", "clock_low", "stationary"]
# carried from a line's first row: who ran it and on what (constant within a line in practice)
_FIRST = ("role", "family", "flops", "bytes", "device_uuid", "torch_version")
_SHARES = ("sm_clock_max_mhz", "pct_peak_clock", "pct_read")
_READ = ("samples_us", *FRAME_COLUMNS, "median_us", "p95_us", "tag", "repeat", "dispatch_main_family", "dispatch_attention_family",
         "dispatch_kernels", "kernel_us", "sm_clock_mhz", "host_bound", "clock_low", "stationary", "rel_err",
         *_SHARES)  # issue 39.4: the gate's shares (analysis/ceilings.py)


def json_ready(v):
    """A value (dicts and lists walked) with numpy scalars as Python ones and NaN as None."""
    if isinstance(v, dict):
        return {k: json_ready(x) for k, x in v.items()}
    if isinstance(v, list):
        return [json_ready(x) for x in v]
    if isinstance(v, float) and v != v:
        return None
    return v.item() if hasattr(v, "item") else v


def records(frame: pd.DataFrame) -> list[dict]:
    """A frame as JSON-ready records: NaN is not JSON, so missing values are None."""
    return frame.astype(object).where(frame.notna(), None).to_dict(orient="records")


def _column_or_null(df: pd.DataFrame, name: str) -> pd.Series:
    # frames built by hand (tests) may predate the column; the store always has it
    return df[name] if name in df.columns else pd.Series(None, index=df.index, dtype=object)


def _text_or_none(col: pd.Series) -> np.ndarray:
    # NULL reads back as None or NaN
    return np.array([v if isinstance(v, str) else None for v in col], dtype=object)


def row_kernels(ok: pd.DataFrame) -> np.ndarray:
    """Per row, the library attention kernel family it ran when its backend's name does not say so
    (kernels.library_kernel); the stored families decide it, rows without them are classified."""
    family = _text_or_none(_column_or_null(ok, "family"))
    main = _text_or_none(_column_or_null(ok, "dispatch_main_family"))
    attention = _text_or_none(_column_or_null(ok, "dispatch_attention_family"))
    out = np.where((main == attention) & (family != "sdpa"), attention, None)
    legacy = np.flatnonzero(pd.isna(main) & pd.isna(attention) & (family != "sdpa"))
    names = ok["dispatch_kernels"].to_numpy() if "dispatch_kernels" in ok.columns else [None] * len(ok)
    for i in legacy:
        out[i] = library_kernel(family[i], None, None, json_list(names[i]))
    return out


def per_backend(df: pd.DataFrame, group=GROUP) -> pd.DataFrame:
    """One line per `group` × backend over OK rows (the definitions are in analysis/stats.py): median
    of per-repeat medians, p5 / p95 / p99 of the worst repeat, repeats, the repeat medians by
    process repeat (`units`), pooled raw samples, the library attention kernel(s) it ran when its name
    does not say (see kernels.library_kernel), and the conditions it ran under."""
    group = list(group)
    # only the columns read below: a frame of real rows has ~90, most of them text, each copied by a filter
    read = {*group, "backend", *WORKLOAD_COLS, "workload_key", *_FIRST, *_READ}
    ok = df.loc[df["status"] == "OK", [c for c in df.columns if c in read]].reset_index(drop=True)
    if ok.empty:
        return pd.DataFrame(columns=list(dict.fromkeys(group + PER_BACKEND_COLS)))
    keys = group + ["backend"]
    gid = ok.groupby(keys, sort=False, dropna=False).ngroup().to_numpy()
    arrays, counts, q = _row_figures(ok)
    # a repeat's median and p95 are the stored ones (record.finish derives them from its samples)
    med = pd.to_numeric(ok["median_us"], errors="coerce").fillna(pd.Series(q[:, 1])).to_numpy()
    p95 = pd.to_numeric(ok["p95_us"], errors="coerce").fillna(pd.Series(q[:, 2])).to_numpy()
    # the process repeat (stats.UNIT_COLS) each row belongs to
    tag = _column_or_null(ok, "tag").astype(object).where(lambda s: s.notna(), "").astype(str)
    rows = pd.DataFrame({"gid": gid, "med": med, "p5": q[:, 0], "p95": p95, "p99": q[:, 3], "n": counts,
                         "unit_tag": tag, "unit_repeat": ok["repeat"].to_numpy(), "kernel": row_kernels(ok)})
    for c in ("kernel_us", "sm_clock_mhz", "host_bound", "clock_low", "stationary", "rel_err", *_SHARES):
        rows[c] = pd.to_numeric(_column_or_null(ok, c), errors="coerce").to_numpy(dtype=float)
    g = rows.groupby("gid", sort=True)
    line = ok.groupby(gid, sort=True)[[c for c in dict.fromkeys(keys + WORKLOAD_COLS + ["workload_key", *_FIRST])
                                       if c in ok.columns]].first()
    unit_med = rows.groupby(["gid", "unit_tag", "unit_repeat"], sort=True)["med"].median()
    units: list[dict] = [{} for _ in range(len(line))]
    for (i, t, r), m in unit_med.items():
        units[i][f"{t}#{int(r)}"] = float(m)  # text keys: the frame stays JSON-serialisable
    line["median_us"] = g["med"].median().to_numpy()
    line["p5_us"] = g["p5"].min().to_numpy()
    line["p95_us"] = g["p95"].max().to_numpy()
    line["p99_us"] = g["p99"].max().to_numpy()
    line["repeats"] = [len(u) for u in units]
    line["n_samples"] = g["n"].sum().to_numpy()
    line["units"] = units
    line["samples"] = _pooled(arrays, gid, len(line))
    kernels = rows.dropna(subset=["kernel"]).drop_duplicates(["gid", "kernel"]).sort_values(["gid", "kernel"])
    line["kernel"] = kernels.groupby("gid")["kernel"].agg("/".join).reindex(range(len(line))).to_numpy()
    # conditions over the repeats: kernel time and clock as medians; flags when any repeat had them
    line["kernel_us"] = g["kernel_us"].median().to_numpy()
    line["sm_clock_mhz"] = g["sm_clock_mhz"].median().to_numpy()
    for c in _SHARES:  # the stored shares of the repeats' rows, as the clock: medians (NaN where no row has one)
        line[c] = g[c].median().to_numpy()
    line["host_bound"] = g["host_bound"].max().fillna(0).astype(bool).to_numpy()
    line["clock_low"] = g["clock_low"].max().fillna(0).astype(bool).to_numpy()
    stationary = g["stationary"].min()
    line["stationary"] = [None if pd.isna(v) else bool(v != 0) for v in stationary]
    line["rel_err_max"] = g["rel_err"].max().to_numpy()  # the least precise repeat's median
    return line.reset_index(drop=True)


def _row_figures(ok: pd.DataFrame) -> tuple[list, np.ndarray, np.ndarray]:
    """Per row: its samples (an array, or a store's samples.Stored), their count, and their p5 / p50 / p95 / p99.
    The store computed count and quantiles at insert (the columns FRAME_COLUMNS); a row without them (an
    older store read as it is, a frame built by hand) has them computed here from its samples."""
    n = len(ok)
    if all(c in ok.columns for c in FRAME_COLUMNS):
        known = ok[list(FRAME_COLUMNS)].to_numpy(dtype=float)
    else:
        known = np.full((n, len(FRAME_COLUMNS)), np.nan)
    counts = np.nan_to_num(known[:, 0]).astype(np.int64)
    q = known[:, 1:].copy()
    arrays = list(ok["samples_us"]) if "samples_us" in ok.columns else [None] * n
    todo = np.flatnonzero(np.isnan(known[:, 0]))
    if todo.size:
        parsed = sample_arrays([arrays[i] for i in todo])
        q[todo] = row_quantiles(parsed, SUMMARY_QUANTILES)
        counts[todo] = [a.size for a in parsed]
        for i, a in zip(todo.tolist(), parsed):
            arrays[i] = a
    return arrays, counts, q


def _pooled(arrays: list, gid: np.ndarray, n_lines: int) -> list[Pooled]:
    """Each line's raw samples, every repeat's pooled in row order (rows of one line are gathered by gid),
    held as the rows' arrays (or samples.Stored): read and copied into one only when a pooled bootstrap reads them."""
    parts: list[list] = [[] for _ in range(n_lines)]
    for i, a in zip(gid.tolist(), arrays):
        parts[i].append(a)
    return [Pooled(p) for p in parts]


def evidence(line) -> Evidence:
    """What the bootstrap of analysis/stats.py reads from one line of per_backend."""
    samples = line["samples"]
    return Evidence(float(line["median_us"]), line["units"],
                    samples if isinstance(samples, Pooled) else np.asarray(samples, dtype=float), int(line["repeats"]))
