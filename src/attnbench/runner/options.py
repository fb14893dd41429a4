"""A run's options, validated before anything is written: one frozen RunOptions built by run_options(),
or OptionsError (bad input: the command line prints its one line and exits 2)."""
from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path

from .compile_cache import CompileCache
from .executors import REGISTRY
from .executors import devices as _devices
from .executors.base import Executor, Target


class OptionsError(ValueError):
    """Options that cannot make a run (the command line turns it into its one-line usage error, exit 2)."""


default_device = _devices.default_device
# The most attempts one run plans: planning costs about 1 ms and 2.5 kB an attempt (the portability grid, 42,240
# attempts: 40 s on a loaded 2-core host), so 100,000 is minutes and a few hundred MB before the first attempt;
# --repeats 1000000000 was accepted and planned with growing memory until killed.
MAX_ATTEMPTS = 100_000


def check_plan_size(workloads: int, backends: int, repeats: int) -> None:
    """Refuse a plan of more than MAX_ATTEMPTS attempts (workloads × backends × repeats) before it is made."""
    n = workloads * backends * repeats
    if n > MAX_ATTEMPTS:
        raise OptionsError(f"--repeats {repeats}: {workloads} workloads × {backends} backends × {repeats} repeats = "
                           f"{n:,} attempts, more than the {MAX_ATTEMPTS:,} one run plans; use fewer repeats, "
                           "backends or workloads (a later run with the same --tag adds to the same sweep)")


def check_device(device: str) -> str:
    """cpu, cuda or cuda:N, which this host has."""
    try:
        return _devices.check_device(device)
    except ValueError as e:
        raise OptionsError(str(e)) from None


@dataclass(frozen=True)
class RunOptions:
    """What a run does and where, every value checked."""

    executor: str  # a name of the executors' REGISTRY
    target: Target  # where its attempts go: the device the defaults follow, the devices, the label
    replicate: bool
    address: str | None
    repeats: int
    timeout_s: float
    tol: float | None
    max_time_s: float | None
    min_time_s: float | None
    db: Path
    tag: str
    seed: int
    inputs: str
    plugins: tuple[str, ...]  # resolved paths of --plugin files
    strict_isolation: bool
    dry_run: bool
    log_level: int  # the workers' logging level
    cache: CompileCache
    counters: str | None = None  # issue 39: the counter set of the counters phase (run --counters); None: no phase

    @property
    def device(self) -> str:
        return self.target.device

    @property
    def label(self) -> str:
        return self.target.label

    @property
    def log_path(self) -> str:
        """The workers' log beside the store (none for a dry run: it writes nothing)."""
        return os.devnull if self.dry_run else str(self.db.with_name(self.db.name + ".log"))

    def timing(self):
        """The stopping rule's settings on the run's device (measure/timing.py TimingConfig)."""
        from ..measure.timing import TimingConfig

        return TimingConfig.for_device(self.device, self.max_time_s, self.min_time_s)

    def worker_config(self):
        """The executors' LocalConfig (executors/local.py); the compiler cache's state is read now."""
        from .executors.local import LocalConfig

        from ..measure.counters_ncu import TIMEOUT_S as COUNTERS_S

        # the counters phase runs inside the attempt: its own limit is added to the attempt's (issue 39)
        timeout_s = self.timeout_s + (COUNTERS_S if self.counters else 0.0)
        return LocalConfig(plugins=list(self.plugins), timeout_s=timeout_s, seed=self.seed, tol=self.tol,
                           inputs=self.inputs, timing=self.timing(), log_path=self.log_path,
                           strict_isolation=self.strict_isolation, log_level=self.log_level,
                           counters=self.counters, **self.cache.worker_config())


def make_executor(options: RunOptions) -> Executor:
    """The executor the options name, built by its registration."""
    return REGISTRY[options.executor].build(options.worker_config(), options.target, options.replicate,
                                            options.address)


def run_options(*, executor: str = "local", device: str | None = None, devices: str | None = None,
                replicate: bool = False, address: str | None = None, repeats: int = 3, timeout_s: float = 300.0,
                tol: float | None = None, max_time_s: float | None = None, min_time_s: float | None = None,
                db: str = "attnbench.sqlite", tag: str = "default", seed: int = 0, inputs: str = "normal",
                plugins: tuple[str, ...] | list[str] = (), strict_isolation: bool = False, dry_run: bool = False,
                log_level: int = logging.WARNING, compile_cache: str | None = None,
                counters: str | None = None) -> RunOptions:
    """Every option checked, the device options by the executor's own registration (devices: --devices
    as given, e.g. "all", "0,1" or "cpu:0,cpu:1"); OptionsError with one line for the first bad one."""
    if executor not in REGISTRY:
        raise OptionsError(f"unknown executor {executor!r}: use {', '.join(REGISTRY)}")
    if device is not None and not device.strip():  # '' would fall back to the default device without a word
        raise OptionsError("--device is empty: use cpu, cuda or cuda:N (or leave it out for the default)")
    try:
        target = REGISTRY[executor].resolve(device, devices, replicate, address)
    except ValueError as e:
        raise OptionsError(str(e)) from None
    if repeats < 1:
        raise OptionsError("--repeats must be at least 1")
    if repeats > MAX_ATTEMPTS:  # refused before any grid is read; run.py checks the whole plan's size
        raise OptionsError(f"--repeats {repeats} makes more than the {MAX_ATTEMPTS:,} attempts one run plans")
    for name, value in (("--timeout", timeout_s), ("--tol", tol), ("--max-time", max_time_s),
                        ("--min-time", min_time_s)):
        if value is not None and not (math.isfinite(value) and value > 0):  # inf --tol would switch the check off
            raise OptionsError(f"{name} must be positive and finite, got {value:g}")
    if not db.strip():
        raise OptionsError("--db is empty")
    if not tag.strip():
        raise OptionsError("--tag is empty")
    if compile_cache is not None:
        named = Path(compile_cache)
        if (named.exists() and not named.is_dir()) or not named.parent.exists():
            raise OptionsError(f"--compile-cache {named} is not a directory that exists or can be made")
    if counters is not None:  # issue 39
        from ..measure.counters import SETS

        if counters not in SETS:
            raise OptionsError(f"--counters {counters}: unknown counter set; use one of {', '.join(SETS)}")
    path = Path(db)
    if not path.parent.exists():
        raise OptionsError(f"directory of --db does not exist: {path.parent}")
    try:
        cache = CompileCache.of(path, compile_cache, sweep=target.on_this_host and not dry_run)
    except ValueError as e:
        raise OptionsError(str(e)) from None
    return RunOptions(executor, target, replicate, address, repeats, timeout_s, tol, max_time_s, min_time_s, path,
                      tag, seed, inputs, tuple(str(Path(p).resolve()) for p in plugins), strict_isolation, dry_run,
                      log_level, cache, counters)
