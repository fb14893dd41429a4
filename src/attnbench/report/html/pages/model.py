"""The whole-workload page: the rows of `attnbench model` (store/model_rows.py) per store, model and step,
and one figure per store and model of the Amdahl prediction against the measured end-to-end speedup. Every
number is a stored column (model/amdahl.py computed them when the row was written); nothing is derived here
but units."""
from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from ....model.amdahl import AGREE
from ...model_table import BELOW_NOISE, share_below_noise
from ..context import Context
from ..figures import backend_colors
from ..figures import title as set_title
from ..markup import REASON_CHARS, Col, e, note, pct, table

FILE, TITLE = "model.html", "Whole workload"
STEP_ORDER = {"train": 0, "prefill": 1, "decode": 2}
# the step's own latency or throughput column: (header, value of a row, format, tooltip)
PER_STEP = {
    "train": ("tokens/s", lambda r: r["tokens_per_s"], lambda v: f"{v:,.0f}",
              "tokens (B·N) over the median step time"),
    "prefill": ("TTFT (ms)", lambda r: r["median_us"] / 1e3, lambda v: f"{v:.3g}",
                "time to first token: the prefill step's median (no LM head, no sampling)"),
    "decode": ("time per output token (ms)", lambda r: r["median_us"] / 1e3, lambda v: f"{v:.3g}",
               "one token per sequence per step: the decode step's median at this cache length"),
}
MARKERS = {"train": "s", "prefill": "o", "decode": "^"}
FIG_COLS = ["label", "device_name", "config", "layers", "dtype", "step", "batch", "seqlen", "launch", "backend",
            "baseline", "f_used", "f_source", "kernel_speedup", "predicted_speedup", "measured_speedup", "gap"]


def _shape(r: dict) -> str:
    n = f"Nkv {r['seqlen']}" if r["step"] == "decode" else f"N {r['seqlen']}"
    return f"B {r['batch']}, {n}" + (", graph" if r["launch"] == "graph" else "")


def _evidence(r: dict) -> str | None:
    """The stored `explain` of a row: its one-line why, then its numbers as stored."""
    ex = r.get("explain")
    if not isinstance(ex, dict):
        return None
    nums = "; ".join(f"{k.replace('_', ' ')} {v:.3g}" for k, v in ex.items() if k != "why" and isinstance(v, float))
    return " — ".join(x for x in (ex.get("why"), nums) if x)


def _row(r: dict) -> dict:
    ok = r["status"] == "OK"
    out = {"backend": r["backend"], "shape": _shape(r), "status": r["status"],
           "reason": None if ok else r["reason"], "evidence": _evidence(r)}
    if ok:
        out.update(step_ms=r["median_us"] / 1e3, per_step=PER_STEP.get(r["step"], PER_STEP["train"])[1](r),
                   **{k: r[k] for k in ("share_profiler", "share_diff", "kernel_speedup", "f_used",
                                        "predicted_speedup", "measured_speedup", "gap")},
                   f_source=r["f_source"], baseline=r["baseline"])
        if share_below_noise(r):  # as the terminal says it, not a negative percent
            out["share_diff"] = BELOW_NOISE
    return out


def _table(ctx: Context, key: dict, g: pd.DataFrame) -> str:
    header, _, fmt, tip = PER_STEP.get(key["step"], PER_STEP["train"])
    x = lambda v: f"{v:.3g}×"  # noqa: E731
    cols = [Col("backend", "backend"), Col("shape", "shape"), Col("status", "status"),
            Col("step_ms", "time per step (ms)", lambda v: f"{v:.3g}", numeric=True, title="median step time"),
            Col("per_step", header, fmt, numeric=True, title=tip),
            Col("share_profiler", "f (profiler)", lambda v: pct(v, 1), numeric=True,
                title="attention's share of this row's step by the profiler (kernel time of its declared families)"),
            Col("share_diff", "f (difference)", lambda v: v if isinstance(v, str) else pct(v, 1), numeric=True,
                title="(T_step − T_noop) / T_step, stored unclamped; " + BELOW_NOISE + ": within the noise of the "
                      "step's samples (report/model_table.py)"),
            Col("kernel_speedup", "s (kernel)", x, numeric=True,
                title="isolated kernel-level speedup over the baseline (attnbench run rows of this attention shape)"),
            Col("f_used", "f used", lambda v: pct(v, 1), numeric=True,
                title="the baseline's share the prediction uses, clamped to [0, 1] (f source column)"),
            Col("f_source", "f source"),
            Col("predicted_speedup", "predicted 1/((1−f)+f/s)", x, numeric=True),
            Col("measured_speedup", "measured speedup", x, numeric=True,
                title="the baseline's median step time over this row's"),
            Col("gap", "gap", lambda v: f"{100 * v:+.1f}%", numeric=True, title="measured / predicted − 1"),
            Col("evidence", "evidence on the gap", wrap=True, cut=REASON_CHARS),
            Col("reason", "reason (not OK)", wrap=True, cut=REASON_CHARS)]
    rows = [_row(r) for r in g.sort_values(["batch", "seqlen", "launch", "backend"]).to_dict(orient="records")]
    base = sorted(set(g["baseline"].dropna().astype(str)))
    caption = (f"{key['step']} steps of {key['config']} × {key['layers']} layers, {key['dtype']} (store "
               f"{key['label']}, {key['device_name']}): one row per backend and step shape; speedups over "
               f"{', '.join(base) or 'no baseline (no OK baseline row)'}; a blank cell is a value the row does not "
               "hold (a failed row, or no kernel-level rows for s)")
    return table(ctx.table_id(), cols, rows, caption)


def predicted_vs_measured(frame: pd.DataFrame, heading: str, colors: dict[str, str]) -> Figure:
    """Measured against predicted end-to-end speedup, one point per backend and step shape (colour: backend,
    marker: step), with y = x and the ±AGREE band. `frame`: FIG_COLS rows with both speedups."""
    fig = Figure(figsize=(6.4, 6.0), layout="constrained")
    ax = fig.subplots()
    for r in frame.itertuples(index=False):
        ax.plot(r.predicted_speedup, r.measured_speedup, ls="none", marker=MARKERS.get(r.step, "o"), ms=7,
                color=colors[r.backend], mec="black", mew=0.5)
    vals = pd.concat([frame["predicted_speedup"], frame["measured_speedup"]])
    lo, hi = min(vals.min(), 1.0) * 0.9, max(vals.max(), 1.0) * 1.1
    ax.plot([lo, hi], [lo, hi], color="black", lw=1, label="y = x")
    ax.fill_between([lo, hi], [lo * (1 - AGREE), hi * (1 - AGREE)], [lo * (1 + AGREE), hi * (1 + AGREE)],
                    color="0.85", lw=0)
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("predicted end-to-end speedup 1/((1−f)+f/s)")
    ax.set_ylabel("measured end-to-end speedup")
    handles = [Line2D([], [], ls="none", marker="o", ms=7, color=colors[b], label=b)
               for b in sorted(frame["backend"].unique())]
    handles += [Line2D([], [], ls="none", marker=MARKERS.get(s, "o"), ms=7, color="0.5", label=s)
                for s in sorted(frame["step"].unique(), key=lambda s: STEP_ORDER.get(s, 9))]
    handles += [Line2D([], [], color="black", lw=1, label="y = x"),
                Line2D([], [], color="0.85", lw=6, label=f"within ±{AGREE:.0%}")]
    fig.legend(handles=handles, loc="outside lower center", ncols=3, frameon=False)
    set_title(fig, heading)
    return fig


def _figure(ctx: Context, key: dict, g: pd.DataFrame, colors: dict[str, str]) -> str:
    pts = g[(g["status"] == "OK") & g["predicted_speedup"].notna() & g["measured_speedup"].notna()
            & (g["backend"] != g["baseline"])]
    if pts.empty:
        return note("No backend of this model has a prediction (no kernel-level rows of its attention shapes for "
                    "both it and the baseline, or no attention share): nothing to plot.")
    data = pts[FIG_COLS].sort_values(["step", "batch", "seqlen", "launch", "backend"]).reset_index(drop=True)
    base = ", ".join(sorted(set(data["baseline"].astype(str))))
    heading = (f"Predicted vs measured end-to-end speedup over {base}: {key['config']} × {key['layers']} layers, "
               f"{key['dtype']} (store {key['label']}, {key['device_name']})")
    steps = "; ".join(f"{s}: {', '.join(sorted({_shape(r) for r in data[data['step'] == s].to_dict('records')}))}"
                      for s in sorted(data["step"].unique(), key=lambda s: STEP_ORDER.get(s, 9)))
    slice_text = (f"store {key['label']}, {key['device_name']}; model {key['config']}, {key['layers']} layers, "
                  f"{key['dtype']}; baseline {base}; step shapes {steps}; OK rows with a prediction, baseline excluded")
    caption = (f"One point per backend and step shape: x is 1/((1−f)+f/s) with f the baseline's attention share "
               f"(f source column) and s the isolated kernel-level speedup; y is the baseline's median step time over "
               f"the backend's. On the line the kernel benchmark predicts the workload; the grey band is "
               f"±{AGREE:.0%}. "
               "The evidence on each gap is in the table.")
    return ctx.figs.add(predicted_vs_measured(data, heading, colors), data, "model-predicted-vs-measured", heading,
                        slice_text, caption)


def applies(data) -> bool:
    """Only when some store holds model rows; with no attempts beside them this page is the index."""
    return data.models is not None and not data.models.empty


def body(ctx: Context) -> str:
    m = ctx.data.models
    colors = backend_colors(m["backend"].dropna().astype(str))
    parts = [note("The rows of `attnbench model` (docs/model.md): whole train, prefill and decode steps of a "
                  "decoder whose every layer calls the backend's attention. Per backend: its step time, "
                  "attention's share of the step (by the profiler and by difference with a no-op attention), the "
                  "kernel-level speedup s over the baseline from `attnbench run` rows of the same attention "
                  "shape, the Amdahl prediction with the baseline's share, the measured end-to-end speedup, and "
                  "the gap with the evidence stored beside it. Every value is as stored; the page computes none.")]
    m = m.assign(_order=m["step"].map(STEP_ORDER).fillna(9))
    outer = ["label", "device_name", "config", "layers", "dtype"]
    for okey, og in m.groupby(outer, sort=False, dropna=False):
        key = dict(zip(outer, okey))
        parts.append(f"<section>\n<h2>{e(key['config'])} × {e(key['layers'])} layers, {e(key['dtype'])} "
                     f"(store {e(key['label'])}, {e(key['device_name'])})</h2>\n")
        parts.append(_figure(ctx, key, og, colors))
        for step, g in og.sort_values("_order").groupby("step", sort=False):
            parts.append(f"<h3>{e(step)}</h3>\n" + _table(ctx, {**key, "step": step}, g))
        parts.append("</section>\n")
    return "".join(parts)

