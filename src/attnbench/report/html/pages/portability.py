"""The portability page, from what `analyze` computed: separated winners per side (a store, or the sides of
`report --by`), winner changes per pair (all against separated), transfer costs with median and p95,
unavailable choices and the noise floor."""
from __future__ import annotations

from dataclasses import asdict

import pandas as pd

from ....analysis.transfer import MIN_RATE_N
from ...analysis_text import noise_floor_lines
from ...texttable import workload_text
from ..context import Context
from ..markup import Col, note, pct, table
from ..summary_figures import change_rates, transfer_costs

FILE, TITLE = "portability.html", "Portability"
f3 = lambda v: f"{v:.3f}"  # noqa: E731
# what one side is called, per --by (analysis/sides.py BY_CHOICES)
SIDE_WORDS = {"label": ("store", "stores"), "device_name": ("device model", "device models"),
              "device_uuid": ("GPU", "GPUs"), "torch_version": ("toolkit", "toolkits"),
              "launch": ("launch mode", "launch modes"), "l2": ("L2 state", "L2 states"), "tag": ("tag", "tags")}


def side_word(ctx: Context, plural: bool = False) -> str:
    return SIDE_WORDS.get(ctx.data.portability.by, ("side", "sides"))[plural]


def _honesty_by(ctx: Context) -> str:
    """What the sides of one --by other than the store can say about portability, in words."""
    a = ctx.data.portability
    sides = sorted(set(a.basis.df["side"]))
    one, many = side_word(ctx), side_word(ctx, True)
    if len(sides) < 2:
        return note(f"--by {a.by}: the stores hold one {one} ({', '.join(sides) or 'none'}): there is no second "
                    f"{one} to carry a choice to, so there are no transfer costs and no winner changes to show.",
                    "warn")
    return note(f"{len(sides)} {many} (--by {a.by}): {', '.join(sides)}; contests of two {many} are compared "
                "where their workloads match (analysis/sides.py).")


def _honesty(ctx: Context) -> str:
    """What the set of stores can and cannot say about portability, in words."""
    if ctx.data.portability.by != "label":
        return _honesty_by(ctx)
    srcs = ctx.data.analysis.sources.rows
    devices = sorted({d for s in srcs for d in s.devices})
    torches = sorted({t for s in srcs for t in s.torch_versions})
    if len(srcs) < 2:
        return note(f"Only one store was given ({srcs[0].label}, {', '.join(devices) or 'no device'}): "
                    "there is no second store to carry a choice to, so there are no transfer costs and no winner "
                    "changes to show. Build the report from two or more stores (other GPUs, toolkits or sweeps) "
                    "to fill this page; the separated winners below hold for this store alone.", "warn")
    if len(devices) == 1 and len(torches) <= 1:
        return note(f"Every store measured one GPU model ({devices[0]}) under one toolkit (torch "
                    f"{', '.join(torches) or 'unknown'}). What follows is not portability across GPUs: the stores "
                    "differ by nothing the analysis can name, so their winner changes and transfer costs are the "
                    "method's own noise floor.", "warn")
    return note(f"{len(srcs)} stores, {len(devices)} device model(s): {', '.join(devices)}; torch "
                f"{', '.join(torches)}.")


def _separated(ctx: Context) -> str:
    rows = [{**asdict(s), "methods": ", ".join(f"{k} {v}" for k, v in sorted(s.methods.items()))}
            for s in ctx.data.portability.winners.separated]
    cols = [Col("side", side_word(ctx)), Col("mode", "mode"), Col("contests", "workloads", numeric=True),
            Col("contested", "with a runner-up", numeric=True), Col("separated", "separated", numeric=True),
            Col("fraction", "fraction", pct, numeric=True), Col("methods", "bootstrap"),
            Col("host_bound", "host-bound winners", numeric=True), Col("clock_low", "clock-low winners", numeric=True)]
    return table(ctx.table_id(), cols, rows, f"Separated winners per {side_word(ctx)} and mode: a lead of at least "
                                             "1.10× whose 95% bootstrap lower bound is above 1")


def _pairs(ctx: Context) -> str:
    rows = ctx.data.portability.pairs.rows
    if not rows:
        return ""
    frame = pd.DataFrame([{"pair": f"{p.a} vs {p.b}", **{k: getattr(p, k) for k in (
        "mode", "shared", "changed", "rate", "separated", "changed_separated", "rate_separated", "too_small",
        "noise_floor")}} for p in rows])
    title = f"Winner-change rate per pair of {side_word(ctx, True)}, all shared workloads against those separated on both"
    caption = (f"A pair changes winner on a workload measured in both when their fastest contestants differ. Pairs "
               f"with fewer than {MIN_RATE_N} workloads separated on both sides are hatched: too few to read as a "
               "rate. " + ("Every pair here is one GPU model and one toolkit: these rates are the noise floor."
                           if all(p.noise_floor for p in rows) else ""))
    fig = ctx.figs.add(change_rates(frame, title), frame, "winner-changes", title,
                       f"stores {', '.join(ctx.data.labels)}{_by(ctx)}; every mode and per mode; matched workloads",
                       caption)
    cols = [Col("pair", "pair"), Col("mode", "mode"), Col("shared", "shared", numeric=True),
            Col("changed", "changed", numeric=True), Col("rate", "rate", pct, numeric=True),
            Col("separated", "separated on both", numeric=True), Col("changed_separated", "changed", numeric=True),
            Col("rate_separated", "rate (separated)", pct, numeric=True), Col("too_small", "n < 5"),
            Col("noise_floor", "noise floor")]
    recs = frame.assign(too_small=frame["too_small"].map({True: "yes", False: "no"}),
                        noise_floor=frame["noise_floor"].map({True: "yes", False: "no"})).to_dict(orient="records")
    return fig + table(ctx.table_id(), cols, recs, f"Winner changes per pair of {side_word(ctx, True)} and mode")


def _transfer(ctx: Context) -> str:
    rows = ctx.data.portability.transfer.rows
    if not rows:
        return ""
    modes = {r.mode for r in rows}
    data = []
    for r in rows:
        if r.mode == "all" and len(modes) > 1:
            continue  # the per-mode panels hold every workload once
        a = r.all
        for b, n in a.distribution.items():
            data.append({"pair": f"{r.source} → {r.target}", "mode": r.mode, "bin": b, "workloads": n,
                         "median": a.median, "p95": a.p95, "unavailable": a.unavailable})
    frame = pd.DataFrame(data)
    title = f"Transfer cost of each {side_word(ctx)}'s winner on another {side_word(ctx)}, per mode"
    caption = ("Cost: the time on the target of the backend that won on the source, over the target's fastest (1: "
               "the same winner). Bins hold costs above the previous bound up to their own. A source winner with "
               "no OK row on the target is unavailable: counted in the legend, never a ratio.")
    fig = ctx.figs.add(transfer_costs(frame, title), frame, "transfer-costs", title,
                       f"stores {', '.join(ctx.data.labels)}{_by(ctx)}; every matched workload", caption)
    recs = []
    pooled = ctx.data.portability.transfer.pooled  # every ordered pair pooled: the table's last rows, (all)
    for r in [*rows, *pooled]:
        a, s = r.all, r.separated
        recs.append({"source": r.source, "target": r.target, "mode": r.mode, "n": a.n, "unavailable": a.unavailable,
                     "median": a.median, "p95": a.p95, "max": a.max, "sep_n": s.n, "sep_median": s.median,
                     "sep_p95": s.p95, "sep_unavailable": s.unavailable})
    cols = [Col("source", "from"), Col("target", "to"), Col("mode", "mode"),
            Col("n", "matched", numeric=True), Col("unavailable", "unavailable on target", numeric=True),
            Col("median", "median cost", f3, numeric=True), Col("p95", "p95 cost", f3, numeric=True),
            Col("max", "max", f3, numeric=True), Col("sep_n", "separated source winners", numeric=True),
            Col("sep_median", "median (separated)", f3, numeric=True), Col("sep_p95", "p95 (separated)", f3,
                                                                             numeric=True),
            Col("sep_unavailable", "unavailable (separated)", numeric=True)]
    return fig + table(ctx.table_id(), cols, recs, f"Transfer cost per ordered pair of {side_word(ctx, True)} and mode: "
                                                   "over every matched workload, and over those whose source winner "
                                                   "is separated" + (f"; (all): the {pooled[0].pairs} ordered pairs "
                                                                     "pooled" if pooled else ""))


def _changes(ctx: Context) -> str:
    rows = ctx.data.portability.pairs.changes
    if not rows:
        return ""
    recs = [{**c, "workload": workload_text(c), "pair": f"{c['a']} / {c['b']}",
             "separated": f"{'yes' if c['separated_a'] else 'no'} / {'yes' if c['separated_b'] else 'no'}"}
            for c in rows]
    cols = [Col("pair", "pair"), Col("workload", "workload"), Col("winner_a", "winner a"), Col("winner_b", "winner b"),
            Col("separated", "separated a / b"), Col("cost_a_on_b", "cost of a's winner on b", f3, numeric=True)]
    return table(ctx.table_id(), cols, recs, f"Every workload whose winner differs between two {side_word(ctx, True)} "
                                             "(blank cost: a's winner is unavailable on b)")


def _by(ctx: Context) -> str:
    by = ctx.data.portability.by
    return "" if by == "label" else f", sides by {by}"


def applies(data) -> bool:
    return not data.df.empty


def body(ctx: Context) -> str:
    a = ctx.data.portability
    floor = noise_floor_lines(a)
    one, many = side_word(ctx), side_word(ctx, True)
    how = "(one side per store)" if a.by == "label" else f"<code>--by {a.by}</code> (one side per {one})"
    return (f"<p>From the analysis behind <code>attnbench analyze</code> {how}. Does the backend that won on one "
            f"{one} stay the right choice on another, and what does it cost when it does not?</p>\n"
            + _honesty(ctx) + "<section>\n<h2>Separated winners</h2>\n" + _separated(ctx) + "</section>\n"
            + "<section>\n<h2>Winner changes</h2>\n" + (_pairs(ctx) or note(f"No workload was measured in two "
                                                                             f"{many}: no pair to compare."))
            + "".join(note(x) for x in floor) + "</section>\n<section>\n<h2>Transfer cost</h2>\n"
            + (_transfer(ctx) or note(f"No workload was measured in two {many}: nothing to transfer."))
            + _changes(ctx) + "</section>\n")

