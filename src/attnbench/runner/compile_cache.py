"""A run's compiler cache (Inductor, Triton, JAX) as one policy: --compile-cache DIR is the user's and
kept; by default the sweep's own cache beside its store (DB.compile-cache), empty when the sweep starts,
kept when a run is interrupted (the resumed run loads what it compiled, as one uninterrupted run would)
and removed once the sweep has finished."""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

SWEEP_CACHE_SUFFIX = ".compile-cache"


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
                "run_cache_resumed": bool(sweep and sweep.is_dir() and any(sweep.iterdir()))}

    def kept_size(self) -> int | None:
        """Bytes of compiled code the sweep's cache holds, None when there is none."""
        if self.sweep is None or not self.sweep.is_dir():
            return None
        return sum(f.stat().st_size for f in self.sweep.rglob("*") if f.is_file())

    def after_failure(self, store_dropped: bool) -> int | None:
        """A run that failed or was interrupted: the sweep's cache is kept for the resume (its size in
        bytes is returned) unless the store went too (nothing to resume: removed, None)."""
        if self.sweep is None:
            return None
        if store_dropped:
            shutil.rmtree(self.sweep, ignore_errors=True)
            return None
        return self.kept_size()

    def after_run(self, held: int) -> None:
        """A run that ended: the sweep has finished unless another run still holds attempts (which uses it)."""
        if self.sweep is not None and not held:
            shutil.rmtree(self.sweep, ignore_errors=True)
