"""`analyze` rendered: the terminal summary and the Markdown report, each an ordered map from a section's
name to what it shows of it (a section without an entry shows only in the JSON)."""
from __future__ import annotations

import json

from .analysis_text import (PAIR_NOTE, changes_table, correctness_table, dispatch_table, efficiency_table,
                            noise_floor_lines, outcomes_table, pairs_table, side_lines, sources_lines, transfer_table,
                            winners_table)
from .texttable import to_markdown, to_rich

MAX_CHANGES = 40  # changed workloads listed in the Markdown report; the JSON holds them all
SHORT_PAIRS = 6  # above this many ordered pairs the terminal shows transfer over all modes only
TRANSFER_NOTE = ("n: matched workloads; unav: the source's winner has no OK row on the target; sep: those whose "
                 "source winner is separated")


def _transfer(a) -> list:
    if not a.transfer.rows:
        return ["no workload was measured on two sides: nothing to transfer"]
    short = len(a.transfer.pairs()) > SHORT_PAIRS
    return [to_rich(transfer_table(a, all_modes_only=short)), TRANSFER_NOTE]


def _pairs(a) -> list:
    shown = [to_rich(pairs_table(a)), PAIR_NOTE] if a.transfer.rows else []
    return shown + noise_floor_lines(a)


TERMINAL = {"sources": lambda a: ["\n".join(sources_lines(a))],  # with host_pace's note
            "winners": lambda a: [to_rich(winners_table(a))],
            "transfer": _transfer,
            "pairs": _pairs}
MARKDOWN = {"sources": lambda a: ["# attnbench analyze", "", *(f"- {x.strip()}" for x in sources_lines(a)), ""],
            "winners": lambda a: [to_markdown(winners_table(a))],
            "transfer": lambda a: [to_markdown(transfer_table(a))],
            "pairs": lambda a: [to_markdown(pairs_table(a)), PAIR_NOTE + "\n",
                                *(f"{x}\n" for x in noise_floor_lines(a)), to_markdown(changes_table(a, MAX_CHANGES))],
            "outcomes": lambda a: [to_markdown(outcomes_table(a))],
            "dispatch": lambda a: [to_markdown(dispatch_table(a))],
            "correctness": lambda a: [to_markdown(correctness_table(a))],
            "efficiency": lambda a: [to_markdown(efficiency_table(a))]}


def terminal(a) -> list:
    """What `analyze` prints: stores, separated fractions, transfer costs, winner changes, the noise
    floor, then a line per side (outcomes, correctness, efficiency); every table is in --json and --md."""
    parts: list = []
    for name in a.results:
        parts.extend(TERMINAL[name](a) if name in TERMINAL else [])
    return parts + side_lines(a)


def markdown(a) -> str:
    """The readable report (--md): every summary table, the changed winners, and the side tables."""
    out: list[str] = []
    for name in a.results:
        out.extend(MARKDOWN[name](a) if name in MARKDOWN else [])
    return "\n".join(out)


def as_json(a) -> str:
    """The --json document: every section's to_json() under its name, after `by`."""
    return json.dumps(a.to_json(), indent=1, default=str) + "\n"
