"""The performance figures, one function per figure (DataFrame -> matplotlib Figure): time, throughput and
memory against length, speedup heatmaps over batch × length, and the fastest backend per cell."""
from __future__ import annotations

import functools
import math
import textwrap

import numpy as np
import pandas as pd
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import FixedFormatter, FixedLocator, FuncFormatter, NullFormatter, NullLocator

from .axis_marks import InViewLog, fixed_label_positions, percent_axis

# every figure is drawn under this style; SVG text as paths, so a figure looks alike without its fonts. A
# panel title sits at the top of its panel (axes.titley), where it sat anyway: no figure has ticks or an offset
# text above a panel, and placing it automatically measured every tick of every titled panel (issue 43.3)
STYLE = {"axes.titley": 1.0, "font.size": 9, "axes.titlesize": 9.5, "axes.labelsize": 9, "legend.fontsize": 8.5,
         "xtick.labelsize": 8, "ytick.labelsize": 8, "axes.grid": True, "grid.alpha": 0.3,
         "axes.spines.top": False, "axes.spines.right": False, "svg.fonttype": "path", "svg.hashsalt": "attnbench",
         "pdf.fonttype": 42, "figure.dpi": 100}
NOT_MEASURED = "NOT MEASURED"
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
           "#7f7f7f", "#393b79", "#ad494a")


def backend_colors(names) -> dict[str, str]:
    """One colour per backend, the same in every figure of a site (sorted names, a fixed palette)."""
    return {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(sorted(set(names)))}


def us_text(v) -> str:
    """A time in microseconds as short text: 6.80 µs, 269 µs, 1.23 ms."""
    if v is None or not math.isfinite(v):
        return ""
    return f"{v / 1000:.3g} ms" if v >= 1000 else f"{v:.3g} µs"


def length_text(n) -> str:
    n = int(n)
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else str(n)


def _length_axis(ax, lengths) -> None:
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(sorted(set(lengths))))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(_length_tick))


def _length_tick(v, _pos) -> str:  # module-level formatters: a figure pickles (drawn in another process)
    return length_text(v)


def _plain_tick(v, _pos) -> str:
    return f"{v:,.0f}" if v >= 1 else f"{v:g}"


def plain_log_axis(ax) -> None:
    """A log y axis labelled as plain numbers (no 6×10² minor labels): 10, 20, 50, 100, ... over up to
    2.5 decades, 10, 100, 1,000, ... over more. No minor ticks: unlabelled, they were four fifths of a
    figure's ticks and a third of its drawing time (issue 43)."""
    ax.set_yscale("log")
    lo, hi = ax.get_ylim()
    wide = lo > 0 and math.log10(hi / lo) > 2.5
    ax.yaxis.set_major_locator(InViewLog(base=10, subs=(1.0,) if wide else (1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(_plain_tick))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_minor_formatter(NullFormatter())


def title(fig: Figure, text: str) -> None:
    """The figure's own title (so a PDF alone says what it shows), wrapped to the figure's width."""
    chars = int(fig.get_size_inches()[0] * 12.5)
    fig.suptitle(textwrap.fill(text, chars), fontsize=10)


def _label(backend: str, role) -> str:
    return f"{backend} (accuracy ref.)" if role == "accuracy_reference" else backend


PANELS = {  # column of the frame, axis label, log scale
    "time": ("median_us", "median time per call (µs)", True),
    "throughput": ("value", "", False),
    "memory": ("peak_mem_mib", "peak memory above inputs (MiB)", True),
}


def perf_lines(frame: pd.DataFrame, panels: list[str], metric: str, ceiling: float | None, ceiling_name: str,
               x_label: str, heading: str, colors: dict[str, str]) -> Figure:
    """Rows: one per batch; columns: `panels` (time, throughput, memory) against length, one line per backend.
    `frame`: backend, role, batch, kv_len, median_us, value (in `metric`), peak_mem_mib, host_bound, clock_low.
    The throughput panel carries the measured ceiling as a dashed line and a % of it on its right axis."""
    batches = sorted(frame["batch"].unique())
    width = 3.7 if len(panels) > 2 else 4.6
    fig = Figure(figsize=(width * len(panels) + 0.6, 2.55 * len(batches) + 1.1))  # laid out by _place
    axes = fig.subplots(len(batches), len(panels), squeeze=False, sharex=True)
    lengths = frame["kv_len"].unique()
    curves = _curves(frame, [PANELS[name][0] for name in panels])
    _length_axis(axes[0][0], lengths)  # the panels share x: scale, locator and formatter set once for all
    for i, b in enumerate(batches):
        for j, name in enumerate(panels):
            ax = axes[i][j]
            col, ylabel, log = PANELS[name]
            # Line2D added as plot() adds it, without plot's parsing of its arguments (a tenth of perf_lines)
            for backend, ref, x, y, hb, cl in curves.get((b, col), ()):
                ax.add_line(Line2D(x, y, color=colors[backend], ls="--" if ref else "-", marker="o", ms=3.5, lw=1.3))
                if hb.any():  # an empty line draws nothing but costs its artist (2 of 3 lines, most panels)
                    ax.add_line(Line2D(x[hb], y[hb], ls="none", marker="o", ms=7, mfc="white", mec=colors[backend],
                                       mew=1.4))
                if cl.any():
                    ax.add_line(Line2D(x[cl], y[cl], ls="none", marker="x", ms=6, color="black", mew=1.2))
            ax.autoscale_view()
            if log:
                plain_log_axis(ax)
            if name == "throughput":
                ylabel = "effective bandwidth (GB/s)" if metric == "GB/s" else metric
                if ceiling:
                    ax.axhline(ceiling, color="black", ls=":", lw=1.2)
                ax.set_ylim(bottom=0)
            ax.set_title(f"B = {b}: {ylabel.split(' (')[0]}", loc="left")
            ax.set_ylabel(ylabel)
            if i == len(batches) - 1:
                ax.set_xlabel(x_label)
    handles = [Line2D([], [], color=colors[bk], marker="o", ms=4, ls="--" if role == "accuracy_reference" else "-",
                      label=_label(bk, role))
               for bk, role in frame.groupby("backend", sort=True)["role"].first().items()]
    handles += [Line2D([], [], ls="none", marker="o", ms=7, mfc="white", mec="0.3", label="host-bound (eager)"),
                Line2D([], [], ls="none", marker="x", ms=6, color="black", label="clock below max")]
    if ceiling:
        handles.append(Line2D([], [], color="black", ls=":", label=f"{ceiling_name} {ceiling:,.0f} {metric}"))
    ncols = min(2 * len(panels), len(handles))
    fig.legend(handles=handles, loc="lower center", ncols=ncols, frameon=False, borderaxespad=0.3)
    title(fig, heading)
    _place(fig, axes, right_axis=[name == "throughput" and bool(ceiling) for name in panels],
           legend_rows=math.ceil(len(handles) / ncols))
    if ceiling:  # once the panels are placed: the right axis's ticks depend on the panel's height
        for ax in axes[:, panels.index("throughput")]:
            percent_axis(ax, ceiling)
    fixed_label_positions(fig)
    return fig


def _curves(frame: pd.DataFrame, cols: list[str]) -> dict:
    """(batch, column) -> per backend in name order (backend, is reference, lengths, values, host-bound mask,
    clock-low mask), sorted by length, backends without a value in that column left out: the frame split once
    with numpy rather than by a boolean selection per batch, panel and backend (a fifth of perf_lines' time)."""
    f = frame.sort_values(["batch", "backend", "kv_len"], kind="stable")
    out: dict = {}
    hb_all, cl_all = f["host_bound"].astype(bool).to_numpy(), f["clock_low"].astype(bool).to_numpy()
    x_all = f["kv_len"].to_numpy()
    values = {c: f[c].to_numpy(dtype=float) for c in cols}
    keys = list(zip(f["batch"], f["backend"].astype(str)))
    roles = f["role"].to_numpy()
    starts = [k for k in range(len(keys)) if k == 0 or keys[k] != keys[k - 1]] + [len(keys)]
    for lo, hi in zip(starts, starts[1:]):
        b, backend = keys[lo]
        for c in cols:
            y = values[c][lo:hi]
            if np.isnan(y).all():
                continue
            out.setdefault((b, c), []).append((backend, roles[lo] == "accuracy_reference", x_all[lo:hi], y,
                                               hb_all[lo:hi], cl_all[lo:hi]))
    return out


def _text_pt(text: str, size: float) -> tuple[float, float]:
    """Width and height (points) of one line of text at `size` points in the figures' font."""
    return _measured(text, FontProperties(size=size))


@functools.lru_cache(maxsize=4096)  # the same few texts (tick labels, legend entries) in every figure
def _measured(text: str, prop: FontProperties) -> tuple[float, float]:
    global _MEASURE
    if _MEASURE is None:
        from matplotlib.backends.backend_agg import RendererAgg

        _MEASURE = RendererAgg(1, 1, 72)  # at 72 dpi a pixel is a point
    w, h, _ = _MEASURE.get_text_width_height_descent(text, prop, ismath=False)
    return w, h


_MEASURE = None


def _tick_width_pt(axis, size: float = 8.0) -> float:
    """The widest major tick label `axis` will show (its locator and formatter over its view limits), in points."""
    lo, hi = sorted(axis.get_view_interval())
    locs = [v for v in axis.get_major_locator().tick_values(lo, hi) if lo - 1e-9 * abs(lo) <= v <= hi + 1e-9 * abs(hi)]
    labels = axis.get_major_formatter().format_ticks(locs) if locs else []
    return max((_text_pt(t, size)[0] for t in labels if t), default=0.0)


def _place(fig: Figure, axes, right_axis: list[bool], legend_rows: int, inner_x: bool = False,
           bar: float = 0.0) -> None:
    """Margins and gaps of a grid of panels from the sizes of what surrounds them (tick labels, axis labels,
    panel titles, the suptitle's lines, the legend's rows): what constrained layout finds, without its second
    drawing pass over every tick (a third of a figure's drawing time, issue 43). `inner_x`: every row of
    panels has its own x tick labels and x label; `bar`: points kept free right of the panels (a colorbar)."""
    fw, fh = (v * 72 for v in fig.get_size_inches())
    nrows, ncols = axes.shape
    pad, tick = 4.0, 3.5 + 3.5  # tick length + pad, points
    label_h = _text_pt("Ag", 9)[1] + 4.0  # an axis label's line and its labelpad
    left_of = [max(_tick_width_pt(ax.yaxis) for ax in axes[:, j]) + tick
               + (label_h if any(ax.get_ylabel() for ax in axes[:, j]) else 0) for j in range(ncols)]
    right_of = [(_text_pt("100", 8)[0] + tick + label_h) if r else 0.0 for r in right_axis]
    sup = fig.get_suptitle()  # at y 0.98, aligned at its top
    sup_h = 0.02 * fh + len(sup.splitlines()) * _text_pt("Ag", 10)[1] * 1.2 if sup else 0.0
    title_h = _text_pt("Ag", 9.5)[1] + 6.0
    left = left_of[0] + pad
    right = right_of[-1] + pad * 2 + bar
    top = sup_h + pad * 2 + title_h
    legend_h = legend_rows * 8.5 * 1.5 + 8.5 * 0.6
    x_h = _text_pt("0", 8)[1] + tick + label_h  # x tick labels and the x label
    bottom = x_h + legend_h + pad * 2
    gaps = [right_of[j] + left_of[j + 1] + pad for j in range(ncols - 1)]
    wgap = max(gaps, default=0.0)
    hgap = title_h + pad * 2 + (x_h if inner_x else 0.0)
    aw = (fw - left - right - wgap * (ncols - 1)) / ncols
    ah = (fh - top - bottom - hgap * (nrows - 1)) / nrows
    fig.subplots_adjust(left=left / fw, right=1 - right / fw, bottom=bottom / fh, top=1 - top / fh,
                        wspace=wgap / aw, hspace=hgap / ah)


def _legend_cols(fig: Figure, handles, most: int) -> int:
    """The most columns (up to `most`) whose legend, filled column by column, fits the figure's width."""
    fw = fig.get_size_inches()[0] * 72
    widths = [_text_pt(h.get_label(), 8.5)[0] + 8.5 * (2.0 + 0.8) for h in handles]  # handle and its pad
    for ncols in range(min(most, len(handles)), 1, -1):
        per = math.ceil(len(handles) / ncols)
        cols = [max(widths[j:j + per]) for j in range(0, len(widths), per)]
        if sum(cols) + 8.5 * 2.0 * (len(cols) - 1) + 8.5 * 1.0 <= fw:
            return ncols
    return 1


def _cell_grid(ax, rows: list, cols: list, row_label: str, col_label: str) -> None:
    # what set_xticks(positions, labels) sets, without labelling every tick now: the draw labels them anyway
    ax.xaxis.set_major_locator(FixedLocator(range(len(cols))))
    ax.xaxis.set_major_formatter(FixedFormatter([length_text(c) for c in cols]))
    ax.yaxis.set_major_locator(FixedLocator(range(len(rows))))
    ax.yaxis.set_major_formatter(FixedFormatter([str(r) for r in rows]))
    ax.set_xlim(-0.5, len(cols) - 0.5)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlabel(col_label)
    ax.set_ylabel(row_label)
    ax.grid(False)
    for s in ax.spines.values():
        s.set_visible(False)


def _blank_cells(ax, cells: pd.DataFrame, rows: list, cols: list) -> None:
    """Cells without a value: blank with a thin outline (no OK row), or grey (not in the grid)."""
    for r in cells.itertuples(index=False):
        x, y = cols.index(r.kv_len), rows.index(r.batch)
        measured = r.status != NOT_MEASURED
        ax.add_artist(Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor="white" if measured else "0.88",
                               edgecolor="0.35" if measured else "0.6", lw=0.9, ls="--" if measured else "-"))


def blank_handles() -> list[Patch]:
    """The legend entries of _blank_cells."""
    return [Patch(facecolor="white", edgecolor="0.35", ls="--", label="blank: no OK row (unsupported, OOM predicted or failed; "
                                                           "see the tables)"),
            Patch(facecolor="0.88", edgecolor="0.6", label="grey: not in the grid this store ran")]


def speedup_heatmaps(frame: pd.DataFrame, baseline: str, heading: str, x_label: str) -> Figure:
    """One panel per backend: the baseline's time over the backend's (above 1: faster than the baseline) per
    batch × length. `frame`: backend, batch, kv_len, speedup, status ('' where OK)."""
    backends = sorted(b for b in frame["backend"].unique() if b != baseline)
    rows, cols = sorted(frame["batch"].unique()), sorted(frame["kv_len"].unique())
    ncols = min(3, len(backends))
    nrows = math.ceil(len(backends) / ncols)
    fig = Figure(figsize=(max(3.6 * ncols, 5.5), (0.42 * len(rows) + 1.25) * nrows + 1.3))  # laid out by _place
    axes = fig.subplots(nrows, ncols, squeeze=False)
    norm = TwoSlopeNorm(vmin=-2, vcenter=0, vmax=2)
    image = None
    for k, ax in enumerate(axes.flat):
        if k >= len(backends):
            ax.set_visible(False)
            continue
        g = frame[frame["backend"] == backends[k]]
        grid = np.full((len(rows), len(cols)), np.nan)
        for r in g.itertuples(index=False):
            if r.speedup == r.speedup and r.speedup is not None:
                grid[rows.index(r.batch), cols.index(r.kv_len)] = np.log2(r.speedup)
        image = ax.imshow(np.clip(grid, -2, 2), cmap="RdBu", norm=norm, aspect="auto")
        _blank_cells(ax, g[g["status"] != ""], rows, cols)
        for y in range(len(rows)):
            for x in range(len(cols)):
                v = grid[y, x]
                if v == v:
                    ax.text(x, y, f"{2 ** v:.2f}×", ha="center", va="center", fontsize=7.5,
                            color="white" if abs(v) > 1.1 else "black")
        _cell_grid(ax, rows, cols, "batch B" if k % ncols == 0 else "", x_label if k + ncols >= len(backends) else "")
        if k % ncols:  # every panel has the same batches: named once per row of panels (fewer texts to draw)
            ax.tick_params(labelleft=False)
        ax.set_title(backends[k], loc="left")
    tick_text = ["≤0.25×", "0.5×", "1×", "2×", "≥4×"]
    bar_w, pad = 10.0, 8.0  # the colorbar's width and its gap to the panels, points
    blanks = blank_handles()
    legend_cols = _legend_cols(fig, blanks, 2)
    fig.legend(handles=blanks, loc="lower center", ncols=legend_cols, frameon=False, borderaxespad=0.3)
    title(fig, heading)
    _place(fig, axes, right_axis=[False] * ncols, legend_rows=math.ceil(len(blanks) / legend_cols), inner_x=True,
           bar=(pad + bar_w + 7.0 + max(_text_pt(t, 8)[0] for t in tick_text) + _text_pt("Ag", 9)[1] + 4.0)
           if image is not None else 0.0)
    if image is not None:  # placed once the margins are known: beside the panels, 80% of their height
        fw, fh = (v * 72 for v in fig.get_size_inches())
        sp = fig.subplotpars
        cax = fig.add_axes((sp.right + pad / fw, sp.bottom + 0.1 * (sp.top - sp.bottom), bar_w / fw,
                            0.8 * (sp.top - sp.bottom)))
        bar = fig.colorbar(image, cax=cax, ticks=[-2, -1, 0, 1, 2])
        bar.ax.set_yticklabels(tick_text)
        bar.set_label(f"speedup over {baseline}")
    fixed_label_positions(fig)
    return fig


def fastest_map(frame: pd.DataFrame, heading: str, colors: dict[str, str], x_label: str) -> Figure:
    """The fastest contestant per batch × length, its time in the cell; hatched where its lead over the
    runner-up is not separated, dotted where it is separated on noisy numbers. `frame`: batch, kv_len,
    best, median_us, separated, noisy, status ('' where a contestant ran OK)."""
    rows, cols = sorted(frame["batch"].unique()), sorted(frame["kv_len"].unique())
    fig = Figure(figsize=(max(1.25 * len(cols) + 2.2, 6.5), 0.62 * len(rows) + 2.1))  # laid out by _place
    axes = fig.subplots(squeeze=False)
    ax = axes[0, 0]
    won = frame[frame["status"] == ""]
    for r in won.itertuples(index=False):
        x, y = cols.index(r.kv_len), rows.index(r.batch)
        hatch = None if r.separated and not r.noisy else ("////" if not r.separated else "..")
        ax.add_artist(Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor=colors[r.best], alpha=0.9 if hatch is None else 0.45,
                               edgecolor="white", lw=1.5, hatch=hatch))
        ax.text(x, y, f"{r.best}\n{us_text(r.median_us)}", ha="center", va="center", fontsize=8)
    _blank_cells(ax, frame[frame["status"] != ""], rows, cols)
    _cell_grid(ax, rows, cols, "batch B", x_label)
    handles = [Patch(facecolor=colors[b], label=b) for b in sorted(won["best"].unique())]
    handles += [Patch(facecolor="0.8", hatch="////", edgecolor="white", label="lead not separated"),
                Patch(facecolor="0.8", hatch="..", edgecolor="white", label="separated, numbers noisy"),
                *blank_handles()]
    ncols = _legend_cols(fig, handles, 3)
    fig.legend(handles=handles, loc="lower center", ncols=ncols, frameon=False, borderaxespad=0.3)
    title(fig, heading)
    _place(fig, axes, right_axis=[False], legend_rows=math.ceil(len(handles) / ncols))
    fixed_label_positions(fig)
    return fig
