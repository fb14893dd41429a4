"""A run's compiler cache (Inductor, Triton, JAX) as one policy: --compile-cache DIR is the user's and
kept; by default the sweep's own cache beside its store (DB.compile-cache), empty when the sweep starts,
kept when a run is interrupted (the resumed run loads what it compiled, as one uninterrupted run would)
and removed once the sweep has finished and no live run uses it (a lease: CacheLease)."""
from __future__ import annotations

import fcntl
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

SWEEP_CACHE_SUFFIX = ".compile-cache"
# Inside the sweep's cache: every run using the cache holds a shared flock on this file for its whole life
# (the kernel drops it when the process dies, kill -9 included); the cache is removed only by a run that
# then gets the exclusive lock, i.e. when no other live run uses it.
LEASE_FILE = ".runs.lock"


def sweep_cache_of(db: Path) -> Path:
    """Where `run` keeps a sweep's compiler cache (Inductor, Triton, JAX) until the sweep has finished."""
    return db.with_name(db.name + SWEEP_CACHE_SUFFIX)


@dataclass(frozen=True)
class CompileCache:
    named: Path | None  # --compile-cache DIR: the user's, kept across runs
    sweep: Path | None  # the sweep's beside its store; None: a named cache, a dry run, or workers on other hosts

    @classmethod
    def of(cls, db: Path, named: str | None, sweep: bool) -> "CompileCache":
        """The policy of a run on store `db` (sweep: a cache beside the store applies: its workers run on
        this host and it writes rows). ValueError when the sweep's cache path is taken by a file."""
        if named:  # an empty --compile-cache names none
            return cls(Path(named), None)
        if not sweep:
            return cls(None, None)
        path = sweep_cache_of(db)
        if path.exists() and not path.is_dir():
            raise ValueError(f"{path} is where this store's compiler cache is kept, and it is not a directory")
        return cls(None, path)

    def worker_config(self) -> dict:
        """The executors' LocalConfig fields (executors/local.py); the sweep's cache is resumed when an
        interrupted run left compiled code in it."""
        sweep = self.sweep
        return {"compile_cache": str(self.named.resolve()) if self.named else None,
                "run_cache": str(sweep.resolve()) if sweep else None,
                "run_cache_resumed": bool(sweep and sweep.is_dir() and any(p.name != LEASE_FILE
                                                                           for p in sweep.iterdir()))}

    def kept_size(self) -> int | None:
        """Bytes of compiled code the sweep's cache holds, None when there is none (its lock file is none)."""
        if self.sweep is None or not self.sweep.is_dir():
            return None
        files = [f for f in self.sweep.rglob("*") if f.is_file() and f.name != LEASE_FILE]
        return sum(f.stat().st_size for f in files) if files else None

    def enter(self) -> "CacheLease | None":
        """This run uses the sweep's cache from now until the lease is ended (None: no sweep cache)."""
        return CacheLease.take(self.sweep) if self.sweep is not None else None

    def after_failure(self, store_dropped: bool, lease: "CacheLease | None" = None) -> int | None:
        """A run that failed or was interrupted: the sweep's cache is kept for the resume (its size in
        bytes is returned) unless the store went too (nothing to resume: removed, None), and then only
        when no other live run uses it."""
        if self.sweep is None:
            return None
        size = None if store_dropped else self.kept_size()
        # nothing to resume (the store went, or nothing was compiled): removed unless another live run uses it
        self._end(lease, remove=size is None)
        return size

    def after_run(self, held: int, lease: "CacheLease | None" = None) -> None:
        """A run that ended: the sweep has finished unless another run still holds attempts; its cache is
        removed then, unless another live run uses it (a run of another tag, one still starting, one whose
        plan goes beyond this one's): its compiles would fail on files removed under them."""
        if self.sweep is not None:
            self._end(lease, remove=not held)

    def _end(self, lease: "CacheLease | None", remove: bool) -> bool:
        """End the run's lease; a caller that took none leases the cache for the moment it decides."""
        if lease is None:
            if not remove or not self.sweep.is_dir():
                return False
            lease = CacheLease.take(self.sweep)
        return lease.end(remove)


class CacheLease:
    """One run's use of the sweep's cache: a shared flock on LEASE_FILE inside it, held until end()."""

    def __init__(self, path: Path, fd: int | None):
        self.path, self.fd = path, fd

    @classmethod
    def take(cls, path: Path) -> "CacheLease":
        """Make the cache (if absent) and hold a shared lock in it. A lock file opened just before another
        run removed the cache is not the cache's: taken again on the new one."""
        for _ in range(100):
            try:
                path.mkdir(parents=True, exist_ok=True)
                fd = os.open(path / LEASE_FILE, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as e:  # the run fails later, saying why; nothing to hold meanwhile
                log.warning("compiler cache %s cannot be used: %s", path, e)
                return cls(path, None)
            try:
                fcntl.flock(fd, fcntl.LOCK_SH)
                if os.fstat(fd).st_ino == os.stat(path / LEASE_FILE).st_ino:
                    return cls(path, fd)
            except OSError:
                pass  # removed between open and lock: take it again
            os.close(fd)
        return cls(path, None)

    def end(self, remove: bool) -> bool:
        """Let go of the cache; with `remove`, delete it when no other live run holds it. True when removed.
        Without a lock (a file system that refuses flock) the cache is kept: another run may be using it."""
        fd, self.fd = self.fd, None
        if fd is None:
            return False
        try:
            if not remove:
                return False
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held until the close below: no run enters meanwhile
            except OSError:
                return False  # another run holds it: that run (or the last one using it) removes it
            shutil.rmtree(self.path, ignore_errors=True)
            return True
        finally:
            os.close(fd)
