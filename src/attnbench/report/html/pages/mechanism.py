"""The mechanism page: why a kernel is fast or slow, from hardware counters (analysis/sections/mechanism.py):
bound classes per backend and launch, measured over modelled bytes, and each lead in counter terms."""
from __future__ import annotations

from dataclasses import asdict

from ..context import Context
from ..markup import Col, note, table

FILE, TITLE = "mechanism.html", "Mechanism"
RULE = ("Bound: the unit nearest its peak sustained rate when at least 60 % of it (memory: DRAM throughput; tensor: "
        "tensor pipe; sfu: the exponent/reciprocal pipe; shared: shared-memory wavefronts), latency when none is; "
        "host when the eager row is host-bound. Counters come from one call of the step replayed under Nsight "
        "Compute after timing, never from a timed call. Bytes ×: DRAM bytes read and written over the byte model; "
        "above 1, re-reads. Thresholds and evidence: methodology, counters.")


def applies(data) -> bool:
    """Only when some store holds counters (run --counters, explain)."""
    m = getattr(getattr(data, "analysis", None), "mechanism", None)
    return m is not None and bool(m.classes)


def body(ctx: Context) -> str:
    m = ctx.data.analysis.mechanism
    num = lambda f: (lambda v: "" if v is None else format(v, f))  # noqa: E731
    classes = [{**asdict(c), "bounds": ", ".join(f"{k} {v}" for k, v in c.bounds.items()) or "-"} for c in m.classes]
    cols = [Col("side", "store"), Col("backend", "backend"), Col("mode", "mode"), Col("launch", "launch"),
            Col("rows", "rows with counters", numeric=True), Col("bounds", "bound: rows", wrap=True),
            Col("median_bytes_ratio", "bytes ×", num(".2f"), numeric=True,
                title="measured DRAM bytes (read + written) over the byte model, median over the rows"),
            Col("unreadable", "unread", numeric=True, title="rows whose counters could not be read (reason stored)"),
            Col("median_cost_s", "phase s", num(".1f"), numeric=True, title="the counters phase's wall per attempt")]
    out = note(RULE) + "<section>\n<h2>Bound per backend and launch</h2>\n"
    out += table(ctx.table_id(), cols, classes, "OK rows with counters, by bound") + "</section>\n"
    leads = [asdict(x) for x in m.leads]
    if leads:
        lcols = [Col("side", "store"), Col("workload", "workload", wrap=True), Col("winner", "winner"),
                 Col("runner_up", "runner-up"), Col("ratio", "×", num(".2f"), numeric=True),
                 Col("why", "the counter that differs most", wrap=True), Col("winner_bound", "winner's bound"),
                 Col("runner_up_bound", "runner-up's bound")]
        out += "<section>\n<h2>Why the winner leads</h2>\n"
        out += table(ctx.table_id(), lcols, leads, "Each contest's winner and runner-up where either has counters") + "</section>\n"
    return out
