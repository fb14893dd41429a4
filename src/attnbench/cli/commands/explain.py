"""`attnbench explain STORE`: hardware counters and a bound for OK attempts already stored, read by replaying each
attempt's step under the collector, without timing it again (issue 39; docs/method/counters.md)."""
from __future__ import annotations

from rich.table import Table

from .. import console
from ..usage import UsageError, csv_list

NAME = "explain"
HELP = "add hardware counters and a bound (memory, tensor, SFU, shared, latency, host) to stored OK attempts"
DESCRIPTION = ("Replay the step of each OK attempt the filters keep, once, under Nsight Compute (a process of its "
               "own per attempt, on --device), and store its counters and bound in the store's counters table; "
               "the attempts and their samples are not touched. Attempts that already have counters are skipped "
               "unless --again, as are attempts of another GPU model than --device's. Where counters cannot be read "
               "(no ncu, counters not permitted, a CPU device, a replay that failed) the counters row says why in "
               "one line, a later explain tries it again, and it never replaces counters read before.")


def add_arguments(x) -> None:
    from ...measure.counters import DEFAULT_SET, SETS
    from ...workloads.axes import NAMES as AXIS_NAMES

    x.add_argument("db", metavar="STORE", help="the store whose attempts to explain (written: its counters table)")
    x.add_argument("--where", action="append", metavar="AXIS=V1,V2",
                   help=f"keep only workloads whose AXIS is one of the values; repeatable ({', '.join(AXIS_NAMES)})")
    x.add_argument("--backend", dest="backends", type=csv_list, help="comma list of backends to keep")
    x.add_argument("--tag", dest="tags", action="append", metavar="TAG", help="keep only this sweep tag; repeatable")
    x.add_argument("--counters", default=DEFAULT_SET, choices=tuple(SETS), metavar="SET",
                   help=f"counter set: {', '.join(SETS)} (default {DEFAULT_SET})")
    x.add_argument("--device", help="the GPU to replay on: cuda or cuda:N (default cuda where this host has one, "
                                     "else cpu, where counters cannot be read)")
    x.add_argument("--plugin", action="append", default=[], metavar="FILE.py",
                   help="the plugin file of a plugin backend's attempts; repeatable")
    x.add_argument("--again", action="store_true", help="read counters again where the attempt has them already")
    x.add_argument("--limit", type=int, metavar="N", help="explain at most N attempts")


def run(args) -> int:
    from pathlib import Path

    from ...measure import counters
    from ...runner.options import check_device, default_device
    from ...store import counters as store_counters
    from ...store.db import Store
    from ...store.sources import attempts_frame
    from .show import select_rows

    if not Path(args.db).is_file():
        raise UsageError(f"no store at {args.db}")
    if args.limit is not None and args.limit < 1:
        raise UsageError("--limit must be at least 1")
    plugins = [str(Path(p).resolve()) for p in args.plugin]
    missing = [p for p in plugins if not Path(p).is_file()]
    if missing:
        raise UsageError(f"--plugin {missing[0]}: no such file")
    device = check_device(args.device or default_device())  # a device this host lacks: one line, exit 2
    here = _gpu_name(device)
    store = Store(args.db, create=False)
    counts = dict.fromkeys(COUNTS, 0)
    written = []
    try:
        df = select_rows(attempts_frame(store), args)
        df = df[df["status"] == "OK"]
        readable = store_counters.keys(store.con, readable_only=True)
        # a row that says why counters could not be read is tried again; one with counters only under --again
        todo = df if args.again else df[~df["attempt_key"].isin(readable)]
        counts["had"] = len(df) - len(todo)
        elsewhere = todo[todo["device_name"].astype(str) != here] if here else todo.iloc[:0]
        if len(elsewhere):  # counters of another GPU model would not be this row's
            console.err.print(f"{len(elsewhere)} attempt(s) ran on another GPU model than {device}'s ({here}): "
                              f"skipped ({', '.join(sorted(set(elsewhere['device_name'].astype(str))))})",
                              markup=False)
            todo = todo.drop(elsewhere.index)
        counts["elsewhere"] = len(elsewhere)
        if args.limit and len(todo) > args.limit:
            counts["limit"] = len(todo) - args.limit
            todo = todo.head(args.limit)
        seeds = {r["run_id"]: (r.get("provenance") or {}).get("seed", 0) for r in store.runs()}
        for _, r in todo.iterrows():
            attempt = {k: (None if _missing(v) else v) for k, v in r.items() if k != "samples_us"}
            spec = {"backend": attempt["backend"], "workload": _workload(attempt), "device": device,
                    "seed": seeds.get(attempt["run_id"], 0) or 0, "inputs": attempt.get("inputs") or "normal",
                    "plugins": plugins}
            console.err.print(f"explaining {attempt['backend']} {attempt['workload_key']}...", markup=False)
            row = store_counters.row_of(attempt, counters.collect(spec, args.counters), "explain")
            # a note never replaces counters read before (--again on a host that cannot read them)
            kept = row["note"] is not None and attempt["attempt_key"] in readable
            if not kept:
                store_counters.insert(store.con, row, replace=True)
                written.append((attempt, row))
            counts["kept" if kept else "unread" if row["note"] is not None else "read"] += 1
    finally:
        store.close()
    console.err.print("; ".join(f"{n} {COUNTS[k]}" for k, n in counts.items() if n or k == "read"), markup=False)
    if written:
        console.out.print(_table(written))
    return 0


# what explain says it did with the attempts the filters kept, each once
COUNTS = {"read": "attempt(s) explained with counters",
          "unread": "replayed without counters (the row says why; a later explain tries them again)",
          "kept": "replayed without counters, their counters read before kept",
          "had": "already had counters (--again reads them again)",
          "elsewhere": "ran on another GPU model: skipped",
          "limit": "left by --limit"}


def _gpu_name(device: str) -> str | None:
    """The model of the GPU the replays run on, as attempts record it; None on the CPU (no GPU model to match:
    counters need a CUDA device, the collector says so on each row)."""
    if not device.startswith("cuda"):
        return None
    import torch

    return torch.cuda.get_device_name(device)


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and v != v)


def _workload(attempt: dict) -> dict:
    from ...store.meaning import workload

    return workload(attempt).to_dict()  # the row's axis columns, parsed as import parses them


def _table(written: list) -> Table:
    from ...report.terminal import workload_label

    t = Table(title="counters", show_lines=False)
    for col in ("backend", "workload", "bound", "tensor %", "dram %", "bytes ×", "note"):
        t.add_column(col, overflow="fold")
    for attempt, row in written:
        pct = lambda v: "-" if v is None else f"{v:.0f}"  # noqa: E731
        t.add_row(attempt["backend"], workload_label(attempt), row["bound"] or "-", pct(row["tensor_pct"]),
                  pct(row["dram_pct"]), "-" if row["bytes_ratio"] is None else f"{row['bytes_ratio']:.2f}",
                  row["note"] or "")
    return t
