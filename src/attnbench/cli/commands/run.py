"""`attnbench run`: measure a grid of workloads over the available backends, one row per attempt (resumes)."""
from __future__ import annotations

import argparse
import math
import os
import shlex
import shutil
import sqlite3
from pathlib import Path

from rich.markup import escape

from ...runner.compile_cache import sweep_cache_of
from ...workloads.axes import NAMES as AXIS_NAMES
from ...workloads.grids import GRIDS
from .. import console
from ..selection import select_workloads
from ..usage import DEFAULT_DB, UsageError, csv_list

NAME = "run"
HELP = "measure a grid of workloads over the available backends (resumes)"
DESCRIPTION = ("Plan grid × backends × repeats, check each attempt against float64, probe the kernels it ran, "
               "time it, and store one row per attempt. Running the same command again resumes: finished attempts "
               "are skipped.")


def add_arguments(r) -> None:
    r.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                   help="more logging, workers included (-vv for debug)")
    src = r.add_mutually_exclusive_group()
    src.add_argument("--grid", help=f"named grid: {', '.join(GRIDS)} (default: smoke on CPU, quick on CUDA)")
    src.add_argument("--config", metavar="FILE.yaml", help="a YAML grid (see docs/grids.md)")
    r.add_argument("--backends", type=csv_list, help="comma list of backend names (default: all)")
    r.add_argument("--modes", type=csv_list, help="keep only these modes (train_fwd,train_fwd_bwd,prefill,decode)")
    r.add_argument("--device", help="cpu, cuda or cuda:N (default: cuda if present, else cpu)")
    r.add_argument("--devices", metavar="all|0,1,...",
                   help="run on several devices at once, one warm worker set per device pinned to host cores of "
                        "its own, each pulling whole (repeat, workload) groups: all (every visible GPU), CUDA indices "
                        "(0,1), or cpu:0,cpu:1 (fake CPU devices, for tests and laptops); the plan is sharded "
                        "(attempt keys as on one device) unless --replicate")
    r.add_argument("--replicate", action="store_true",
                   help="with --devices: every device runs the whole plan, its attempts keyed by the device's UUID "
                        "(their comparison is the method's noise floor)")
    r.add_argument("--executor", choices=("local", "ray"), default="local",
                   help="where attempts run: local (default: worker processes on this host, --device or --devices) "
                        "or ray (one Ray actor per GPU of a Ray cluster, each with its own warm workers; the plan is "
                        "sharded per GPU model, or run whole on every GPU with --replicate; rows are written here, "
                        "an actor lost mid-attempt has its attempts run again; needs pip install 'attnbench[ray]'). "
                        "With ray, --devices is all (default) or cpu:0,cpu:1 (fake CPU devices)")
    r.add_argument("--address", metavar="ADDR",
                   help="with --executor ray: the Ray cluster to join (auto: the one `ray start` runs on this host; "
                        "HOST:PORT or ray://HOST:10001: a head, which must answer within 5 s); default: start a "
                        "local Ray instance for this run")
    r.add_argument("--db", default=DEFAULT_DB, help=f"SQLite store (default: ./{DEFAULT_DB})")
    r.add_argument("--repeats", type=int, default=3,
                   help="process-level repeats of every attempt (default 3: the fewest from which a lead's "
                        "separation can be judged over repeats, not only over one process's samples)")
    r.add_argument("--plugin", action="append", default=[], metavar="FILE.py",
                   help="load backends from a Python file (BACKENDS list or backends()); repeatable")
    r.add_argument("--seqlen", type=csv_list, help="keep only these KV lengths, e.g. 1k,4k")
    r.add_argument("--where", action="append", metavar="AXIS=V1,V2",
                   help="keep only workloads whose AXIS is one of the values; repeatable; AXIS is any workload "
                        f"field ({', '.join(AXIS_NAMES)}), e.g. --where launch=graph --where batch=1,8")
    r.add_argument("--causal", choices=("true", "false", "both"), default="both", help="keep causal, non-causal or both")
    r.add_argument("--dtype", type=csv_list, help="keep only these dtypes, e.g. bf16,fp16")
    r.add_argument("--timeout", type=float, default=300.0, metavar="S",
                   help="seconds per attempt, compile included, before the worker is killed (default 300)")
    r.add_argument("--tag", default="default", help="sweep label; a new tag starts a new sweep in the same store")
    r.add_argument("--seed", type=int, default=0, help="input seed (default 0)")
    r.add_argument("--tol", type=float, default=None,
                   help="max error ratio against the same-dtype unfused reference, for every dtype (default: "
                        "per dtype from the measured spread of correct kernels: fp32 16, bf16 and fp16 3; "
                        "fp8_e4m3 2, provisional; "
                        "docs/methodology.md)")
    r.add_argument("--inputs", choices=("normal", "outliers", "large-logits"), default="normal",
                   help="distribution of the inputs that are checked first and timed: normal N(0,1) (default), "
                        "outliers N(0,1)+N(0,100)·Bernoulli(0.001), or large-logits (logits with std ~30); the "
                        "correctness check always also runs the other two")
    r.add_argument("--max-time", type=float, default=None, metavar="S",
                   help="timing budget per attempt after warm-up (default 0.5 s on CUDA, 0.3 s on CPU)")
    r.add_argument("--min-time", type=float, default=None, metavar="S",
                   help="sample every attempt for at least S seconds of timed calls, even once its median has "
                        "converged (more samples of the same block; the budget grows to 2·S if smaller). Default: "
                        "none, the rule stops at convergence. Longer windows see sustained clocks and power, and "
                        "make the sweep's wall mostly samples (docs/methodology.md 4.5)")
    r.add_argument("--strict-isolation", action="store_true",
                   help="a fresh process for every attempt of compile-based backends (slower; default: "
                        "one process per backend and repeat, compiler state reset before each attempt)")
    r.add_argument("--compile-cache", metavar="DIR",
                   help="where torch.compile, Triton and JAX keep compiled code (kept across runs, so cold starts "
                        "after the first are cache hits); default: the sweep's own cache beside the store "
                        "(DB.compile-cache), empty when the sweep starts, kept if the run is interrupted so that "
                        "the resumed run loads what it compiled, and removed once every attempt has a row: the "
                        "first repeat's cold_start_us includes compilation")
    r.add_argument("--dry-run", action="store_true",
                   help="print the plan's counts and an ETA (median wall_s per backend and mode of earlier OK rows "
                        "in --db, else 10 s an attempt) and exit (starts workers to read the device; writes nothing)")
    r.add_argument("--retry-failed", action="store_true",
                   help="on resume, run again the attempts of this tag that ended TIMEOUT, CRASH or ERROR "
                        "(their rows are replaced)")


def _check_ray(args):
    """--executor ray: Ray importable, and --devices as fake CPU devices (a list of DeviceSpec) or None
    (every GPU of the cluster)."""
    from ...runner.multi import parse_devices

    try:
        import ray  # noqa: F401
    except ImportError:
        raise UsageError("--executor ray needs Ray, which is not installed: pip install 'attnbench[ray]'") from None
    if args.device is not None:
        raise UsageError("--device and --executor ray exclude each other (use --devices all, or cpu:0,cpu:1)")
    from ...runner.ray_exec import cluster_target

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
    from ...runner.multi import parse_devices

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
    from ...runner.eta import DEFAULT_ATTEMPT_S, duration, estimate, typical_sampled, typical_wall
    from ...store.db import Store

    rows, done = [], set()
    if db.exists():
        prior = Store(db, readonly=True)
        try:
            rows, done = prior.attempts("WHERE status='OK'"), prior.done_keys()
        finally:
            prior.close()
    todo = [a for a in attempts if a.key not in done]
    est = estimate(todo, typical_wall(rows), n_devices, min_time_s=min_time_s, sampled=typical_sampled(rows))
    console.out.print(f"already stored: {len(attempts) - len(todo)}; ETA {duration(est.seconds)} on {n_devices} device(s) "
              f"({est.from_store} attempts at the median wall_s of earlier OK rows of their backend and mode, "
              f"{est.by_default} at {DEFAULT_ATTEMPT_S:g} s; worker start-up not included)")


def _worker_log_level(verbose: int) -> int:
    import logging

    return (logging.WARNING, logging.INFO, logging.DEBUG)[min(verbose, 2)]


def _ray_errors(fn, *args):
    """fn(*args), a Ray cluster that cannot serve the run (runner.ray_exec.ClusterError) as a usage error."""
    from ...runner.ray_exec import ClusterError  # imports no Ray itself

    try:
        return fn(*args)
    except ClusterError as e:
        raise UsageError(str(e)) from None


def run(args) -> int:
    from ...backends.registry import select
    from ...measure.timing import TimingConfig
    from ...runner.conduct import RunRequest, conduct, plan_only
    from ...runner.local import LocalConfig, LocalExecutor
    from ...store.db import Store
    from ...runner.options import check_device, default_device
    from ..progress import SweepProgress, summary

    devices = _check_devices(args)
    ray = args.executor == "ray"
    if ray:
        device = "cpu" if devices else "cuda"  # the cluster's GPUs (the driver need not have one)
    else:
        device = devices[0].torch_device if devices else check_device(args.device or default_device())
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
                     shlex.join(["attnbench"] + list(args.argv)), args.retry_failed, args.began)
    if ray:
        from ...runner.ray_exec import RayExecutor

        executor = RayExecutor(cfg, devices, args.replicate, args.address)
    elif devices:
        from ...runner.multi import MultiExecutor

        executor = MultiExecutor(cfg, devices, args.replicate)
    else:
        executor = LocalExecutor(cfg)
    if args.dry_run:
        from collections import Counter

        with console.err.status(f"starting workers on {label} to read the device..."):
            try:
                attempts = _ray_errors(plan_only, executor, req)
            finally:
                executor.close()
        c = Counter(a.planned.value if a.planned else "TO_RUN" for a in attempts)
        placements, labels = executor.placements, executor.labels
        copies = f" × {len(placements)} devices" if placements and args.replicate else ""
        console.out.print(f"{len(workloads)} workloads × {len(backends)} backends × {args.repeats} repeats{copies} = "
                  f"{len(attempts)} attempts: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
        for lab, p in zip(labels, placements):
            console.out.print(f"  {lab}: {p.device_name}, uuid {p.device_uuid or '-'}, "
                      f"host cores {p.host_cores or 'not pinned'}")
        _print_eta(attempts, db, len(placements) or 1, cfg.timing.min_time_s)
        return 0
    log = Path(cfg.log_path)
    new_db, new_log = not db.exists(), not log.exists()
    store = Store(db)  # opened first: a path that is no store is refused before any worker starts
    try:
        try:
            with SweepProgress(console.err) as prog:
                report = _ray_errors(conduct, executor, store, req, prog)
        except BaseException as e:
            dropped = new_db and _drop_unused(store, db, log if new_log else None, bad_input=isinstance(e, UsageError))
            if sweep_cache and dropped:  # nothing to resume
                shutil.rmtree(sweep_cache, ignore_errors=True)
            elif sweep_cache and sweep_cache.is_dir():
                size = sum(f.stat().st_size for f in sweep_cache.rglob("*") if f.is_file())
                console.err.print(f"compiled code kept for the resume: {escape(str(sweep_cache))} ({size / 2**20:.0f} MiB; "
                          "removed when the sweep finishes, or delete it)", soft_wrap=True)
            raise
        if sweep_cache and not report.held:  # the sweep has finished (a run still holding attempts uses it)
            shutil.rmtree(sweep_cache, ignore_errors=True)
        summary(console.err, store, report.counts, report.resumed, db, report.overhead_s, report.startup_s)
        if report.held:
            console.err.print(f"[bold yellow]{report.held} attempts have no row[/]: another run claims them (still running, "
                      "or on another host); run again once it has ended")
        return 0
    finally:
        store.close()


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
