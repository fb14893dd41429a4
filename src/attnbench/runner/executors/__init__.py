"""Executors: where a run's attempts run, siblings under one base (base.py, pooled.py for several
devices), and the registry the command line reads (--executor NAME). Adding an executor is one new
module with a class and its REGISTRATION, plus one entry in REGISTRY below."""
from __future__ import annotations

from . import multi, ray
from .base import Registration

REGISTRY: dict[str, Registration] = {r.name: r for r in (multi.REGISTRATION, ray.REGISTRATION)}
