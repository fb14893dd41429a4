"""The subcommands. Everything is validated before anything is written."""
from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from .parser import UsageError

err = Console(stderr=True)
out = Console()


def _default_device() -> str:
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:
        return "cpu"


def _check_device(device: str) -> str:
    if device == "cpu":
        return device
    if device == "cuda" or (device.startswith("cuda:") and device[5:].isdigit()):
        import torch

        if not torch.cuda.is_available():
            raise UsageError(f"device {device} requested but no CUDA device is visible")
        n = torch.cuda.device_count()
        if ":" in device and int(device[5:]) >= n:
            raise UsageError(f"device {device} does not exist (this host has {n} CUDA device(s))")
        return device
    raise UsageError(f"bad --device {device!r}: use cpu, cuda or cuda:N")


def _worker_log_level(verbose: int) -> int:
    import logging

    return (logging.WARNING, logging.INFO, logging.DEBUG)[min(verbose, 2)]


def select_workloads(args):
    """Grid (named or YAML) narrowed by --modes, --seqlen, --causal, --dtype."""
    from ..workloads import DTYPES, MODES
    from ..workloads.grids import get_grid, load_yaml_grid, parse_size

    if args.config:
        label, ws = load_yaml_grid(args.config)
        name = f"{label} ({args.config})"
    else:
        ws = get_grid(args.grid)
        name = args.grid
    if args.modes:
        bad = [m for m in args.modes if m not in MODES]
        if bad:
            raise UsageError(f"unknown mode {bad[0]!r}; modes: {', '.join(MODES)}")
        ws = [w for w in ws if w.mode in args.modes]
    if args.dtype:
        bad = [d for d in args.dtype if d not in DTYPES]
        if bad:
            raise UsageError(f"unknown dtype {bad[0]!r}; dtypes: {', '.join(DTYPES)}")
        ws = [w for w in ws if w.dtype in args.dtype]
    if args.seqlen:
        keep = {parse_size(s) for s in args.seqlen}
        ws = [w for w in ws if w.kv_len in keep]
    if args.causal != "both":
        ws = [w for w in ws if w.causal == (args.causal == "true")]
    if not ws:
        raise UsageError(f"no workload of grid {name!r} is left after the filters")
    return name, ws


def cmd_run(args, argv) -> int:
    from ..backends.base import DeviceInfo
    from ..backends.registry import select
    from ..measure.timing import TimingConfig
    from ..runner.planner import plan
    from ..runner.sweep import Sweep, SweepConfig, new_run_id
    from ..store.db import Store
    from .progress import SweepProgress, summary

    device = _check_device(args.device or _default_device())
    if args.grid is None and args.config is None:
        args.grid = "smoke" if device == "cpu" else "quick"
    grid_name, workloads = select_workloads(args)
    backends = select(args.backends, args.plugin)
    if args.repeats < 1:
        raise UsageError("--repeats must be at least 1")
    if not args.timeout > 0:
        raise UsageError("--timeout must be positive")
    if not args.tol > 0:
        raise UsageError("--tol must be positive")
    db = Path(args.db)
    if not db.parent.exists():
        raise UsageError(f"directory of --db does not exist: {db.parent}")
    if args.max_time is not None and args.max_time <= 0:
        raise UsageError("--max-time must be positive")
    timing = TimingConfig.for_device(device, args.max_time)
    cfg = SweepConfig(device=device, plugins=[str(Path(p).resolve()) for p in args.plugin],
                      timeout_s=args.timeout, seed=args.seed, tol=args.tol, timing=timing, tag=args.tag,
                      log_path=os.devnull if args.dry_run else str(db.with_name(db.name + ".log")),
                      strict_isolation=args.strict_isolation, log_level=_worker_log_level(args.verbose))
    store = Store(db) if not args.dry_run else None
    run_id = new_run_id()
    sweep = Sweep(store, cfg, None, run_id)
    try:
        with err.status(f"starting a worker on {device} and measuring its ceilings..."):
            prov = sweep.provenance(backends if not args.dry_run else None)
        dev = DeviceInfo.from_dict(prov["device"])
        sweep.dev = dev
        attempts = plan(workloads, backends, dev, args.repeats, args.tag, args.seed)
        if args.dry_run:
            from collections import Counter

            c = Counter(a.planned.value if a.planned else "TO_RUN" for a in attempts)
            out.print(f"{len(workloads)} workloads × {len(backends)} backends × {args.repeats} repeats = "
                      f"{len(attempts)} attempts: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
            return 0
        if args.retry_failed:
            n = store.delete_failed({a.key for a in attempts})
            if n:
                err.print(f"retrying {n} attempts that ended TIMEOUT, CRASH or ERROR")
        store.start_run(run_id, args.tag, grid_name, shlex.join(["attnbench"] + list(argv)), dev.name, prov)
        with SweepProgress(len(attempts), err) as prog:
            sweep.on_row = prog.update
            sweep.run(attempts)
        overhead = {k: round(v, 2) for k, v in sweep.overhead_s.items()}
        store.finish_run(run_id, {"sweep_overhead_s": overhead})
        summary(err, store, prog.counts, prog.skipped, db, overhead)
        return 0
    finally:
        sweep.close()
        if store:
            store.close()


def cmd_backends(args, argv) -> int:
    from ..backends.registry import all_backends

    rows = []
    for b in all_backends(args.plugin):
        why = b.availability()
        rows.append({**b.describe(), "available": why is None, "why_not": why, "version": b.version()})
    if args.json:
        out.print_json(json.dumps(rows))
        return 0
    t = Table(title="attnbench backends")
    for c in ("name", "family", "role", "available", "version", "devices", "isolation", "description"):
        t.add_column(c)
    for r in rows:
        avail = "yes" if r["available"] else f"no: {r['why_not']}"
        t.add_row(r["name"], r["family"], r["role"], avail, str(r["version"]), ",".join(r["devices"]),
                  r["isolation"], r["description"])
    out.print(t)
    return 0


def cmd_env(args, argv) -> int:
    from ..runner.worker import run_provenance

    device = _check_device(args.device or _default_device())
    prov = run_provenance(device, 0, measure_ceilings=not args.no_ceilings)
    out.print_json(json.dumps(prov, default=str))
    return 0


def ran(backend: str, kernel) -> str:
    """A backend's name, with the library attention kernel it ran when its name does not say so."""
    return f"{backend} ({kernel})" if isinstance(kernel, str) and kernel else backend


def cmd_show(args, argv) -> int:
    import pandas as pd

    from ..analysis.summary import best_per_workload, run_overview, status_counts
    from ..store.db import Store

    store = Store(args.db, create=False)
    df, runs = store.dataframe(), store.runs()
    best = best_per_workload(df, runs, include_references=args.all)
    t = Table(title=f"Fastest backend per workload ({args.db}; median of per-repeat medians; clear = "
                    "≥10% ahead of the runner-up and the 95% bootstrap lower bound of that ratio > 1)")
    for c in ("device", "mode", "B", "Nq", "Nkv", "H q/kv", "D", "dtype", "mask", "launch", "best", "median µs",
              "p95 µs", "throughput", "% ceiling", "runner-up", "×", "clear"):
        t.add_column(c, justify="right" if c in ("B", "Nq", "Nkv", "median µs", "p95 µs", "throughput",
                                                  "% ceiling", "×") else "left")
    named_kernel = False  # some backend is shown with the library kernel it ran
    for _, r in best.iterrows():
        mask = f"causal-{r['causal_align']}" if r["causal"] else "none"
        pct, ratio, runner_up = (r.get(c) for c in ("pct_ceiling", "ratio", "runner_up"))
        pct = f"{pct:.0f}%" if pd.notna(pct) else "-"
        ratio = f"{ratio:.2f}" if pd.notna(ratio) else "-"
        winner = ran(r["best"], r.get("best_kernel"))
        runner_up = ran(runner_up, r.get("runner_up_kernel")) if pd.notna(runner_up) else "-"
        named_kernel |= winner != r["best"] or runner_up not in ("-", r.get("runner_up"))
        t.add_row(str(r["device_name"]), r["mode"], str(r["batch"]), str(r["q_len"]), str(r["kv_len"]),
                  f"{r['q_heads']}/{r['kv_heads']}", str(r["head_dim"]), r["dtype"], mask, r["launch"], winner,
                  f"{r['median_us']:.1f}", f"{r['p95_us']:.1f}", f"{r['value']:.3g} {r['metric']}", pct,
                  runner_up, ratio,
                  "yes" if r.get("clear") else "no")
    if best.empty:
        out.print(f"no OK contestant rows in {args.db} ({len(df)} attempts stored)")
    else:
        out.print(t)
        if named_kernel:
            out.print("name (kernel): that backend spent most of its device time in this library attention "
                      "kernel (dispatch probe), e.g. torch.compile rewriting plain attention into SDPA")
    out.print(overview_line(run_overview(df, runs)))
    if args.status:
        sc = status_counts(df)
        st = Table(title="Attempts per backend and status")
        st.add_column("backend")
        for c in sc.columns:
            st.add_column(str(c), justify="right")
        for name, row in sc.iterrows():
            st.add_row(str(name), *(str(int(v)) for v in row.values))
        out.print(st)
    store.close()
    return 0


def overview_line(o: dict) -> str:
    """attempts per status; sweep wall over timed device time; agreement of repeats per launch mode."""
    parts = [f"{o['attempts']} attempts (" + ", ".join(f"{k} {v}" for k, v in sorted(o["status"].items())) + ")"]
    if o.get("wall_over_timed"):
        parts.append(f"sweep wall {o['sweep_wall_s']:.0f} s for {o['timed_s']:.1f} s of timed samples "
                     f"(×{o['wall_over_timed']:.1f})")
    for launch, c in o.get("cv_by_launch", {}).items():
        parts.append(f"{launch}: CV of per-repeat medians {100 * c['median']:.1f}% median, "
                     f"{100 * c['p90']:.1f}% p90 over {c['pairs']} backend×workload")
    return "; ".join(parts)


def cmd_export(args, argv) -> int:
    from ..store.db import Store
    from ..store.io import export, format_of

    outp = Path(args.out)
    if not outp.parent.exists():
        raise UsageError(f"directory of --out does not exist: {outp.parent}")
    fmt, _ = format_of(outp, args.format)  # a bad name is reported before the store is opened
    store = Store(args.db, create=False)
    n = export(store, fmt, outp, table=args.table)
    store.close()
    err.print(f"wrote {n} {args.table} to {outp}")
    return 0


def cmd_import(args, argv) -> int:
    from ..store.db import Store
    from ..store.io import import_rows, import_runs, read_rows

    rows = read_rows(args.file, args.format, table=args.table)  # validated before the store is touched
    store = Store(args.db)
    if args.table == "runs":
        n = import_runs(store, rows)
        err.print(f"imported {n} runs ({len(rows) - n} already present) into {args.db}")
    else:
        n = import_rows(store, rows)
        err.print(f"imported {n} new attempts ({len(rows) - n} already present) into {args.db}")
    store.close()
    return 0
