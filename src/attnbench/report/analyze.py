"""`analyze` rendered: the terminal summary and the Markdown report, each an ordered map from a section's
name to what it shows of it (a section without an entry shows only in the JSON)."""
from __future__ import annotations

import io
import json
from string import ascii_uppercase

from rich.console import Console
from rich.text import Text

from ..analysis.sections.winners import ALL_SIDES
from .analysis_text import (PAIR_NOTE, changes_table, correctness_table, dispatch_table, efficiency_table,
                            noise_floor_lines, off_roofline_lines, outcomes_table, pairs_table, side_lines,
                            sources_lines, transfer_table, winners_table)
from .mechanism_text import markdown as mechanism_markdown, terminal as mechanism_terminal
from .texttable import to_markdown, to_rich

MAX_CHANGES = 40  # changed workloads listed in the Markdown report; the JSON holds them all
SHORT_PAIRS = 6  # above this many ordered pairs the terminal shows transfer over all modes only
TRANSFER_NOTE = ("n: matched workloads; unav: the source's winner has no OK row on the target; sep: those whose "
                 "source winner is separated")


def _transfer(a, names: dict) -> list:
    if not a.transfer.rows:
        return ["no workload was measured on two sides: nothing to transfer"]
    short = len(a.transfer.pairs()) > SHORT_PAIRS
    return [to_rich(transfer_table(a, all_modes_only=short, names=names)), TRANSFER_NOTE]


def _pairs(a, names: dict) -> list:
    shown = [to_rich(pairs_table(a, names)), PAIR_NOTE] if a.transfer.rows else []
    return shown + noise_floor_lines(a)


TERMINAL = {"sources": lambda a, names: ["\n".join(sources_lines(a, names))],  # with host_pace's note
            "winners": lambda a, names: [to_rich(winners_table(a, names))],
            "transfer": _transfer,
            "pairs": _pairs,
            "efficiency": lambda a, names: off_roofline_lines(a),  # issue 39.4-39.5
            "mechanism": mechanism_terminal}  # issue 39


def _sides(a) -> list[str]:
    """Every side the terminal's tables name, stores in argument order first."""
    seen = [s.label for s in a.sources.rows] if a.by == "label" else []
    seen += [s.side for s in a.winners.separated]
    seen += [x for r in a.transfer.rows for x in (r.source, r.target)]
    seen += [x for r in a.pairs.rows for x in (r.a, r.b)]
    return [x for x in dict.fromkeys(str(x) for x in seen) if x != ALL_SIDES]  # "(all)" is short and says itself


def _folds(tables, sides: set[str], width: int) -> bool:
    """Whether rich, laying the tables out in `width` columns, folds some side's name inside its cell."""
    con = Console(width=width, file=io.StringIO(), color_system=None)
    for t in tables:
        con.file = io.StringIO()
        con.print(to_rich(t))
        shown = con.file.getvalue()
        if any(c not in shown for row in t.rows for c in row if c in sides):
            return True
    return False


def side_names(a, width: int | None) -> dict:
    """{side: letter} when a table with every side's whole name would fold one inside its cell at `width`
    (an 80-column CI log: store labels like pair-2026-11-30-cuda0 read "pair-2026-11-" / "30-cuda0"),
    else {} (names whole)."""
    if width is None:
        return {}
    tables = [winners_table(a), pairs_table(a)] + ([transfer_table(a, len(a.transfer.pairs()) > SHORT_PAIRS)]
                                                   if a.transfer.rows else [])
    sides = _sides(a)
    if not _folds(tables, set(sides), width):
        return {}
    return {s: (ascii_uppercase[i] if len(sides) <= len(ascii_uppercase) else f"S{i + 1}") for i, s in enumerate(sides)}


MARKDOWN = {"sources": lambda a: ["# attnbench analyze", "", *(f"- {x.strip()}" for x in sources_lines(a)), ""],
            "winners": lambda a: [to_markdown(winners_table(a))],
            "transfer": lambda a: [to_markdown(transfer_table(a))],
            "pairs": lambda a: [to_markdown(pairs_table(a)), PAIR_NOTE + "\n",
                                *(f"{x}\n" for x in noise_floor_lines(a)), to_markdown(changes_table(a, MAX_CHANGES))],
            "outcomes": lambda a: [to_markdown(outcomes_table(a))],
            "dispatch": lambda a: [to_markdown(dispatch_table(a))],
            "correctness": lambda a: [to_markdown(correctness_table(a))],
            "efficiency": lambda a: [to_markdown(efficiency_table(a)), *(f"{x}\n" for x in off_roofline_lines(a))],
            "mechanism": mechanism_markdown}  # issue 39


def terminal(a, width: int | None = None) -> list:
    """What `analyze` prints: stores, separated fractions, transfer costs, winner changes, the noise
    floor, then a line per side (outcomes, correctness, efficiency); every table is in --json and --md.
    Text parts are rich Text (a store's or backend's name is never read as markup); tables that would
    fold a side's name at `width` name the sides by letter, said in the sources section."""
    names = side_names(a, width)
    parts: list = []
    for name in a.results:
        parts.extend(TERMINAL[name](a, names) if name in TERMINAL else [])
    return [Text(p) if isinstance(p, str) else p for p in parts + side_lines(a)]


def markdown(a) -> str:
    """The readable report (--md): every summary table, the changed winners, and the side tables."""
    out: list[str] = []
    for name in a.results:
        out.extend(MARKDOWN[name](a) if name in MARKDOWN else [])
    return "\n".join(out)


def as_json(a) -> str:
    """The --json document: every section's to_json() under its name, after `by`."""
    return json.dumps(a.to_json(), indent=1, default=str) + "\n"
