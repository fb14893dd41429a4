"""The subcommands. Everything is validated before anything is written."""
from __future__ import annotations

import json
import math
import os
import shlex
import shutil
import sqlite3
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .comparisons import cmd_advise, cmd_analyze, cmd_compare  # noqa: F401  (main dispatches by name)
from .report_cmd import cmd_report  # noqa: F401
from .model_cmd import cmd_model  # noqa: F401  (main dispatches by name)
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


def _check_ray(args):
    """--executor ray: Ray importable, and --devices as fake CPU devices (a list of DeviceSpec) or None
    (every GPU of the cluster)."""
    from ..runner.multi import parse_devices

    try:
        import ray  # noqa: F401
    except ImportError:
        raise UsageError("--executor ray needs Ray, which is not installed: pip install 'attnbench[ray]'") from None
    if args.device is not None:
        raise UsageError("--device and --executor ray exclude each other (use --devices all, or cpu:0,cpu:1)")
    from ..runner.ray_exec import cluster_target

    try:
        cluster_target(args.address)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if args.devices is None or args.devices.strip() == "all":
        return None
    if not all(x.strip().startswith("cpu:") for x in args.devices.split(",")):
        raise UsageError("with --executor ray, --devices is all (every GPU of the cluster) or cpu:0,cpu:1 "
                         "(fake CPU devices)")
    try:
        return parse_devices(args.devices, lambda: 0)
    except ValueError as e:
        raise UsageError(str(e)) from None


def _check_devices(args):
    """--devices (and --replicate) as a list of runner.multi.DeviceSpec, or None for one device."""
    from ..runner.multi import parse_devices

    if args.address is not None and args.executor != "ray":
        raise UsageError("--address needs --executor ray")
    if args.executor == "ray":
        return _check_ray(args)
    if args.devices is None:
        if args.replicate:
            raise UsageError("--replicate needs --devices")
        return None
    if args.device is not None:
        raise UsageError("--device and --devices exclude each other")

    def cuda_count() -> int:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0

    try:
        return parse_devices(args.devices, cuda_count)
    except ValueError as e:
        raise UsageError(str(e)) from None


def _print_eta(attempts, db: Path, n_devices: int, min_time_s: float = 0.0) -> None:
    """run --dry-run: what is already stored, and how long the rest takes by earlier rows."""
    from ..runner.eta import DEFAULT_ATTEMPT_S, duration, estimate, typical_sampled, typical_wall
    from ..store.db import Store

    rows, done = [], set()
    if db.exists():
        prior = Store(db, readonly=True)
        try:
            rows, done = prior.attempts("WHERE status='OK'"), prior.done_keys()
        finally:
            prior.close()
    todo = [a for a in attempts if a.key not in done]
    est = estimate(todo, typical_wall(rows), n_devices, min_time_s=min_time_s, sampled=typical_sampled(rows))
    out.print(f"already stored: {len(attempts) - len(todo)}; ETA {duration(est.seconds)} on {n_devices} device(s) "
              f"({est.from_store} attempts at the median wall_s of earlier OK rows of their backend and mode, "
              f"{est.by_default} at {DEFAULT_ATTEMPT_S:g} s; worker start-up not included)")


def _worker_log_level(verbose: int) -> int:
    import logging

    return (logging.WARNING, logging.INFO, logging.DEBUG)[min(verbose, 2)]


def workload_filters(args) -> dict:
    """--where AXIS=V1,V2 (repeatable), and the shorthands --modes, --dtype, --seqlen, --causal."""
    from ..workloads import axes

    filters = axes.parse_filters(args.where)
    shorthands = (("mode", args.modes), ("dtype", args.dtype), ("kv_len", args.seqlen),
                  ("causal", None if args.causal == "both" else [args.causal]))
    for name, values in shorthands:
        if values:
            ax = axes.axis(name)
            filters = axes.narrow(filters, name, {ax.parse(v) for v in values})
    return filters


def select_workloads(args):
    """Grid (named or YAML) narrowed by the workload filters."""
    from ..workloads import axes
    from ..workloads.grids import get_grid, load_yaml_grid

    filters = workload_filters(args)  # bad filters are reported before a grid file is read
    if args.config:
        label, ws = load_yaml_grid(args.config)
        name = f"{label} ({args.config})"
    else:
        ws = get_grid(args.grid)
        name = args.grid
    ws = axes.select(ws, filters)
    if not ws:
        raise UsageError(f"no workload of grid {name!r} is left after the filters")
    return name, ws


def _ray_errors(fn, *args):
    """fn(*args), a Ray cluster that cannot serve the run (runner.ray_exec.ClusterError) as a usage error."""
    from ..runner.ray_exec import ClusterError  # imports no Ray itself

    try:
        return fn(*args)
    except ClusterError as e:
        raise UsageError(str(e)) from None


def cmd_run(args, argv) -> int:
    from ..backends.registry import select
    from ..measure.timing import TimingConfig
    from ..runner.conduct import RunRequest, conduct, plan_only
    from ..runner.local import LocalConfig, LocalExecutor
    from ..store.db import Store
    from .progress import SweepProgress, summary

    devices = _check_devices(args)
    ray = args.executor == "ray"
    if ray:
        device = "cpu" if devices else "cuda"  # the cluster's GPUs (the driver need not have one)
    else:
        device = devices[0].torch_device if devices else _check_device(args.device or _default_device())
    if args.grid is None and args.config is None:
        args.grid = "smoke" if device == "cpu" else "quick"
    grid_name, workloads = select_workloads(args)
    backends = select(args.backends, args.plugin)
    if args.repeats < 1:
        raise UsageError("--repeats must be at least 1")
    for name, value in (("--timeout", args.timeout), ("--tol", args.tol), ("--max-time", args.max_time),
                        ("--min-time", args.min_time)):
        if value is not None and not (math.isfinite(value) and value > 0):  # inf --tol would switch the check off
            raise UsageError(f"{name} must be positive and finite, got {value:g}")
    if not args.db.strip():
        raise UsageError("--db is empty")
    if not args.tag.strip():
        raise UsageError("--tag is empty")
    if args.compile_cache is not None:
        cache = Path(args.compile_cache)
        if (cache.exists() and not cache.is_dir()) or not cache.parent.exists():
            raise UsageError(f"--compile-cache {cache} is not a directory that exists or can be made")
    db = Path(args.db)
    if not db.parent.exists():
        raise UsageError(f"directory of --db does not exist: {db.parent}")
    # the sweep's compiler cache beside its store (not on a cluster's other nodes): kept when the run is
    # interrupted, so the resumed run loads what this one compiled, as one uninterrupted run would
    sweep_cache = None if ray or args.compile_cache or args.dry_run else sweep_cache_of(db)
    if sweep_cache and sweep_cache.exists() and not sweep_cache.is_dir():
        raise UsageError(f"{sweep_cache} is where this store's compiler cache is kept, and it is not a directory")
    cfg = LocalConfig(plugins=[str(Path(p).resolve()) for p in args.plugin], timeout_s=args.timeout,
                      seed=args.seed, tol=args.tol, inputs=args.inputs, timing=TimingConfig.for_device(device, args.max_time, args.min_time),
                      log_path=os.devnull if args.dry_run else str(db.with_name(db.name + ".log")),
                      strict_isolation=args.strict_isolation, log_level=_worker_log_level(args.verbose),
                      compile_cache=str(Path(args.compile_cache).resolve()) if args.compile_cache else None,
                      run_cache=str(sweep_cache.resolve()) if sweep_cache else None,
                      run_cache_resumed=bool(sweep_cache and sweep_cache.is_dir() and any(sweep_cache.iterdir())))
    label = ",".join(d.label for d in devices) if devices else ("ray:all GPUs" if ray else device)
    req = RunRequest(label, workloads, backends, args.repeats, args.tag, args.seed, args.inputs, grid_name,
                     shlex.join(["attnbench"] + list(argv)), args.retry_failed, args.began)
    if ray:
        from ..runner.ray_exec import RayExecutor

        executor = RayExecutor(cfg, devices, args.replicate, args.address)
    elif devices:
        from ..runner.multi import MultiExecutor

        executor = MultiExecutor(cfg, devices, args.replicate)
    else:
        executor = LocalExecutor(cfg)
    if args.dry_run:
        from collections import Counter

        with err.status(f"starting workers on {label} to read the device..."):
            try:
                attempts = _ray_errors(plan_only, executor, req)
            finally:
                executor.close()
        c = Counter(a.planned.value if a.planned else "TO_RUN" for a in attempts)
        placements, labels = executor.placements, executor.labels
        copies = f" × {len(placements)} devices" if placements and args.replicate else ""
        out.print(f"{len(workloads)} workloads × {len(backends)} backends × {args.repeats} repeats{copies} = "
                  f"{len(attempts)} attempts: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
        for lab, p in zip(labels, placements):
            out.print(f"  {lab}: {p.device_name}, uuid {p.device_uuid or '-'}, "
                      f"host cores {p.host_cores or 'not pinned'}")
        _print_eta(attempts, db, len(placements) or 1, cfg.timing.min_time_s)
        return 0
    log = Path(cfg.log_path)
    new_db, new_log = not db.exists(), not log.exists()
    store = Store(db)  # opened first: a path that is no store is refused before any worker starts
    try:
        try:
            with SweepProgress(err) as prog:
                report = _ray_errors(conduct, executor, store, req, prog)
        except BaseException as e:
            dropped = new_db and _drop_unused(store, db, log if new_log else None, bad_input=isinstance(e, UsageError))
            if sweep_cache and dropped:  # nothing to resume
                shutil.rmtree(sweep_cache, ignore_errors=True)
            elif sweep_cache and sweep_cache.is_dir():
                size = sum(f.stat().st_size for f in sweep_cache.rglob("*") if f.is_file())
                err.print(f"compiled code kept for the resume: {escape(str(sweep_cache))} ({size / 2**20:.0f} MiB; "
                          "removed when the sweep finishes, or delete it)", soft_wrap=True)
            raise
        if sweep_cache and not report.held:  # the sweep has finished (a run still holding attempts uses it)
            shutil.rmtree(sweep_cache, ignore_errors=True)
        summary(err, store, report.counts, report.resumed, db, report.overhead_s, report.startup_s)
        if report.held:
            err.print(f"[bold yellow]{report.held} attempts have no row[/]: another run claims them (still running, "
                      "or on another host); run again once it has ended")
        return 0
    finally:
        store.close()


SWEEP_CACHE_SUFFIX = ".compile-cache"


def sweep_cache_of(db: Path) -> Path:
    """Where `run` keeps a sweep's compiler cache (Inductor, Triton, JAX) until the sweep has finished."""
    return db.with_name(db.name + SWEEP_CACHE_SUFFIX)


def _drop_unused(store, db: Path, log: Path | None, bad_input: bool) -> bool:
    """A run that failed before its run row (the cluster or a device refused it, interrupted while
    starting) leaves nothing behind: the store this command created is removed when it holds no run
    and no attempt; so is the log it created (`log`, None when it was there before), when the failure
    was bad input or the log is empty (a log that says why workers failed stays). True when the store
    was removed."""
    try:
        if store.count() or store.runs():
            return False
    except sqlite3.Error:
        return False
    store.close()
    for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm"), Path(f"{db}-journal")):
        p.unlink(missing_ok=True)
    if log is not None and log.exists() and (bad_input or log.stat().st_size == 0):
        log.unlink()
    return True


def cmd_backends(args, argv) -> int:
    from ..backends.registry import all_backends

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


def cmd_env(args, argv) -> int:
    from ..runner.worker import run_provenance

    device = _check_device(args.device or _default_device())
    prov = run_provenance(device, 0, measure_ceilings=not args.no_ceilings)
    out.print_json(json.dumps(prov, default=str))
    return 0


def select_rows(df, args):
    """show's filters on the attempts frame: --tag, --where (any workload axis), --backend."""
    from ..store.io import with_tags
    from ..workloads import axes

    df = axes.select_frame(with_tags(df, args.tags, "attempts"), axes.parse_filters(args.where))
    if args.backends:
        unknown = sorted(set(args.backends) - set(df["backend"]))
        if unknown:
            raise UsageError(f"no attempt of backend {unknown[0]!r} in the store")
        df = df[df["backend"].isin(args.backends)]
    return df.reset_index(drop=True)


def cmd_show(args, argv) -> int:
    from ..analysis.frames import per_backend
    from ..analysis.outcomes import device_counts, status_counts
    from ..analysis.overview import run_overview
    from ..analysis.winners import best_per_workload, contestants
    from ..report import terminal
    from ..store.db import Store

    from ..store import model_rows

    store = Store(args.db, readonly=True)
    try:
        df, runs = store.dataframe(), store.runs()
        n_model = len(model_rows.keys(store.con))
    finally:
        store.close()
    if df.empty and n_model and args.format == "table":  # a store `attnbench model` wrote
        out.print(f"{args.db} holds no attempts but {n_model} model rows: attnbench model --db {args.db} --show")
        return 0
    # runs stay whole: ceilings are the device's latest, and the overview counts only runs with rows in df
    df = select_rows(df, args)
    if args.failures:
        failed = df[df["status"] != "OK"]
        frame = failed[["backend", "status", "reason", "repeat", "mode", "batch", "q_len", "kv_len", "q_heads",
                        "kv_heads", "head_dim", "dtype", "causal", "launch", "device_name", "attempt_key"]]
        return _emit(frame, args.format, lambda: [terminal.failures_table(failed)])
    if args.rank:
        ranked = contestants(per_backend(df), args.all)
        return _emit(ranked, args.format, lambda: [terminal.ranking_table(ranked)])
    best = best_per_workload(df, runs, include_references=args.all)
    types = {r.get("device_name"): ((r.get("provenance") or {}).get("device") or {}).get("type") for r in runs}
    return _emit(best, args.format, lambda: terminal.show(
        best, run_overview(df, runs), status_counts(df) if args.status else None, source=args.db,
        attempts=len(df), wide=args.wide or out.width >= terminal.WIDE_COLUMNS, device_types=types,
        width=out.width, devices=device_counts(df) if args.status else None))


def _emit(frame, fmt: str, parts) -> int:
    """The frame as data (csv, md, json) on stdout, or the rich rendering `parts()` gives."""
    from ..report import formats

    if fmt != "table":
        sys.stdout.write(formats.as_text(frame, fmt))
        return 0
    for part in parts():
        out.print(part)
    return 0


def cmd_export(args, argv) -> int:
    from ..store.db import Store
    from ..store.io import export, format_of

    outp = Path(args.out)
    if not outp.parent.exists():
        raise UsageError(f"directory of --out does not exist: {outp.parent}")
    fmt, _ = format_of(outp, args.format)  # a bad name is reported before the store is opened
    store = Store(args.db, readonly=True)
    try:
        n = export(store, fmt, outp, table=args.table, tags=args.tags)
    finally:
        store.close()
    err.print(f"wrote {n} {args.table} to {outp}")
    return 0


def cmd_import(args, argv) -> int:
    from ..store.db import Store
    from ..store.io import import_rows, import_runs, read_rows

    if args.format == "table":  # another tool's results, not an export (store/table_import.py)
        from .comparisons import import_table

        return import_table(args)
    rows = read_rows(args.file, args.format, table=args.table)  # validated before the store is touched
    store = Store(args.db)
    if args.table == "runs":
        n = import_runs(store, rows)
        err.print(f"imported {n} runs ({len(rows) - n} already present) into {args.db}")
    elif args.table == "model_rows":
        from ..store.io import import_model_rows

        n = import_model_rows(store, rows)
        err.print(f"imported {n} new model rows ({len(rows) - n} already present) into {args.db}")
    else:
        n = import_rows(store, rows)
        err.print(f"imported {n} new attempts ({len(rows) - n} already present) into {args.db}")
    store.close()
    return 0
