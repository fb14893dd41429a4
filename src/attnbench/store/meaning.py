"""What a stored row must mean, whatever file it came from: the one validator of every import path (exports
in any format, other tools' results tables, model rows), so that a row the readers would crash on or crown
(samples that are not times, a median that is not theirs, a workload that cannot exist) never enters a store."""
from __future__ import annotations

import functools
import math
import re
import statistics

from ..record import ATTEMPTS, Table
from ..workloads import Workload, WorkloadError
from ..workloads.axes import AXES, axis

# a median within 1% of its samples' median: rounding in another tool's table passes, µs against ms does not
MEDIAN_TOLERANCE = 0.01
# per-call times and costs: a number there is finite and not negative (the error columns may be inf: an
# INCORRECT row's NaN output; trend, cosine and share_diff may be negative)
TIMES = ("median_us", "p95_us", "kernel_us", "warmup_us", "cold_start_us", "wall_s", "flops", "bytes", "noop_us",
         "attn_kernel_us", "step_kernel_us", "tokens_per_s", "kernel_baseline_us")

# counts that may be negative: peak memory above the inputs (a call that frees some reads below them)
SIGNED = ("peak_mem_bytes",)


class RowError(ValueError):
    """A value that no attnbench could have stored: the column it is in and why."""

    def __init__(self, column: str, why: str):
        super().__init__(f"column {column}: {why}")
        self.column = column


def samples(value, column: str = "samples_us") -> list[float]:
    """Raw per-call times: a non-empty list of positive finite numbers (µs)."""
    if not isinstance(value, list) or not value:
        raise RowError(column, f"must be a non-empty list of times in µs, got {_shown(value)}")
    for x in value:
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x <= 0:
            raise RowError(column, f"must hold positive finite times in µs, got {_shown(x)}")
    return [float(x) for x in value]


def median_matches(median, values: list[float], column: str = "median_us") -> None:
    """The median a row states is its samples' median, within MEDIAN_TOLERANCE."""
    if isinstance(median, bool) or not isinstance(median, (int, float)) or not math.isfinite(median) or median <= 0:
        raise RowError(column, f"must be a positive time in µs, got {_shown(median)}")
    actual = statistics.median(values)
    if abs(actual - median) > MEDIAN_TOLERANCE * actual:
        raise RowError(column, f"{median:g} is not the median of samples_us ({actual:g})")


def workload(row: dict) -> Workload:
    """The workload a row's axis columns describe, which must be one attnbench can measure."""
    fields = {}
    for a in AXES:
        v = row.get(a.name)
        if v is None:
            if a.modes is None and a.default is None:
                raise RowError(a.name, "is empty (every row holds its workload)")
            continue
        try:
            fields[a.name] = axis(a.name).parse(v)
        except WorkloadError as e:
            raise RowError(a.name, str(e)) from None
    try:
        return Workload(**fields)
    except WorkloadError as e:  # "impossible workload LABEL: batch must be ...": name the axis it starts with
        why = str(e).split(": ", 1)[-1]
        named = next((a.name for a in AXES if re.match(rf"{a.name}\b", why)), "workload")
        raise RowError(named, why) from None


def check_row(row: dict, table: Table = ATTEMPTS) -> None:
    """Every meaning check of one row of `table` (values already of their column types, JSON decoded):
    JSON columns of their kind, flags 0 or 1, counts and times not negative, samples positive times and
    the median theirs; an attempt's workload valid and its workload_key that workload's key."""
    for c in table.columns:
        v = row.get(c.name)
        if v is None:
            continue
        if c.json and not isinstance(v, c.type):
            raise RowError(c.name, f"must be a JSON {'list' if c.type is list else 'object'}, got {_shown(v)}")
        if c.type is bool and (not isinstance(v, (int, float)) or v not in (0, 1)):
            raise RowError(c.name, f"is a flag (0 or 1), got {_shown(v)}")
        if c.type not in (int, float):
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise RowError(c.name, f"must be a number, got {_shown(v)}")
        if c.type is int and v < 0 and c.name not in SIGNED:
            raise RowError(c.name, f"must not be negative, got {v!r}")
        if c.name in TIMES and (not math.isfinite(v) or v < 0):
            raise RowError(c.name, f"must be a finite number, not negative, got {_shown(v)}")
    if row.get("kernel_calls_us") is not None:
        _times(row["kernel_calls_us"], "kernel_calls_us")
    if row.get("samples_us") is not None:
        values = samples(row["samples_us"])
        if row.get("median_us") is not None:
            median_matches(row["median_us"], values)
        if row.get("p95_us") is not None and not min(values) <= row["p95_us"] <= max(values):
            raise RowError("p95_us", f"{row['p95_us']:g} is outside the samples' range "
                                     f"({min(values):g} to {max(values):g})")
    if table is ATTEMPTS:
        values = tuple(row.get(a.name) for a in AXES)
        try:
            key = _key(values)
        except TypeError:  # an unhashable value (a list where a number belongs): workload() names it
            key = workload(row).key()
        if row.get("workload_key") != key:
            raise RowError("workload_key", f"{row.get('workload_key')!r} is not the key of the row's workload "
                                           f"fields ({key}): a field was changed after the row was written")


@functools.lru_cache(maxsize=4096)
def _key(values: tuple) -> str:
    """The key of the workload of these axis values (a sweep's rows share few workloads: each is built once)."""
    return workload(dict(zip((a.name for a in AXES), values))).key()


def check_run(row: dict) -> None:
    """A run row: its provenance, when it has one, is a JSON object (the readers look up its fields)."""
    if row.get("provenance") is not None and not isinstance(row["provenance"], dict):
        raise RowError("provenance", f"must be a JSON object, got {_shown(row['provenance'])}")


def _times(value: list, column: str) -> None:
    """Probed per-call device times: finite, not negative (a kernel too short to register reads 0)."""
    for x in value:
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0:
            raise RowError(column, f"must hold finite times in µs, not negative, got {_shown(x)}")


def _shown(v) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."
