"""`attnbench compare`: regressions of NEW against BASE per workload and backend (exit 3 if any)."""
from __future__ import annotations

import json
import math

from .. import console
from ..files import writable, write_whole
from ..usage import UsageError

NAME = "compare"
HELP = "regressions of NEW against BASE per workload and backend (exit 3 if any)"
DESCRIPTION = ("Per device model × workload × backend measured OK in both stores: NEW's time over BASE's with a "
               "95% bootstrap interval. A row regressed when the ratio is at least --threshold and the interval's "
               "lower end is above its class's between-run floor (graph-launched 1.05, eager 1.08, compile-based "
               "under 50 µs 1.35: what reruns of the same code move; docs/method/regression.md); host-bound, "
               "clock-low and <3-repeat rows are listed, not gated. An OK row of BASE that is no longer OK in NEW "
               "is lost. Exit 0: nothing regressed or lost; 3: something did; 2: bad input.")
REGRESSED = 3  # the exit code when something regressed: CI gates on it


def add_arguments(c) -> None:
    c.add_argument("base", metavar="BASE", help="the store (or export) measured before")
    c.add_argument("new", metavar="NEW", help="the store (or export) measured after")
    c.add_argument("--threshold", type=float, default=1.05,
                   help="slowdown ratio that counts, finite and above 1 (default 1.05); a line must also clear its "
                        "class's between-run floor")
    c.add_argument("--json", metavar="FILE", help="write every compared row as JSON")


def run(args) -> int:
    from ...analysis.regress import compare, verdict
    from ...report import compare as page
    from ...store import sources

    # inf would pass "above 1" and gate nothing: exit 0 whatever NEW holds
    if not (math.isfinite(args.threshold) and args.threshold > 1.0):
        raise UsageError(f"--threshold must be above 1 and finite (a slowdown ratio, e.g. 1.05), "
                         f"not {args.threshold:g}")
    json_out = writable(args.json, "--json", (args.base, args.new))
    df = sources.load([f"base={args.base}", f"new={args.new}"]).attempts
    rows = compare(df[df["label"] == "base"], df[df["label"] == "new"], args.threshold)
    summary = verdict(rows)
    for part in page.terminal(rows, summary, args.base, args.new, args.threshold):
        # lines of text name paths and backends (data, never markup); the tables escape their own cells
        console.out.print(part, highlight=False, markup=False if isinstance(part, str) else None)
    if json_out:
        write_whole(json_out, json.dumps({"summary": summary, "rows": rows}, indent=1, default=str) + "\n")
        console.err.print(f"wrote {json_out}", markup=False, highlight=False)
    return REGRESSED if summary["regressed"] or summary["lost"] else 0
