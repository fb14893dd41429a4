"""`attnbench referee FILE`: another harness's published attention rows re-measured here, and judged."""
from __future__ import annotations

import argparse
import json
import os
import shlex
from pathlib import Path

from .. import console
from ..usage import UsageError, csv_list

NAME = "referee"
HELP = "re-measure another harness's published rows on this device and judge them"
DESCRIPTION = ("Read published results (cudnn-frontend's training or inference CSV, FlashAttention's benchmark "
               "output, tritonbench's flash_attention CSV), map each row to a workload and attnbench backends "
               "(refusing, with the reason, what cannot be mapped), measure those workloads here through the normal "
               "runner into a store (running it again resumes), and print per row the published figure, ours with "
               "its p5-p95 interval, the ratio and a verdict: agrees (within 10 % and overlapping), faster here, "
               "slower here, or cannot compare (another or an unstated GPU, no row of ours). Rules: "
               "docs/method/referee.md.")
DEFAULT_DB = "referee.sqlite"


def add_arguments(r) -> None:
    r.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS, help="more logging")
    r.add_argument("file", metavar="FILE", help="the published results")
    r.add_argument("--device", help="cpu, cuda or cuda:N (default: cuda if present, else cpu)")
    r.add_argument("--db", default=DEFAULT_DB, help=f"the store our measurements go to and are read from "
                                                    f"(default: ./{DEFAULT_DB}; resumes)")
    r.add_argument("--json", metavar="OUT", help="also write every comparison as JSON to OUT")
    r.add_argument("--repeats", type=int, default=3, help="process-level repeats of every attempt (default 3)")
    r.add_argument("--gpu", metavar="NAME", help="the GPU the published rows ran on, for formats that do not say "
                                                 "(FlashAttention's output, tritonbench's CSV)")
    r.add_argument("--assume", action="append", metavar="KEY=V",
                   help="what a format leaves unsaid: FlashAttention output dim=2048,dtype=fp16; tritonbench "
                        "mode=fwd|fwd_bwd,dtype=bf16,causal=false (those are the defaults); repeatable")
    r.add_argument("--backends", type=csv_list, metavar="NAMES",
                   help="re-measure with these of the mapped backends only (default: every mapped one)")
    r.add_argument("--tag", default="referee", help="sweep label of our rows in the store (default: referee)")
    r.add_argument("--timeout", type=float, default=300.0, metavar="S", help="seconds per attempt (default 300)")
    r.add_argument("--max-time", type=float, default=None, metavar="S", help="timing budget per attempt")
    r.add_argument("--no-run", action="store_true",
                   help="measure nothing: compare with the rows the store already holds")
    r.add_argument("--plugin", action="append", default=[], metavar="FILE.py", help="load backends from a file")


def run(args) -> int:
    from ...analysis.referee import ReadError, parse_assume, read

    path = Path(args.file)
    try:
        sheet = read(path, parse_assume(args.assume), args.gpu)
    except ReadError as e:
        raise UsageError(str(e)) from None
    out = Path(args.json) if args.json else None
    if out is not None:
        if out.resolve() == path.resolve():
            raise UsageError(f"--json {out} is the file read; choose another output")
        if not out.parent.exists() or out.is_dir():
            raise UsageError(f"--json {out}: its directory does not exist or it is a directory")
        if out.resolve() == Path(args.db).resolve() or (out.is_file() and _is_sqlite(out)):
            raise UsageError(f"--json {out} is a SQLite database (a store); choose another output")
    mapped = [r for r in sheet.rows if r.workload is not None]
    if args.backends:
        unknown = set(args.backends) - {b for r in mapped for b in r.backends}
        if unknown:
            raise UsageError(f"--backends {', '.join(sorted(unknown))}: not among this file's mapped backends "
                             f"({', '.join(sorted({b for r in mapped for b in r.backends})) or 'none'})")
        mapped = [r for r in (_only(r, args.backends) for r in mapped) if r.backends]
    if mapped and not args.no_run:
        _measure(args, mapped)
    comparisons = _compare(args, mapped)
    _print(sheet, comparisons, path)
    if out is not None:
        from ...report.referee import to_json

        partial = out.with_name(out.name + ".partial")  # renamed once whole: never a half-written file
        try:
            partial.write_text(json.dumps(to_json(sheet, comparisons, str(path)), indent=1) + "\n")
            os.replace(partial, out)
        except OSError as e:
            partial.unlink(missing_ok=True)
            raise UsageError(f"cannot write --json {out}: {e.strerror or e} (the measurements are in "
                             f"{args.db}: --no-run prints them again)") from None
        console.err.print(f"wrote {out}", markup=False, highlight=False)
    return 0


def _is_sqlite(path: Path) -> bool:
    from ...store.db import StoreError
    from ...store.sources import is_store

    try:
        return is_store(path)
    except StoreError:  # unreadable: not a store as far as this check goes; the write will say why
        return False


def _only(row, names):
    import dataclasses

    return dataclasses.replace(row, backends=tuple(b for b in row.backends if b in names))


def groups(rows) -> dict[tuple[str, ...], list]:
    """The distinct workloads of each set of backends, in file order: one run plans each set's workloads with
    its backends only, not every workload with every backend."""
    out: dict[tuple[str, ...], dict] = {}
    for r in rows:
        out.setdefault(r.backends, {}).setdefault(r.workload.key(), r.workload)
    return {k: list(v.values()) for k, v in out.items()}


def _measure(args, rows) -> None:
    import logging

    from ...backends.registry import select
    from ...runner.conduct import RunRequest, conduct
    from ...runner.options import make_executor, run_options
    from ...runner.session import RunSession
    from ..progress import SweepProgress

    level = (logging.WARNING, logging.INFO, logging.DEBUG)[min(getattr(args, "verbose", 0), 2)]
    options = run_options(device=args.device, repeats=args.repeats, timeout_s=args.timeout, max_time_s=args.max_time,
                          db=args.db, tag=args.tag, plugins=args.plugin, log_level=level)
    plan = [(select(list(names), args.plugin), workloads) for names, workloads in groups(rows).items()]
    argv = shlex.join(["attnbench"] + list(getattr(args, "argv", []) or []))
    session = RunSession(options.db, Path(options.log_path), options.cache)
    try:
        held = 0
        try:
            for n, (backends, workloads) in enumerate(plan):
                began = getattr(args, "began", None) if n == 0 else None  # the command's start counts once
                req = RunRequest(options.label, workloads, backends, args.repeats, args.tag, grid="referee",
                                 argv=argv, began=began)
                with SweepProgress(console.err) as prog:
                    held += conduct(make_executor(options), session.store, req, prog).held
        except BaseException as e:
            session.failed(bad_input=isinstance(e, UsageError))
            raise
        session.finished(held)
    finally:
        session.close()


def _compare(args, rows):
    from ...analysis.referee.compare import compare
    from ...store import sources

    db = Path(args.db)
    if not db.exists():
        if args.no_run:
            raise UsageError(f"--no-run: store not found: {db}")
        return compare(rows, _empty())
    data = sources.read([sources.single(str(db))])
    df = data.attempts
    if not df.empty:
        df = df[df["tag"] == args.tag]
    return compare(rows, df)


def _empty():
    import pandas as pd

    return pd.DataFrame(columns=["workload_key", "backend", "status", "device_name"])


def _print(sheet, comparisons, path: Path) -> None:
    from ...report.referee import conditions, legend, refusals, table, to_rich

    c = console.out
    devices = sorted({x.device for x in comparisons if x.device})
    gpus = sorted({r.gpu for r in sheet.rows if r.gpu})
    c.print(f"{sheet.fmt}: {path}", markup=False, highlight=False)
    c.print(f"published on {', '.join(gpus) or 'an unstated GPU'}; measured on {', '.join(devices) or '-'}; "
            f"{len(sheet.rows)} figures, {sum(1 for r in sheet.rows if r.refusal)} refused", markup=False,
            highlight=False)
    for n in sheet.notes:
        c.print(f"assumed: {n}", markup=False, highlight=False)
    timings = sorted({r.timing for r in sheet.rows if r.timing})
    for t in timings:
        c.print(f"published timing: {t}", markup=False, highlight=False)
    for line in refusals(sheet):
        c.print(f"refused: {line}", markup=False, highlight=False)
    if not comparisons:
        c.print("nothing to compare: no published row maps to an attnbench workload", markup=False, highlight=False)
        return
    t, notes = table(comparisons)
    c.print(to_rich(t))
    for line in legend(comparisons) + [x for x in [conditions(comparisons)] if x]:
        c.print(line, markup=False, highlight=False)
    for i, n in enumerate(notes, start=1):
        c.print(f"[{i}] {n}" if not n.startswith("*") else n, markup=False, highlight=False)
