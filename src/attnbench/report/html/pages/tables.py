"""The tables page: outcomes per backend and status, dispatch checks, correctness against float64, the
winners' efficiency, and every attempt that did not end OK with its reason."""
from __future__ import annotations

from dataclasses import asdict

from ....status import ORDER
from ...texttable import workload_text
from ..context import Context
from ..markup import REASON_CHARS, Col, note, table

FILE, TITLE = "tables.html", "Correctness, dispatch, outcomes"
FAILURE_COLS = ("label", "backend", "status", "reason", "repeat", "mode", "batch", "q_len", "kv_len", "q_heads",
                "kv_heads", "head_dim", "dtype", "causal", "launch", "l2", "device_name")


def _outcomes(ctx: Context) -> str:
    rows = ctx.data.analysis.outcomes.rows
    statuses = [s for s in ORDER if any(s in r for r in rows)]
    cols = [Col("side", "store"), Col("device_name", "device"), Col("backend", "backend"),
            *[Col(s, s, numeric=True) for s in statuses], Col("attempts", "attempts", numeric=True)]
    return table(ctx.table_id(), cols, rows, "Outcomes: attempts per store, device, backend and status (every "
                                             "attempt, OK or not)")


def _dispatch(ctx: Context) -> str:
    rows = [{**asdict(r), "families": ", ".join(r.families)} for r in ctx.data.analysis.dispatch.rows]
    p = lambda v: f"{v:.1f}%"  # noqa: E731
    cols = [Col("side", "store"), Col("backend", "backend"),
            Col("reached", "reached the probe", numeric=True, title="attempts that got as far as the dispatch probe"),
            Col("families", "kernel families seen", wrap=True),
            Col("mismatch_pct", "DISPATCH_MISMATCH", p, numeric=True),
            Col("probed_pct", "probed", p, numeric=True, title="the rest: the profiler failed, or imported rows"),
            # issue 42.2: OK rows of a backend that declares no kernel families on the device
            Col("unchecked", "OK, dispatch unchecked", numeric=True,
                title="OK rows no dispatch check stands behind: the backend declares no kernel families there")]
    return table(ctx.table_id(), cols, rows, "Dispatch: the kernel families each backend was seen to run")


def _correctness(ctx: Context) -> str:
    rows = [{**asdict(r), "checked_of": f"{r.checked}/{r.rows}"} for r in ctx.data.analysis.correctness.rows]
    cols = [Col("side", "store"), Col("backend", "backend"), Col("dtype", "dtype"),
            Col("checked_of", "checked / OK rows"),
            Col("max_abs_err", "max abs err", lambda v: f"{v:.2e}", numeric=True),
            Col("min_cosine", "min cosine", lambda v: f"{v:.6f}", numeric=True),
            Col("max_err_ratio", "max error ratio", lambda v: f"{v:.2f}", numeric=True,
                title="error over the same-dtype unfused reference's error; the check passes at or under --tol"),
            Col("median_err_ratio", "median error ratio", lambda v: f"{v:.2f}", numeric=True)]
    return table(ctx.table_id(), cols, rows, "Correctness of OK rows against float64 (output, and gradients for "
                                             "fwd+bwd)")


def _efficiency(ctx: Context) -> str:
    rows = [asdict(s) for s in ctx.data.analysis.efficiency.summary]
    p = lambda v: f"{v:.0f}%"  # noqa: E731
    cols = [Col("side", "store"), Col("mode", "mode"), Col("winners", "winners", numeric=True),
            Col("metric", "metric"), Col("with_ceiling", "with a ceiling", numeric=True),
            Col("median_pct_ceiling", "median % of ceiling", p, numeric=True),
            Col("median_roofline_pct", "median % of roofline", p, numeric=True),
            Col("memory_bound", "memory-bound", numeric=True)]
    return table(ctx.table_id(), cols, rows, "Efficiency of the winners: % of the measured ceiling, and of the "
                                             "roofline from the FLOP and byte models")


def _failures(ctx: Context) -> str:
    df = ctx.data.df
    failed = df[df["status"] != "OK"]
    rows = []
    repro = _repro(ctx, failed)
    for r, cmd in zip(failed[[c for c in FAILURE_COLS if c in failed.columns]].to_dict(orient="records"), repro):
        rows.append({**r, "workload": workload_text(r), "repro": cmd})
    cols = [Col("label", "store"), Col("backend", "backend"), Col("status", "status"), Col("workload", "workload"),
            Col("repeat", "repeat", numeric=True), Col("reason", "reason", wrap=True, cut=REASON_CHARS),
            Col("repro", "re-measure", cut=24, title="the attnbench run command and YAML grid block that re-measure "
                                                     "the attempt, with the versions it ran under (show --repro)")]
    return table(ctx.table_id(), cols, rows, f"Every attempt that did not end OK ({len(rows):,}), with the reason "
                                             "its backend or the runner gave (long reasons cut; hover for the whole)")


def _repro(ctx: Context, rows) -> list[str]:
    """Per row, its repro (issue 42.4; analysis/repro.py): the command, the YAML block and the versions, as text."""
    from ....analysis.repro import repro_frame

    runs = [r for label_runs in ctx.data.runs.values() for r in label_runs]
    frame = repro_frame(rows, runs) if len(rows) else None
    if frame is None:
        return []
    return [f"{c}\n{y}\nran under: {v}" for c, y, v in zip(frame["command"], frame["yaml"], frame["versions"])]


def applies(data) -> bool:
    return not data.df.empty


def body(ctx: Context) -> str:
    return (note("Every table sorts on a click of its header and filters on text typed above it.")
            + "<section>\n<h2>Outcomes</h2>\n" + _outcomes(ctx) + "</section>\n"
            + "<section>\n<h2>Dispatch</h2>\n" + _dispatch(ctx) + "</section>\n"
            + "<section>\n<h2>Correctness</h2>\n" + _correctness(ctx) + "</section>\n"
            + "<section>\n<h2>Efficiency of the winners</h2>\n" + _efficiency(ctx) + "</section>\n"
            + "<section>\n<h2>Attempts that did not end OK</h2>\n" + _failures(ctx) + "</section>\n")
