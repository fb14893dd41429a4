"""The ladder page (issue 41): each rung of the project's Triton FlashAttention ladder beside sdpa-cudnn, fa4 and
sdpa-flash measured in the same run, its target ratio and, with counters, its mechanism (analysis/sections/ladder.py)."""
from __future__ import annotations

from dataclasses import asdict

from ..context import Context
from ..markup import Col, note, table

FILE, TITLE = "ladder.html", "Ladder"
RULE = ("Each rung is a kernel of this project (backends/triton_kernels/), written from the FlashAttention papers and "
        "passed through the same gates as every backend. Ratio: the time of what it is measured against over the "
        "rung's (above 1: the rung is faster), each backend's time as analyze's (the median of its repeat medians), "
        "accuracy references left out: the best of sdpa-cudnn and fa4 for prefill and training, the best "
        "other decode backend for decode (modelled KV bytes per second), the best 16-bit rung for fp8. Targets are "
        "issue 41's. DRAM, tensor and SFU columns come from the store's counters (run --counters) when it has them. "
        "Notes and predictions: docs/evidence/triton-ladder.md.")


def applies(data) -> bool:
    """Only when some store holds a row of the triton family."""
    return getattr(getattr(data, "analysis", None), "ladder", None) is not None


def body(ctx: Context) -> str:
    rows = []
    for r in ctx.data.analysis.ladder.rungs:
        d = asdict(r)
        d["met"] = "" if r.met is None else ("met" if r.met else "not met")
        rows.append(d)
    num = lambda f: (lambda v: "" if v is None else format(v, f))  # noqa: E731
    cols = [Col("side", "store"), Col("workload", "workload", wrap=True), Col("rung", "rung"),
            Col("value", "rung", num(".0f"), numeric=True, title="TFLOP/s (decode: modelled GB/s)"),
            Col("against", "against"), Col("against_value", "it", num(".0f"), numeric=True),
            Col("ratio", "ratio", num(".2f"), numeric=True), Col("target", "target", num(".2f"), numeric=True),
            Col("met", "target met"), Col("sdpa_flash", "sdpa-flash", num(".0f"), numeric=True),
            Col("dram_gb", "DRAM GB", num(".2f"), numeric=True, title="DRAM bytes read + written by one call"),
            Col("tensor_pct", "tensor %", num(".0f"), numeric=True),
            Col("xu_pct", "SFU %", num(".0f"), numeric=True),
            Col("kernel_config", "config", wrap=True)]
    return (note(RULE) + "<section>\n<h2>Rungs against the vendors</h2>\n"
            + table(ctx.table_id(), cols, rows, "Each rung per workload, same store") + "</section>\n")
