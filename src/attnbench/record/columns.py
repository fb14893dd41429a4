"""The record family's parts: a Column (type, meaning, origin, the statuses that carry it) and a Table
(its columns and how a row of it is finished); the status sets and origins every table uses."""
from __future__ import annotations

import statistics
from dataclasses import dataclass

from ..status import Status

ALL = frozenset(Status)
RAN = ALL - {Status.OOM_PREDICTED}  # the attempt reached a worker (UNSUPPORTED may come from the library)
ONLY_OK = frozenset({Status.OK})
# reached timing: INCORRECT may be found after it (the KV cache changed), IMPLAUSIBLE is judged on it
TIMED = frozenset({Status.OK, Status.INCORRECT, Status.IMPLAUSIBLE})

# where a value comes from
PLAN = "plan"  # the planner: identity, workload, models
RUN = "run"  # the run: tag, run id, toolkit (copied from provenance so an exported row stands alone)
EXECUTOR = "executor"  # where the attempt ran and how long it took as a whole
ATTEMPT = "attempt"  # measured inside the worker (runner/attempt.py)
DERIVED = "derived"  # computed from other columns when the record is finished

SQL_TYPES = {int: "INTEGER", bool: "INTEGER", float: "REAL", str: "TEXT", list: "TEXT", dict: "TEXT"}


@dataclass(frozen=True)
class Column:
    name: str
    type: type  # int | bool | float | str | list | dict (list and dict are stored as JSON text)
    doc: str
    origin: str
    carried_by: frozenset = ALL  # statuses whose rows may hold a value here (others are cleared)
    required_by: frozenset = frozenset()  # statuses whose rows must hold a value here
    constraint: str = ""  # SQL constraint, e.g. NOT NULL

    @property
    def sql(self) -> str:
        return SQL_TYPES[self.type]

    @property
    def json(self) -> bool:
        return self.type in (list, dict)


def _c(name, type_, doc, origin, carried_by=ALL, required_by=frozenset(), constraint=""):
    return Column(name, type_, doc, origin, frozenset(carried_by), frozenset(required_by), constraint)




class RecordError(ValueError):
    """A value no column declares, or a row that lacks what its status requires."""


def named_row(values: dict, names, error: type[Exception], unknown_text: str) -> tuple[Status, dict]:
    """The status and the row over `names` of a table's finish(): a name no column declares, or an
    unknown status, raises `error` (`unknown_text` formats the unknown names)."""
    unknown = set(values) - set(names)
    if unknown:
        raise error(unknown_text.format(", ".join(sorted(unknown))))
    try:
        status = Status(values.get("status"))
    except ValueError:
        raise error(f"unknown status {values.get('status')!r}") from None
    return status, {n: values.get(n) for n in names}


def percentile(xs: list[float], q: float) -> float:
    """Linear-interpolation quantile, q in [0, 1]."""
    import numpy as np

    return float(np.percentile(xs, 100 * q))


@dataclass(frozen=True)
class Table:
    """One table of the record family: its columns and how a row of it is finished, the same way for
    every table (a job type's rows, runner/jobs.py)."""

    name: str  # the SQLite table
    key: str  # the column that identifies a row (resume and claims go by it)
    columns: tuple[Column, ...]
    error: type[Exception] = RecordError
    unknown_text: str = "no column for {} (declare it in attnbench/record/)"
    what: str = "row"  # how an error names a row

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def json_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns if c.json)

    def names_from(self, origin: str) -> frozenset[str]:
        return frozenset(c.name for c in self.columns if c.origin == origin)

    def lacks(self, status: Status, values: dict) -> list[str]:
        """The columns a row of this status must hold and `values` does not (an OK row: samples too)."""
        missing = [c.name for c in self.columns if status in c.required_by and values.get(c.name) is None]
        if status is Status.OK and not values.get("samples_us"):
            missing.insert(0, "samples_us")
        return list(dict.fromkeys(missing))

    def finish(self, values: dict) -> dict:
        """The row as stored, from the values gathered for it: a value no column declares is an error;
        what its status does not carry is cleared (a number is only reported when it is true); median
        and p95 are derived from the samples; a value its status requires and lacks is an error."""
        status, row = named_row(values, self.names, self.error, self.unknown_text)
        for c in self.columns:
            if status not in c.carried_by:
                row[c.name] = None
        samples = row["samples_us"]
        if samples:
            row["median_us"] = statistics.median(samples)
            row["p95_us"] = percentile(samples, 0.95)
        missing = self.lacks(status, row)
        if missing:
            raise self.error(f"{status.value} {self.what} of {row.get('backend')} lacks {', '.join(missing)}")
        return row
