"""The subcommands that read stores side by side (analyze, compare, advise) and import --format table."""
from __future__ import annotations

import json
from pathlib import Path

from .parser import UsageError


def _consoles():
    # looked up at call time: commands' consoles are the ones tests and the entry point configure
    from . import commands

    return commands.out, commands.err


def _writable(path: str | None, option: str) -> Path | None:
    if path is None:
        return None
    p = Path(path)
    if not p.parent.exists():
        raise UsageError(f"directory of {option} does not exist: {p.parent}")
    if p.is_dir():
        raise UsageError(f"{option} is a directory: {p}")
    return p


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".partial")
    tmp.write_text(text)
    tmp.replace(path)  # nothing half-written under the final name


def _read(stores: list[str]):
    from ..store.labelled import parse_sources, read_labelled

    sources = parse_sources(stores)
    df, runs = read_labelled(sources)
    return df, runs, {s.label: s.path for s in sources}


def cmd_analyze(args, argv) -> int:
    from ..analysis.analyze import analyze
    from ..report import analyze as page

    out, err = _consoles()
    json_out, md_out = _writable(args.json, "--json"), _writable(args.md, "--md")
    df, runs, paths = _read(args.stores)
    if df.empty:
        raise UsageError("the stores hold no attempts")
    result = analyze(df, runs, by=args.by, include_references=args.all, paths=paths)
    for part in page.terminal(result):
        out.print(part, highlight=False)
    if json_out:
        _write(json_out, json.dumps(result, indent=1, default=str) + "\n")
        err.print(f"wrote {json_out}")
    if md_out:
        _write(md_out, page.markdown(result))
        err.print(f"wrote {md_out}")
    return 0


REGRESSED = 3  # compare's exit code when something regressed: CI gates on it


def cmd_compare(args, argv) -> int:
    from ..analysis.regress import compare, verdict
    from ..report import compare as page

    out, err = _consoles()
    if not args.threshold > 1.0:
        raise UsageError("--threshold must be above 1 (a slowdown ratio, e.g. 1.05)")
    json_out = _writable(args.json, "--json")
    df, _, _ = _read([f"base={args.base}", f"new={args.new}"])
    rows = compare(df[df["label"] == "base"], df[df["label"] == "new"], args.threshold)
    summary = verdict(rows)
    for part in page.terminal(rows, summary, args.base, args.new, args.threshold):
        out.print(part, highlight=False)
    if json_out:
        _write(json_out, json.dumps({"summary": summary, "rows": rows}, indent=1, default=str) + "\n")
        err.print(f"wrote {json_out}")
    return REGRESSED if summary["regressed"] or summary["lost"] else 0


def cmd_advise(args, argv) -> int:
    from ..analysis.advise import advise
    from ..report import advise as page
    from ..workloads import WorkloadError
    from .workload_text import from_model, parse_workload

    out, _ = _consoles()
    try:
        wanted = parse_workload(args.workload) if args.workload else from_model(args.model, args)
    except WorkloadError as e:
        raise UsageError(str(e)) from None
    df, runs, _ = _read(args.stores)
    if df.empty:
        raise UsageError("the stores hold no attempts")
    first = next(iter(runs))
    advice = advise(df, wanted, home=first, include_references=args.all)
    for part in page.terminal(advice):
        out.print(part, highlight=False)
    return 0


def import_table(args) -> int:
    from ..store.db import Store
    from ..store.table_import import read_table, write_table

    _, err = _consoles()
    if args.table != "attempts":
        raise UsageError("--format table holds attempts; --table runs does not apply")
    rows, run = read_table(args.file)  # validated before the store is touched
    store = Store(args.db)
    try:
        n = write_table(store, rows, run)
    finally:
        store.close()
    err.print(f"imported {n} new attempts ({len(rows) - n} already present) from a results table into {args.db}")
    return 0
