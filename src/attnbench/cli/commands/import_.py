"""`attnbench import`: an export (or another tool's results table) read back into a store."""
from __future__ import annotations

from .. import console
from ..usage import DEFAULT_DB, UsageError

NAME = "import"
HELP = "read an export back into a store (existing attempts and runs are kept)"
DESCRIPTION = ("Add the rows of an export to a store (created if absent). Every row is validated first (statuses, "
               "JSON columns, what each status must carry, and what the values mean: samples that are positive "
               "times, a median that is theirs, a workload attnbench can measure whose key is its fields'); one bad "
               "row is named by row and column, and nothing is written. Attempts already in the store are kept.")


def add_arguments(i) -> None:
    i.add_argument("file", help="an export of attnbench (jsonl, csv or parquet, optionally .gz)")
    i.add_argument("--db", default=DEFAULT_DB, help=f"the store to add to (default: ./{DEFAULT_DB})")
    i.add_argument("--format", choices=("jsonl", "csv", "parquet", "table"),
                   help="default: from the file name; table: another tool's results as CSV (docs: "
                        "attnbench.store.table_import)")
    i.add_argument("--table", choices=("attempts", "runs", "model_rows", "counters"), default="attempts",
                   help="which table the file holds (default attempts; runs: an export made with --table runs)")


def run(args) -> int:
    from ...store.db import Store
    from ...store.io import import_rows, import_runs, read_rows

    if args.format == "table":  # another tool's results, not an export (store/table_import.py)
        return _import_table(args)
    err = console.err
    rows = read_rows(args.file, args.format, table=args.table)  # validated before the store is touched
    store = Store(args.db)
    if args.table == "runs":
        n = import_runs(store, rows)
        err.print(f"imported {n} runs ({len(rows) - n} already present) into {args.db}", markup=False)
    elif args.table == "model_rows":
        from ...store.io import import_model_rows

        n = import_model_rows(store, rows)
        err.print(f"imported {n} new model rows ({len(rows) - n} already present) into {args.db}", markup=False)
    elif args.table == "counters":  # issue 39
        from ...store.io import import_counters

        n = import_counters(store, rows)
        err.print(f"imported {n} new counters rows ({len(rows) - n} already present) into {args.db}", markup=False)
    else:
        n = import_rows(store, rows)
        err.print(f"imported {n} new attempts ({len(rows) - n} already present) into {args.db}", markup=False)
    store.close()
    return 0


def _import_table(args) -> int:
    from ...store.db import Store
    from ...store.table_import import read_table, write_table

    if args.table != "attempts":
        raise UsageError("--format table holds attempts; --table runs does not apply")
    rows, run = read_table(args.file)  # validated before the store is touched
    store = Store(args.db)
    try:
        n = write_table(store, rows, run)
    finally:
        store.close()
    console.err.print(f"imported {n} new attempts ({len(rows) - n} already present) from a results table into "
                      f"{args.db}", markup=False)
    return 0
