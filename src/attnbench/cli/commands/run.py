"""`attnbench run`: measure a grid of workloads over the available backends, one row per attempt (resumes)."""
from __future__ import annotations

import argparse
import contextlib
import errno
import logging
import shlex
import signal
import threading
from pathlib import Path

from rich.markup import escape

from ...runner.executors import REGISTRY as EXECUTORS
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
    r.add_argument("--executor", choices=tuple(EXECUTORS), default="local",
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
    r.add_argument("--causal", choices=("true", "false", "both"), default="both",
                   help="keep causal, non-causal or both")
    r.add_argument("--dtype", type=csv_list, help="keep only these dtypes, e.g. bf16,fp16")
    r.add_argument("--timeout", type=float, default=300.0, metavar="S",
                   help="seconds per attempt, compile included, before the worker is killed (default 300)")
    r.add_argument("--tag", default="default", help="sweep label; a new tag starts a new sweep in the same store")
    r.add_argument("--seed", type=int, default=0, help="input seed (default 0)")
    r.add_argument("--tol", type=float, default=None,
                   help="max error ratio against the same-dtype unfused reference, for every dtype (default: "
                        "per dtype from the measured spread of correct kernels: fp32 16, bf16 and fp16 3; "
                        "fp8_e4m3: the fp8 contract, 1.5x its scheme's emulated error; "
                        "docs/methodology.md)")
    r.add_argument("--inputs", default="normal", metavar="DIST",
                   help="distribution of the inputs that are checked first and timed: normal N(0,1) (default), "
                        "outliers N(0,1)+N(0,100)·Bernoulli(0.001), large-logits (logits with std ~30), "
                        "fa3-outliers[:rate=R,std=S] (FlashAttention-3's Table 3 protocol, default rate 0.001, "
                        "std 10), or file:PATH.npz|.safetensors (arrays q, k, v in each workload's shapes); the "
                        "correctness check always also runs outliers and large-logits")
    r.add_argument("--fresh-inputs", action="store_true",
                   help="new input values before every timed call, written outside the timed interval (every "
                        "workload's fresh_inputs axis; a YAML grid can set it per block), so that no result "
                        "cached on the inputs is timed, and samples on repeated values are compared "
                        "(docs/method/fresh-inputs.md)")
    r.add_argument("--max-time", type=float, default=None, metavar="S",
                   help="timing budget per attempt after warm-up (default 0.5 s on CUDA, 0.3 s on CPU)")
    r.add_argument("--min-time", type=float, default=None, metavar="S",
                   help="sample every attempt for at least S seconds of timed calls, even once its median has "
                        "converged (more samples of the same block; the budget grows to 2·S if smaller). Default: "
                        "none, the rule stops at convergence. Longer windows see sustained clocks and power, and "
                        "make the sweep's wall mostly samples (docs/methodology.md 4.5)")
    r.add_argument("--exclusive", action="store_true",
                   help="refuse to start (exit 2, naming the PIDs) while another process is on the run's GPU "
                        "(NVML); without it such rows are measured and flagged gpu_shared (docs/method/ceilings.md)")
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
    r.add_argument("--counters", nargs="?", const="standard", metavar="SET",
                   help="after timing, replay each OK attempt's step once under Nsight Compute and store its hardware "
                        "counters and bound (table counters; SET: standard, the default, or bytes); the phase's wall "
                        "is phases_s.counters, never part of a sample (docs/method/counters.md)")
    r.add_argument("--take-over-claims", action="store_true",
                   help="take the attempts that runs on other hosts claim, however recently they refreshed their "
                        "claims: for a run you know is gone (killed, re-queued, a store copied here). Without it a "
                        "claim of another host lapses after 10 minutes without its run's heartbeat; a claim of this "
                        "host lapses when its process has ended (docs/usage.md, Sharing a store)")


def _check_inputs(name: str, workloads) -> None:
    from ...measure import distributions

    if name.startswith("file:") and any(getattr(w, "fresh_inputs", False) for w in workloads):
        # a file's values are the same on every refill: "fresh" timed calls would see one set again and again
        raise UsageError(f"--inputs {name}: a file gives the same values on every call, so fresh inputs "
                         "(--fresh-inputs or a grid's fresh_inputs) cannot be new; drop one of the two")
    try:
        distributions.parse(name)
        distributions.check_file(name, workloads)
    except ValueError as e:
        raise UsageError(f"--inputs: {e}") from None


def run(args) -> int:
    from ...backends.registry import select
    from ...runner.conduct import RunRequest, conduct
    from ...runner.options import check_plan_size, make_executor, run_options
    from ...runner.session import RunSession
    from ..progress import SweepProgress, summary

    options = run_options(
        executor=args.executor, device=args.device, devices=args.devices, replicate=args.replicate,
        address=args.address, repeats=args.repeats, timeout_s=args.timeout, tol=args.tol, max_time_s=args.max_time,
        min_time_s=args.min_time, db=args.db, tag=args.tag, seed=args.seed, inputs=args.inputs, plugins=args.plugin,
        strict_isolation=args.strict_isolation, dry_run=args.dry_run, log_level=_worker_log_level(args.verbose),
        compile_cache=args.compile_cache, counters=args.counters)
    if args.exclusive:  # issue 39.5: nothing else on the run's GPUs, asked before anything starts
        from ...measure.concurrency import refusal

        why = refusal([d.torch_device for d in options.target.devices or ()] or [options.device])
        if why:
            raise UsageError(why)
    if args.grid is None and args.config is None:
        args.grid = "smoke" if options.device == "cpu" else "quick"
    grid_name, workloads = select_workloads(args)
    _check_inputs(args.inputs, workloads)  # issue 40: a bad distribution or file is one line, before any row
    backends = select(args.backends, args.plugin)
    check_plan_size(len(workloads), len(backends), args.repeats)  # before workers start or a plan is made
    req = RunRequest(options.label, workloads, backends, args.repeats, args.tag, args.seed, args.inputs, grid_name,
                     shlex.join(["attnbench"] + list(args.argv)), args.retry_failed, args.began,
                     take_over_claims=args.take_over_claims)
    if args.dry_run:
        return _dry_run(make_executor(options), req, options)
    session = RunSession(options.db, Path(options.log_path), options.cache)  # refuses a store it cannot write
    try:
        try:
            executor = make_executor(options)  # after the session holds the cache: it reads the cache's state
            with _sigterm_as_interrupt(), SweepProgress(console.err) as prog:
                report = _ray_errors(conduct, executor, session.store, req, prog)
        except BaseException as e:
            kept = session.failed(bad_input=isinstance(e, UsageError))
            if kept is not None:
                console.err.print(f"compiled code kept for the resume: {escape(str(options.cache.sweep))} "
                                  f"({kept / 2**20:.0f} MiB; removed when the sweep finishes, or delete it)",
                                  soft_wrap=True)
            if isinstance(e, Terminated):
                console.err.print("attnbench: terminated (SIGTERM); this run's claims are released: run the same "
                                  "command again to resume", soft_wrap=True, markup=False, highlight=False)
                return 128 + signal.SIGTERM
            if isinstance(e, OSError) and e.errno == errno.ENOSPC:
                where = (str(e).splitlines() or ["no space left"])[0]
                console.err.print(f"attnbench: error: the disk is full ({where}); every row written before is kept: "
                                  "free space and run the same command again to resume", soft_wrap=True,
                                  markup=False, highlight=False)
                return 1
            raise
        session.finished(report.held)
        summary(console.err, session.store, report.counts, report.resumed, options.db, report.overhead_s,
                report.startup_s)
        if report.held:
            console.err.print(f"[bold yellow]{report.held} attempts have no row[/]: another live run claims them "
                              f"({escape(report.held_by or 'unknown')}); run again once it has ended. A claim of "
                              "another host lapses 10 minutes after its last heartbeat; --take-over-claims takes "
                              "them now", soft_wrap=True)
        return 0
    finally:
        session.close()


class Terminated(KeyboardInterrupt):
    """SIGTERM (a batch system's stop, `kill`), raised where the run is, as Ctrl-C is: workers stopped, this
    run's claims released, the compiler cache kept for the resume."""


@contextlib.contextmanager
def _sigterm_as_interrupt():
    """While the run lives, SIGTERM raises Terminated in the main thread; a second SIGTERM during the clean-up
    is ignored (SIGKILL still stops it)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminated(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _dry_run(executor, req, options) -> int:
    """The plan's counts, where each device is, and an ETA; writes nothing."""
    from collections import Counter

    from ...runner.conduct import plan_only

    with console.err.status(f"starting workers on {options.label} to read the device..."):
        try:
            attempts = _ray_errors(plan_only, executor, req)
        finally:
            executor.close()
    c = Counter(a.planned.value if a.planned else "TO_RUN" for a in attempts)
    placements, labels = executor.placements, executor.labels
    copies = f" × {len(placements)} devices" if placements and options.replicate else ""
    console.out.print(f"{len(req.workloads)} workloads × {len(req.backends)} backends × {options.repeats} repeats"
                      f"{copies} = {len(attempts)} attempts: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())),
                      markup=False)
    for lab, p in zip(labels, placements):
        console.out.print(f"  {lab}: {p.device_name}, uuid {p.device_uuid or '-'}, "
                          f"host cores {p.host_cores or 'not pinned'}", markup=False)  # names are data
    _print_eta(attempts, options.db, len(placements) or 1, options.timing().min_time_s)
    return 0


def _print_eta(attempts, db, n_devices: int, min_time_s: float = 0.0) -> None:
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
    console.out.print(f"already stored: {len(attempts) - len(todo)}; ETA {duration(est.seconds)} on {n_devices} "
                      f"device(s) ({est.from_store} attempts at the median wall_s of earlier OK rows of their backend "
                      f"and mode, {est.by_default} at {DEFAULT_ATTEMPT_S:g} s; worker start-up not included)")


def _worker_log_level(verbose: int) -> int:
    return (logging.WARNING, logging.INFO, logging.DEBUG)[min(verbose, 2)]


def _ray_errors(fn, *args):
    """fn(*args), a Ray cluster that cannot serve the run (executors/ray_cluster.py ClusterError) as a usage error."""
    from ...runner.executors.ray_cluster import ClusterError  # imports no Ray itself

    try:
        return fn(*args)
    except ClusterError as e:
        raise UsageError(str(e)) from None
