"""`attnbench analyze`: winners, their separation, transfer costs and winner changes across stores."""
from __future__ import annotations

from ...analysis.sides import BY_CHOICES
from .. import console
from ..files import writable, write_whole
from ..usage import UsageError

NAME = "analyze"
HELP = "winners, their separation, transfer costs and winner changes across stores"
DESCRIPTION = ("Read several stores or exports side by side, each under its own label (LABEL=STORE, default: the "
               "file's name before its first dot), and answer whether a winner's lead is real and whether the choice "
               "survives another store, GPU, toolkit, launch mode or L2 state (--by), and what it costs when it does "
               "not.")


def add_arguments(a) -> None:
    a.add_argument("stores", nargs="+", metavar="STORE", help="an attnbench store or export, or LABEL=STORE")
    a.add_argument("--by", choices=BY_CHOICES, default="label", metavar="COLUMN",
                   help="the axis compared across: " + ", ".join(BY_CHOICES) + " (default label: one side per "
                        "store; launch or l2: the same store's workloads that differ only there)")
    a.add_argument("--json", metavar="FILE", help="write every section (winners, transfer, pairs, outcomes, "
                                                  "dispatch, correctness, efficiency) as JSON")
    a.add_argument("--md", metavar="FILE", help="write a readable Markdown report")
    a.add_argument("--all", action="store_true", help="include accuracy references in the contest")


def run(args) -> int:
    from ...analysis import analyze
    from ...report import analyze as page
    from ...store import sources

    reads = [s.path for s in sources.parse(args.stores)]
    json_out, md_out = writable(args.json, "--json", reads), writable(args.md, "--md", reads)
    data = sources.read(sources.parse(args.stores))
    if data.attempts.empty:
        raise UsageError("the stores hold no attempts")
    result = analyze.of(data, by=args.by, include_references=args.all)
    for part in page.terminal(result, width=console.out.width):
        console.out.print(part, highlight=False)
    if json_out:
        write_whole(json_out, page.as_json(result))
        console.err.print(f"wrote {json_out}", markup=False)
    if md_out:
        write_whole(md_out, page.markdown(result))
        console.err.print(f"wrote {md_out}", markup=False)
    return 0
