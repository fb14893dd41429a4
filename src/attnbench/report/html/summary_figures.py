"""The summary figures, one function per figure (DataFrame -> matplotlib Figure): attempts per status, winner
changes per pair of stores, and the distribution of transfer costs."""
from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from ...status import ORDER
from .figures import title as set_title

STATUS_COLORS = {"OK": "#2ca02c", "UNSUPPORTED": "#c7c7c7", "OOM_PREDICTED": "#ffbb78", "OOM": "#ff7f0e",
                 "INCORRECT": "#d62728", "DISPATCH_MISMATCH": "#9467bd", "IMPLAUSIBLE": "#e377c2",
                 "TIMEOUT": "#8c564b", "CRASH": "#000000", "ERROR": "#7f0000"}


def status_bars(frame: pd.DataFrame, title: str) -> Figure:
    """Attempts per backend, stacked by status (the order of status.ORDER). `frame`: backend, status, attempts."""
    backends = sorted(frame["backend"].unique(), reverse=True)
    statuses = [s for s in ORDER if s in set(frame["status"])]
    fig = Figure(figsize=(9, 0.36 * len(backends) + 1.5), layout="constrained")
    ax = fig.subplots()
    left = pd.Series(0.0, index=backends)
    for s in statuses:
        n = frame[frame["status"] == s].set_index("backend")["attempts"].reindex(backends).fillna(0)
        ax.barh(backends, n, left=left, color=STATUS_COLORS.get(s, "0.5"), label=s, edgecolor="white", lw=0.5)
        left += n
    for y, total in enumerate(left):
        ax.text(total, y, f" {int(total)}", va="center", fontsize=8)
    ax.set_xlabel("attempts (workload × repeat)")
    ax.grid(axis="y", visible=False)
    ax.set_xlim(0, left.max() * 1.08 if len(left) else 1)
    fig.legend(loc="outside lower center", ncols=len(statuses), frameon=False)
    set_title(fig, title)
    return fig


def change_rates(frame: pd.DataFrame, title: str) -> Figure:
    """Per pair of stores and mode: the share of shared workloads whose winner differs, over all of them and
    over those separated on both sides; hatched where fewer than 5 are separated (too few to read as a rate).
    `frame`: pair, mode, shared, rate, separated, rate_separated, too_small."""
    labels = [f"{p} · {m}" for p, m in zip(frame["pair"], frame["mode"])][::-1]
    f = frame.iloc[::-1].reset_index(drop=True)
    fig = Figure(figsize=(9, 0.55 * len(f) + 1.6), layout="constrained")
    ax = fig.subplots()
    y = range(len(f))
    ax.barh([v + 0.2 for v in y], 100 * f["rate"].fillna(0), height=0.38, color="#9ecae1", label="all shared workloads")
    sep = 100 * f["rate_separated"].fillna(0)
    ax.barh([v - 0.2 for v in y], sep, height=0.38, color="#08519c", label="separated on both sides",
            hatch=None, edgecolor="white")
    for i, r in f.iterrows():
        ax.text(100 * (r["rate"] or 0) + 1, i + 0.2, f"{100 * (r['rate'] or 0):.0f}% of {r['shared']}", va="center",
                fontsize=7.5)
        small = " (n<5: not a rate)" if r["too_small"] else ""
        text = f"{r['rate_separated'] * 100:.0f}% of {r['separated']}" if r["separated"] else "none separated"
        ax.text(sep[i] + 1, i - 0.2, text + small, va="center", fontsize=7.5)
        if r["too_small"]:
            ax.barh(i - 0.2, max(sep[i], 0.8), height=0.38, color="none", edgecolor="#08519c", hatch="////")
    ax.set_yticks(list(y), labels)
    ax.set_xlim(0, 118)
    ax.set_xlabel("workloads whose winner differs between the two stores (%)")
    ax.grid(axis="y", visible=False)
    handles = [Patch(color="#9ecae1", label="all shared workloads"), Patch(color="#08519c", label="separated on both"),
               Patch(facecolor="none", edgecolor="#08519c", hatch="////", label="fewer than 5 separated")]
    fig.legend(handles=handles, loc="outside lower center", ncols=3, frameon=False)
    set_title(fig, title)
    return fig


def transfer_costs(frame: pd.DataFrame, title: str) -> Figure:
    """Per mode: how many matched workloads fall in each cost bin, one bar per ordered pair of stores; the
    legend gives each pair's median, p95 and unavailable count. `frame`: pair, mode, bin, workloads, median,
    p95, unavailable (bins in order)."""
    modes = list(dict.fromkeys(frame["mode"]))
    pairs = list(dict.fromkeys(frame["pair"]))
    fig = Figure(figsize=(9.5, 2.5 * len(modes) + 1.2 + 0.2 * len(pairs)), layout="constrained")
    axes = fig.subplots(len(modes), 1, squeeze=False)[:, 0]
    width = 0.8 / max(len(pairs), 1)
    colors = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")
    for ax, mode in zip(axes, modes):
        g = frame[frame["mode"] == mode]
        bins = list(dict.fromkeys(g["bin"]))
        for k, pair in enumerate(pairs):
            p = g[g["pair"] == pair]
            if p.empty:
                continue
            first = p.iloc[0]
            med = "-" if pd.isna(first["median"]) else f"{first['median']:.3f}"
            p95 = "-" if pd.isna(first["p95"]) else f"{first['p95']:.3f}"
            ax.bar([bins.index(b) + (k - (len(pairs) - 1) / 2) * width for b in p["bin"]], p["workloads"], width,
                   color=colors[k % len(colors)],
                   label=f"{pair}: median {med}, p95 {p95}, unavailable {int(first['unavailable'])}")
        ax.set_xticks(range(len(bins)), [f"cost {b}" for b in bins])
        ax.set_ylabel("matched workloads")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(f"{mode}", loc="left")
        ax.legend(loc="upper right", frameon=False, fontsize=7.5)
        ax.grid(axis="x", visible=False)
    axes[-1].set_xlabel("transfer cost: the source's winner's time on the target ÷ the target's fastest "
                        "(1: the same winner)")
    set_title(fig, title)
    return fig
