"""Where a sweep keeps its compiler cache (Inductor, Triton, JAX) until the sweep has finished."""
from __future__ import annotations

from pathlib import Path

SWEEP_CACHE_SUFFIX = ".compile-cache"


def sweep_cache_of(db: Path) -> Path:
    """Where `run` keeps a sweep's compiler cache (Inductor, Triton, JAX) until the sweep has finished."""
    return db.with_name(db.name + SWEEP_CACHE_SUFFIX)
