"""A published row as the referee holds it, and what every reader shares (dtype names, GPU names, errors)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ...workloads import Workload, WorkloadError


class ReadError(ValueError):
    """A file the referee cannot read as any supported format, or a malformed row of one (one line)."""


@dataclass(frozen=True)
class Published:
    """One published figure (one pass of one row) and the attnbench workload and backends that re-measure it.

    A row that cannot be mapped keeps `refusal` (why, one line) and no workload."""

    row: int  # where in the file: a CSV's data row (1-based, the header not counted), a text file's line
    harness_backend: str  # the backend as the publisher names it
    passname: str  # the pass the figure times: fwd, fwd+bwd, prefill, decode
    figure: float | None  # the figure as published
    unit: str  # its unit: TFLOP/s, GB/s or ms
    time_ms: float | None  # the published time: given, or the publisher's FLOPs / the published TFLOP/s
    workload: Workload | None = None
    backends: tuple[str, ...] = ()  # attnbench backends that re-measure it
    publisher_amount: float | None = None  # FLOPs (or bytes, for GB/s) the publisher divided by
    convention: str = ""  # the publisher's FLOP or byte convention, in words
    gpu: str | None = None  # the GPU model the publisher names (None: not stated)
    toolkit: dict = field(default_factory=dict)  # library -> version, as published
    timing: str = ""  # how the publisher timed, in words
    spread_ms: tuple[float, float] | None = None  # the published interval of time_ms, when published
    refusal: str | None = None  # why the row is not re-measured


@dataclass(frozen=True)
class Sheet:
    """What one file holds: its format, its rows, and what the whole format leaves unsaid."""

    fmt: str  # e.g. "cudnn-frontend training CSV"
    rows: list[Published]
    notes: list[str] = field(default_factory=list)  # assumptions made for the whole file (one line each)


DTYPES = {"bfloat16": "bf16", "bf16": "bf16", "float16": "fp16", "fp16": "fp16", "half": "fp16",
          "float32": "fp32", "fp32": "fp32"}


def dtype_of(name: str) -> str | None:
    """attnbench's name of a published 16/32-bit dtype, or None (fp8 and block-scaled formats are not mapped)."""
    return DTYPES.get(str(name).strip().lower().removeprefix("torch."))


def gpu_key(name: str | None) -> str | None:
    """A GPU model name compared across harnesses: case, spacing and the vendor prefix do not count."""
    if not name or not str(name).strip():
        return None
    s = re.sub(r"\s+", " ", str(name).strip().lower())
    return s.removeprefix("nvidia ").strip()


def cudnn_version(code) -> str | None:
    """cuDNN's version number (91901, as cudnnGetVersion and torch report it) as text (9.19.1)."""
    try:
        n = int(float(code))
    except (TypeError, ValueError):
        return None
    if n <= 0:
        return None
    major, rest = divmod(n, 10000) if n >= 10000 else divmod(n, 1000)
    minor, patch = divmod(rest, 100)
    return f"{major}.{minor}.{patch}"


def workload(row: int, **fields) -> tuple[Workload | None, str | None]:
    """The Workload of these fields, or the reason it cannot exist (WorkloadError's line)."""
    try:
        return Workload(**fields), None
    except (WorkloadError, TypeError) as e:
        return None, str(e)


def refused(row: int, harness_backend: str, passname: str, why: str, figure=None, unit="ms", **extra) -> Published:
    return Published(row, harness_backend, passname, figure, unit, None, refusal=why, **extra)


def number(value, what: str, row: int) -> float:
    """A numeric cell, or ReadError naming the row and the column."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ReadError(f"row {row}: {what} {value!r} is not a number") from None
    if v != v:
        raise ReadError(f"row {row}: {what} is empty")
    return v


def integer(value, what: str, row: int) -> int:
    v = number(value, what, row)
    if v != int(v):
        raise ReadError(f"row {row}: {what} {value!r} is not an integer")
    return int(v)
