"""`attnbench backends`: every backend a run could use, whether it is usable here and why not."""
from __future__ import annotations

import json

from rich.markup import escape
from rich.table import Table

from .. import console

NAME = "backends"
HELP = "list backends: family, role, availability and version"
DESCRIPTION = ("List every backend a run could use (built-ins, entry-point plugins and --plugin files): its "
               "family, role, whether it is usable here and why not, its library version, devices and isolation.")


def add_arguments(b) -> None:
    b.add_argument("--plugin", action="append", default=[], metavar="FILE.py",
                   help="also load backends from this Python file; repeatable")
    b.add_argument("--json", action="store_true",
                   help="print JSON instead of a table (with capabilities and declared kernel families)")


def run(args) -> int:
    from ...backends.registry import all_backends

    out = console.out
    rows = []
    for b in all_backends(args.plugin):
        why = b.availability()
        rows.append({**b.describe(), "available": why is None, "why_not": why, "version": b.version()})
    if args.json:
        out.print_json(json.dumps(rows))
        return 0
    # Narrow enough for 80 columns: short cells that never wrap, the description last (it wraps
    # without borders between its lines), and each reason for unavailability on lines of its own.
    from rich import box

    t = Table(title="attnbench backends", box=box.SIMPLE_HEAD)
    for c in ("name", "available", "version", "devices"):
        t.add_column(c, no_wrap=True)
    t.add_column("description", overflow="fold")
    for r in rows:
        r = {k: escape(v) if isinstance(v, str) else v for k, v in r.items()}  # plugin and library text
        t.add_row(r["name"], "yes" if r["available"] else "no", str(r["version"] or "-"), ",".join(r["devices"]),
                  r["description"])
    out.print(t)
    missing = [r for r in rows if not r["available"]]
    if missing:
        out.print("Not available here:")
        for r in missing:
            out.print(f"  {escape(r['name'])}: {escape(str(r['why_not']))}")
    return 0
