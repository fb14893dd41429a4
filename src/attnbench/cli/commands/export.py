"""`attnbench export`: a table of a store (attempts, runs or model rows) as jsonl, csv or parquet."""
from __future__ import annotations

from pathlib import Path

from .. import console
from ..usage import DEFAULT_DB, UsageError

NAME = "export"
HELP = ("write the attempts (or runs) table to jsonl, csv or parquet; a name ending in .gz is gzip-compressed "
        "(jsonl, csv)")
DESCRIPTION = ("Write a table of a store to a file, every column of docs/schema.md, raw samples included, so a "
               "result stands alone. The file appears complete or not at all; an export never overwrites a store "
               "or the -wal, -shm or -journal file beside one. Rows whose text is damaged (not UTF-8, not JSON in a "
               "JSON column, text in a number column) are left out and named, and the exit code is then 1.")


def add_arguments(x) -> None:
    x.add_argument("--db", default=DEFAULT_DB, help=f"the store to read (default: ./{DEFAULT_DB})")
    x.add_argument("--format", choices=("jsonl", "csv", "parquet"), help="default: from the --out name")
    x.add_argument("--out", required=True, metavar="FILE",
                   help="the file to write, e.g. results.jsonl.gz (its suffix gives the format)")
    x.add_argument("--table", choices=("attempts", "runs", "model_rows", "counters"), default="attempts",
                   help="runs: one row per invocation with its provenance (device, toolkit, ceilings); "
                        "model_rows: the rows of `attnbench model`; counters: the hardware counters of attempts "
                        "(run --counters, explain)")
    x.add_argument("--tag", dest="tags", action="append", metavar="TAG",
                   help="keep only rows (attempts, or runs with --table runs) whose sweep tag is TAG; repeatable "
                        "(any of them); a tag no row of the table has is an error and nothing is written")


def run(args) -> int:
    from ...store.db import Store
    from ...store.io import export, format_of

    outp = Path(args.out)
    if not outp.parent.exists():
        raise UsageError(f"directory of --out does not exist: {outp.parent}")
    fmt, _ = format_of(outp, args.format)  # a bad name is reported before the store is opened
    if args.table == "counters" and args.tags:  # its rows are keyed by attempt: they carry no tag
        raise UsageError("--tag does not apply to --table counters (export every counters row)")
    store = Store(args.db, readonly=True)
    damaged: list = []  # rows whose text is damaged: left out, named below
    try:
        n = export(store, fmt, outp, table=args.table, tags=args.tags, damaged=damaged)
    finally:
        store.close()
    console.err.print(f"wrote {n} {args.table} to {outp}", markup=False)
    if damaged:
        from ...store.damage import where

        rows = len({d.rowid for d in damaged})
        console.err.print(f"attnbench: warning: {rows} {args.table} row(s) of {args.db} left out, their text damaged: "
                          f"{where(args.table, damaged)}; the export holds every other row", markup=False,
                          highlight=False, soft_wrap=True)
        return 1
    return 0
