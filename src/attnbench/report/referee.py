"""`attnbench referee`'s output: published figures against ours as a table of text cells (80 columns) and as JSON."""
from __future__ import annotations

from ..analysis.frames import json_ready
from ..analysis.referee.compare import CANNOT, CONVENTION_TOLERANCE, Comparison
from ..analysis.referee.published import Sheet
from .texttable import TextTable

KERNEL_GAP = 1.10  # a call timed 10 % above its kernels' device time is noted: gaps or host work, not kernel
SHORT_UNIT = {"TFLOP/s": "TF/s", "GB/s": "GB/s", "ms": "ms"}


def _fig(v: float | None) -> str:
    if v is None or v != v:
        return "-"
    return f"{v:.0f}" if v >= 100 else f"{v:.3g}" if v >= 0.01 else f"{v:.1e}"


def refusals(sheet: Sheet) -> list[str]:
    """One line per published row that is not re-measured: its row, backend, passes and why."""
    seen: dict[tuple, list[str]] = {}
    for r in sheet.rows:
        if r.refusal:
            seen.setdefault((r.row, r.harness_backend, r.refusal), []).append(r.passname)
    return [f"row {row} {name} {'/'.join(passes)}: {why}" for (row, name, why), passes in seen.items()]


def table(comparisons: list[Comparison]) -> tuple[TextTable, list[str]]:
    """The comparisons as rows (row, pass, backend, published, ours with its p5-p95 interval, ratio, verdict),
    and the numbered notes the verdict column points to: why a row cannot be compared, a publisher's FLOP or
    byte count that differs from attnbench's, the toolkit, clock and power facts."""
    t = TextTable("", ["row pass", "backend", "published", "ours [p5-p95]", "ratio", "verdict"],
                  right=frozenset({2, 3, 4}))
    notes: list[str] = []
    stars: list[str] = []  # a publisher's FLOP or byte count, marked * beside the figure

    def note(text: str) -> str:
        if text not in notes:
            notes.append(text)
        return f"[{notes.index(text) + 1}]"

    for c in comparisons:
        p = c.published
        unit = SHORT_UNIT[c.unit]
        mark = ""
        if c.amount_ratio is not None and abs(c.amount_ratio - 1) > CONVENTION_TOLERANCE:
            mark = "*"
            what = "bytes" if c.unit == "GB/s" else "FLOPs"
            stars.append(f"* row {p.row} {p.passname}: published {_fig(p.figure)} {p.unit} counts "
                         f"{c.amount_ratio:.3f}x attnbench's {what} ({p.convention}); shown in attnbench's model, "
                         "from the published time")
        published = f"{_fig(c.published_figure)}{mark} {unit}"
        if c.status == "OK":
            ours = f"{_fig(c.ours_figure)} [{_fig(c.ours_figure_lo)}-{_fig(c.ours_figure_hi)}]"
            ratio = f"{c.ratio:.2f}x" if c.ratio >= 0.1 else f"{c.ratio:.1e}x"
        else:
            ours, ratio = (c.status or "not run"), "-"
        ref = note(c.why if c.status == "OK" else f"{c.backend}: {c.why}") if c.verdict == CANNOT else ""
        if c.status == "OK":
            ref += "".join(note(d) for d in c.differences)
            if c.held_back:
                ref += note(f"{c.backend} row {p.row} {p.passname}: {c.held_back}")
            if c.kernel_ms and c.ours_ms / c.kernel_ms > KERNEL_GAP:
                ref += note(f"{c.backend} row {p.row} {p.passname}: our call's kernels take {_fig(c.kernel_ms)} ms "
                            f"of its {_fig(c.ours_ms)} ms (device time, profiler), {p.time_ms / c.kernel_ms:.2f}x "
                            "against the published time: the rest is launch gaps or host work")
        t.add(f"{p.row} {p.passname}", c.backend, published, ours, ratio, f"{c.verdict} {ref}".strip())
    return t, notes + [s for i, s in enumerate(stars) if s not in stars[:i]]


def to_rich(t: TextTable):
    """The table for a terminal: paddings collapsed and the verdict never folded, so 80 columns hold a row."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    out = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True, show_edge=False)
    for i, h in enumerate(t.headers):
        last = i == len(t.headers) - 1
        out.add_column(escape(h), justify="right" if i in t.right else "left", no_wrap=last,
                       overflow="fold")
    for r in t.rows:
        out.add_row(*(escape(c) for c in r))
    return out


def conditions(comparisons: list[Comparison]) -> str | None:
    """Our SM clock and power over the compared rows, as a range (the publishers state neither)."""
    clocks = [c.clock_mhz for c in comparisons if c.clock_mhz]
    power = [c.power_w for c in comparisons if c.power_w]
    parts = [f"SM clock {min(clocks):.0f}-{max(clocks):.0f} MHz" if clocks else None,
             f"board power {min(power):.0f}-{max(power):.0f} W" if power else None]
    said = ", ".join(x for x in parts if x)
    return f"here, while timed: {said} (the publisher states neither)" if said else None


def legend(comparisons: list[Comparison]) -> list[str]:
    """Each published row's workload once (its mode per pass), as attnbench labels it."""
    out: dict[int, str] = {}
    for c in comparisons:
        w = c.published.workload
        out.setdefault(c.published.row, f"row {c.published.row}: {w.label().split(' ', 1)[1]}")
    return list(out.values())


def to_json(sheet: Sheet, comparisons: list[Comparison], source: str) -> dict:
    """Everything the table shows, and the values behind it, for machines."""
    rows = []
    for c in comparisons:
        p = c.published
        rows.append({"row": p.row, "pass": p.passname, "harness_backend": p.harness_backend, "backend": c.backend,
                     "workload": p.workload.to_dict(), "workload_key": p.workload.key(),
                     "published": {"figure": p.figure, "unit": p.unit, "time_ms": p.time_ms, "spread_ms": p.spread_ms,
                                   "gpu": p.gpu, "toolkit": p.toolkit, "timing": p.timing,
                                   "convention": p.convention, "amount": p.publisher_amount,
                                   "amount_over_attnbench": c.amount_ratio, "in_attnbench_model": c.published_figure},
                     "ours": {"status": c.status, "reason": c.reason, "time_ms": c.ours_ms, "p5_ms": c.ours_lo_ms,
                              "p95_ms": c.ours_hi_ms, "repeats": c.repeats, "device": c.device,
                              "kernel_ms": c.kernel_ms,
                              "figure": c.ours_figure, "figure_lo": c.ours_figure_lo, "figure_hi": c.ours_figure_hi,
                              "unit": c.unit},
                     "ratio": c.ratio, "verdict": c.verdict, "why": c.why, "differences": c.differences,
                     "clock_mhz": c.clock_mhz, "power_w": c.power_w, "held_back": c.held_back})
    return json_ready({"source": source, "format": sheet.fmt, "notes": sheet.notes, "refused": refusals(sheet),
                       "comparisons": rows})
