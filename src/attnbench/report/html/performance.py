"""The prefill-and-training and decode pages: per slice, time and throughput against length, speedup
heatmaps or the fastest backend per cell, and a table of every backend's time with blank failed cells."""
from __future__ import annotations

import pandas as pd

from ..terminal import ran
from .context import Context
from .data import fastest_frame, in_slice, slice_text, slices, speedup_frame
from .figures import fastest_map, length_text, perf_lines, speedup_heatmaps
from .markup import Blank, Col, blank_legend, e, note, table, us

PERF_COLS = ["backend", "role", "batch", "q_len", "kv_len", "median_us", "p95_us", "repeats", "metric", "value",
             "pct_ceiling", "peak_mem_mib", "host_bound", "clock_low"]
MARKS = ("Hollow markers: host-bound eager rows (median above 1.5× the kernels' device time); ×: the SM clock "
         "fell more than 5% under its maximum while timing.")


def _heading(key: dict) -> str:
    mask = f"causal {key['causal_align'].replace('_', '-')}" if key["causal"] else "no mask"
    return (f"{key['mode']}, {mask}, {key['dtype']}, Hq/Hkv {key['q_heads']}/{key['kv_heads']}, D {key['head_dim']}, "
            f"{key['launch']} (store {key['label']}, {key['device_name']})")


def _flags_note(ctx: Context, label: str) -> str:
    rec = ctx.data.flags.get(label, {})
    missing = [f for f in ("host_bound", "clock_low") if not rec.get(f)]
    if not missing:
        return MARKS
    return (MARKS + f" This store did not record {' and '.join(missing)} (rows written before those columns "
            "existed): no point is marked for it, which does not mean none would be.")


def _perf_figure(ctx: Context, key: dict, lines: pd.DataFrame, decode: bool) -> str:
    per_batch = lines.groupby("batch")["kv_len"].nunique()
    if per_batch.max() < 2:
        return note("Each batch of this slice has a single length: no line to draw; its numbers are in the "
                    "table below.")
    c = ctx.data.ceilings.get((key["label"], key["device_name"])) or {}
    read = c.get("read_gbps")  # read-only bandwidth (decode only reads); the copy's where a store has none
    ceiling = (read or c.get("copy_gbps")) if decode else c.get(f"matmul_tflops_{key['dtype']}")
    metric = "GB/s" if decode else "TFLOP/s"
    name = (f"measured {'read' if read else 'copy'} bandwidth" if decode else f"measured {key['dtype']} matmul")
    panels = ["time", "throughput"] + ([] if decode or lines["peak_mem_mib"].isna().all() else ["memory"])
    x_label = "KV-cache length Nkv" if decode else ("sequence length N (Nq = Nkv)" if key["square"] else "Nkv")
    what = "Decode step time and effective KV bandwidth" if decode else \
        f"Time, throughput{' and peak memory' if 'memory' in panels else ''}"
    title = f"{what} against {'KV' if decode else 'sequence'} length: {_heading(key)}"
    data = lines[[c for c in PERF_COLS if c in lines.columns]].sort_values(["batch", "backend", "kv_len"])
    fig = perf_lines(data, panels, metric, ceiling, name, x_label, title, ctx.data.colors)
    model = ("bytes = 2·B·Hkv·N·D·s for the cache plus Q and O, over the median time (a model, not a profiler "
             "reading); the ceiling is the measured read-only bandwidth (the fastest of three reductions), which a "
             "kernel streaming better can exceed, up to the DRAM's theoretical bandwidth"
             if decode else
             "FLOP model 2·B·Hq·P·(D + Dv) over the median time, P the unmasked pairs; fwd+bwd 3.5× the forward")
    lo, hi = int(lines["repeats"].min()), int(lines["repeats"].max())
    reps = str(lo) if lo == hi else f"{lo}–{hi}"
    caption = (f"Median of per-repeat medians ({reps} process repeats, OK rows only). {metric}: {model}. "
               + (f"Dotted line: the {name} rate ({ceiling:,.0f} {metric}), right axis: % of it. " if ceiling
                  else "No measured ceiling for this device (no runs export). ")
               + "Dashed lines: accuracy references, measured but not contestants. " + _flags_note(ctx, key["label"])
               + " A missing point is a cell with no OK row: the table below says why.")
    return ctx.figs.add(fig, data, f"{key['label']}-{key['mode']}-{'graph' if key['launch'] == 'graph' else ''}-lines",
                        title, slice_text(key), caption)


def _speedup_figure(ctx: Context, key: dict, wl: pd.DataFrame, lines: pd.DataFrame) -> str:
    base = ctx.data.baseline
    if base not in set(lines["backend"]):
        return note(f"The baseline {base} has no OK line in this slice: no speedup heatmap (choose another with "
                    "--baseline).")
    frame = speedup_frame(ctx.data, key, wl)
    if frame["backend"].nunique() < 2:
        return note(f"Only {base} ran in this slice: nothing to compare with it.")
    title = f"Speedup over {base} per batch × length: {_heading(key)}"
    caption = (f"Each cell: {base}'s median time over the backend's (above 1: faster than {base}; colour on a "
               "log scale, clipped at 0.25× and 4×). A blank cell has no OK row of that backend (or of the "
               "baseline); a grey one is outside the grid the store ran.")
    x_label = "sequence length N (Nq = Nkv)" if key["square"] else "Nkv"
    return ctx.figs.add(speedup_heatmaps(frame, base, title, x_label), frame, f"{key['label']}-{key['mode']}-speedup", title,
                        slice_text(key), caption)


def _fastest_figure(ctx: Context, key: dict, wl: pd.DataFrame) -> str:
    frame = fastest_frame(ctx.data, key, wl)
    title = f"Fastest backend per batch × KV length: {_heading(key)}"
    caption = ("The contestant with the lowest median of per-repeat medians (accuracy references excluded), its "
               "time in the cell. Hatched: its lead over the runner-up is not separated (under 1.10×, or the 95% "
               "bootstrap lower bound of the ratio is not above 1), so the colour is not a verdict; dotted: "
               "separated on numbers too noisy to call it clear.")
    fig = fastest_map(frame, title, ctx.data.colors, "KV-cache length Nkv")
    return ctx.figs.add(fig, frame, f"{key['label']}-decode-{key['launch']}-fastest", title, slice_text(key), caption)


def _lines_table(ctx: Context, key: dict, wl: pd.DataFrame, lines: pd.DataFrame) -> str:
    """Every backend's median per workload of the slice; cells without an OK row blank, with their status."""
    d = ctx.data
    backends = sorted(set(d.df.loc[(d.df["label"] == key["label"]) & d.df["workload_key"].isin(wl["workload_key"]),
                                   "backend"].astype(str)))
    blanks = d.blanks[(d.blanks["label"] == key["label"]) & d.blanks["workload_key"].isin(wl["workload_key"])]
    blank = {(r.workload_key, r.backend): Blank(r.status, f"{r.status}: {r.reason or ''}")
             for r in blanks.itertuples(index=False)}
    # the five columns read, not every column of the lines (a tuple of each row's every value per pass)
    cells = list(lines[["workload_key", "backend", "median_us", "value", "pct_ceiling"]].itertuples(index=False))
    med = {(r.workload_key, r.backend): r.median_us for r in cells}
    won = {r.workload_key: r for r in in_slice(d.won, key).itertuples(index=False)}
    thr = {(r.workload_key, r.backend): (r.value, r.pct_ceiling) for r in cells}
    rows, seen = [], set()
    for w in wl.sort_values(["batch", "kv_len"]).itertuples(index=False):
        row = {"batch": w.batch, "kv_len": w.kv_len}
        for b in backends:
            row[b] = med.get((w.workload_key, b), blank.get((w.workload_key, b), Blank("NOT MEASURED")))
            if isinstance(row[b], Blank):
                seen.update(row[b].status.split("/"))
        r = won.get(w.workload_key)
        if r is not None:
            value, share = thr.get((w.workload_key, r.backend), (None, None))
            row.update(best=ran(r.backend, r.kernel), ratio=r.ratio, separated="yes" if r.separated else "no",
                       value=value, pct=share)
        rows.append(row)
    metric = "GB/s" if key["mode"] == "decode" else "TFLOP/s"
    length = "Nkv" if key["mode"] == "decode" or not key["square"] else "N"
    cols = [Col("batch", "B", numeric=True), Col("kv_len", length, numeric=True),
            *[Col(b, f"{b} µs", us, numeric=True, title=f"median µs of {b}") for b in backends],
            Col("best", "fastest"), Col("ratio", "runner-up ×", lambda v: f"{v:.2f}", numeric=True),
            Col("separated", "separated"), Col("value", f"fastest {metric}", lambda v: f"{v:,.0f}", numeric=True),
            Col("pct", "% ceiling", lambda v: f"{v:.0f}%", numeric=True)]
    caption = (f"Every backend's median of per-repeat medians (µs) per workload; {slice_text(key)}. The fastest "
               "is among contestants; runner-up × is the runner-up's time over the fastest's.")
    return table(ctx.table_id(), cols, rows, caption, blank_legend(sorted(seen)))


def _section(ctx: Context, key: dict, wl: pd.DataFrame, decode: bool) -> str:
    lines = in_slice(ctx.data.lines, key)
    out = [f"<section>\n<h2>{e(_heading(key))}</h2>\n",
           note(f"{len(wl)} workloads: B ∈ {{{', '.join(map(str, sorted(wl['batch'].unique())))}}}, "
                f"lengths {', '.join(length_text(n) for n in sorted(wl['kv_len'].unique()))}.")]
    if lines.empty:
        out.append(note("No backend ran OK in this slice; the table gives each attempt's status."))
    else:
        out.append(_perf_figure(ctx, key, lines, decode))
        out.append(_fastest_figure(ctx, key, wl) if decode else _speedup_figure(ctx, key, wl, lines))
    out.append(_lines_table(ctx, key, wl, lines))
    return "".join(out) + "</section>\n"


def page_body(ctx: Context, decode: bool) -> str:
    """The body of the decode page, or of the prefill-and-training page."""
    modes = ("decode",) if decode else ("prefill", "train_fwd", "train_fwd_bwd")
    found = slices(ctx.data, modes)
    intro = ("Single-token decode against a KV cache: step time and the effective bandwidth of the modelled KV "
             "traffic, with the device's measured read bandwidth as the ceiling; the fastest backend per batch × "
             "KV length." if decode else
             f"Prefill (forward without grad) and training (forward, forward+backward): latency, TFLOP/s against "
             f"the measured matmul ceiling and peak memory against sequence length, and speedups over "
             f"{ctx.data.baseline} (--baseline).")
    if not found:
        return note(intro) + note(f"No {' or '.join(modes)} workload in these stores.")
    return note(intro) + "".join(_section(ctx, key, wl, decode) for key, wl in found)

