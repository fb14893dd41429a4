"""The `mechanism` section of `analyze` as text: bound classes per backend and launch, and each lead in counter
terms (analysis/sections/mechanism.py)."""
from __future__ import annotations

from .analysis_text import MODE_SHORT
from .texttable import TextTable

NOTE = ("bound: the unit nearest its peak when at least 60 % (memory, tensor, sfu, shared), else latency; host when "
        "the eager row is host-bound; bytes ×: measured DRAM bytes over the byte model (docs/method/counters.md)")


def _num(v, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def classes_table(a) -> TextTable:
    t = TextTable("Mechanism: bound of the OK rows with counters", ["side", "backend", "mode", "launch", "bounds",
                                                                    "bytes ×", "unread", "cost s"],
                  right=frozenset({5, 6, 7}))
    for c in a.mechanism.classes:
        bounds = ", ".join(f"{k} {v}" for k, v in c.bounds.items()) or "-"
        t.add(c.side, c.backend, MODE_SHORT.get(c.mode, c.mode), c.launch, bounds, _num(c.median_bytes_ratio, ".2f"), c.unreadable,
              _num(c.median_cost_s, ".1f"))
    return t


def lead_lines(a) -> list[str]:
    """One line per lead whose winner or runner-up has counters (a bound '-': that one has none)."""
    return [f"{x.workload} ({x.side}): {x.winner} {x.ratio:.2f}x ahead of {x.runner_up}: {x.why} "
            f"({x.winner_bound or '-'} vs {x.runner_up_bound or '-'})" for x in a.mechanism.leads]


def terminal(a, names=None) -> list:
    from .texttable import to_rich

    if a.mechanism is None:
        return []
    return [to_rich(classes_table(a)), NOTE, *lead_lines(a)]


def markdown(a) -> list[str]:
    from .texttable import to_markdown

    if a.mechanism is None:
        return []
    return [to_markdown(classes_table(a)), NOTE + "\n", *(f"- {x}" for x in lead_lines(a)), ""]
