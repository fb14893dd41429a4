"""`attnbench show`: the best backend per workload of one store, its rankings, failures and status counts."""
from __future__ import annotations

import sys

from .. import console
from ..usage import DEFAULT_DB, UsageError, csv_list

NAME = "show"
HELP = "best backend per workload: time, TFLOP/s or GB/s, %% of ceiling"
DESCRIPTION = ("The fastest contestant per device and workload (median of per-repeat medians), its throughput and "
               "share of the measured ceiling, the runner-up and whether the lead is clear; then the run overview. "
               "Opens the store read-only.")


def add_arguments(s) -> None:
    s.add_argument("--db", default=DEFAULT_DB,
                   help=f"the store (or an export of one) to read (default: ./{DEFAULT_DB})")
    s.add_argument("--all", action="store_true", help="include accuracy references in the contest")
    s.add_argument("--status", action="store_true", help="also print attempts per backend and status, where the "
                   "sweep's wall went, and (several devices) attempts and wall per device")
    s.add_argument("--where", action="append", metavar="AXIS=V1,V2",
                   help="keep only workloads whose AXIS is one of the values; repeatable (see run --where)")
    s.add_argument("--backend", dest="backends", type=csv_list, metavar="NAMES",
                   help="keep only these backends (comma list)")
    s.add_argument("--rank", action="store_true", help="every backend of every workload, fastest first")
    s.add_argument("--failures", action="store_true",
                   help="the attempts that did not end OK, grouped by status and reason (count, backends, "
                        "example workloads); --format json, csv or md lists every attempt")
    s.add_argument("--format", choices=("table", "csv", "md", "json"), default="table",
                   help="table (default; compact below 160 columns) or the same results as csv, md or json")
    s.add_argument("--wide", action="store_true", help="every column even on a narrow terminal")
    s.add_argument("--repro", action="store_true",
                   help="per attempt: the attnbench run command and the YAML grid block that re-measure it, with "
                        "the versions it ran under (torch, libraries, device, driver, git sha); --format json, csv "
                        "or md gives the same per row")
    s.add_argument("--tag", dest="tags", action="append", metavar="TAG",
                   help="keep only attempts whose sweep tag (run --tag) is TAG; repeatable (any of them); "
                        "a tag no attempt has is an error")


def select_rows(df, args):
    """show's filters on the attempts frame: --tag, --where (any workload axis), --backend."""
    from ...store.io import with_tags
    from ...workloads import axes

    df = axes.select_frame(with_tags(df, args.tags, "attempts"), axes.parse_filters(args.where))
    if args.backends:
        unknown = sorted(set(args.backends) - set(df["backend"]))
        if unknown:
            raise UsageError(f"no attempt of backend {unknown[0]!r} in the store")
        df = df[df["backend"].isin(args.backends)]
    return df.reset_index(drop=True)


def run(args) -> int:
    from ...analysis import dispatch_checked
    from ...analysis.frames import per_backend
    from ...analysis.outcomes import device_counts, status_counts
    from ...analysis.overview import run_overview
    from ...analysis.sections.mechanism import winner_bounds
    from ...analysis.winners import best_per_workload, contestants
    from ...report import terminal
    from ...store import sources

    out = console.out
    data = sources.read([sources.single(args.db)])
    df, runs = data.attempts.drop(columns="label", errors="ignore"), data.runs[data.labels[0]]
    n_model = int(data.models["row_key"].nunique())
    if df.empty and n_model and args.format == "table":  # a store `attnbench model` wrote
        out.print(f"{args.db} holds no attempts but {n_model} model rows: attnbench model --db {args.db} --show",
                  markup=False)
        return 0
    # runs stay whole: ceilings are the device's latest, and the overview counts only runs with rows in df
    df = select_rows(df, args)
    if args.failures:
        failed = df[df["status"] != "OK"]
        frame = failed[["backend", "status", "reason", "repeat", "mode", "batch", "q_len", "kv_len", "q_heads",
                        "kv_heads", "head_dim", "dtype", "causal", "launch", "device_name", "attempt_key"]]
        return _emit(frame, args.format, lambda: [_failures(failed)])
    if args.repro:  # issue 42.4
        from ...analysis.repro import repro_frame
        from ...report.repro import repro_lines

        frame = repro_frame(df, runs)
        return _emit(frame, args.format, lambda: repro_lines(frame))
    pairs = dispatch_checked.unchecked_pairs(df)  # issue 42.2: OKs no dispatch check stands behind
    if args.rank:
        ranked = contestants(per_backend(df), args.all)
        return _emit(_flag(ranked, pairs, "backend"), args.format, lambda: [
            terminal.ranking_table(dispatch_checked.mark(ranked, pairs)), *_note(ranked, pairs, ("backend",))])
    best = winner_bounds(best_per_workload(df, runs, include_references=args.all), df)  # issue 39: the bound column
    types = {r.get("device_name"): ((r.get("provenance") or {}).get("device") or {}).get("type") for r in runs}
    return _emit(_flag(best, pairs, "best"), args.format, lambda: terminal.show(
        dispatch_checked.mark(best, pairs), run_overview(df, runs), status_counts(df) if args.status else None,
        source=args.db, attempts=len(df), wide=args.wide or out.width >= terminal.WIDE_COLUMNS, device_types=types,
        width=out.width, devices=device_counts(df) if args.status else None, load=_load(runs, df)) + _note(best, pairs))


def _flag(frame, pairs, column: str):
    """--format csv/md/json: a column dispatch_unchecked for `column`'s backend (issue 42.2)."""
    if frame.empty or column not in frame.columns:
        return frame
    devices = frame["device_name"].astype(str) if "device_name" in frame.columns else [""] * len(frame)
    return frame.assign(dispatch_unchecked=[(d, str(n)) in pairs for d, n in zip(devices, frame[column])])


def _note(frame, pairs, columns=("best", "runner_up")) -> list[str]:
    """The note on name? when a printed backend is marked."""
    from ...analysis import dispatch_checked

    marked = dispatch_checked.mark(frame, pairs, columns)
    shown = any(str(v).endswith(dispatch_checked.MARK) for c in columns if c in marked.columns for v in marked[c])
    return [dispatch_checked.NOTE] if shown else []


def _load(runs, df) -> str:
    """The hosts' load when the runs with rows in df started, as show's notes say it ('' unrecorded)."""
    from ...analysis.sections.sources import run_load
    from ...report.texttable import load_text

    ids = set(df["run_id"]) if "run_id" in df.columns else set()
    loads = [run_load(r) for r in runs if r.get("run_id") in ids]
    load1, cpus = [x for ls, _ in loads for x in ls], [n for _, ns in loads for n in ns]
    return load_text([min(load1), max(load1)] if load1 else None, max(cpus) if cpus else None)


def _failures(failed):
    """The non-OK attempts grouped by status and reason (--format json/csv/md keep one row each)."""
    from ...analysis.failures import reason_groups
    from ...report.failures import groups_table
    from ...report.terminal import workload_label

    return groups_table(reason_groups(failed, workload_label), len(failed))


def _emit(frame, fmt: str, parts) -> int:
    """The frame as data (csv, md, json) on stdout, or the rich rendering `parts()` gives."""
    from ...report import formats

    if fmt != "table":
        sys.stdout.write(formats.as_text(frame, fmt))
        return 0
    for part in parts():
        console.out.print(part)
    return 0
