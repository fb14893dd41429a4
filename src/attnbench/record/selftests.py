"""The selftest row (table selftests): one per `attnbench selftest --db STORE`, the last one of a device is shown
by the report's methodology page."""
from __future__ import annotations

from .columns import Column, RecordError, Table, _c

SELFTEST = "selftest"  # written by the selftest command from its own run (selftest/suite.py)
SELFTEST_COLUMNS: tuple[Column, ...] = (
    _c("selftest_id", str, "one invocation of attnbench selftest (UTC time and host)", SELFTEST,
       constraint="NOT NULL UNIQUE"),
    _c("started_at", str, "UTC", SELFTEST, constraint="NOT NULL"),
    _c("device", str, "the device as asked: cpu, cuda or cuda:N", SELFTEST, constraint="NOT NULL"),
    _c("device_name", str, "device model (as the runs table names it)", SELFTEST, constraint="NOT NULL"),
    _c("classes", int, "classes of misbehaving kernel run on this device", SELFTEST),
    _c("caught", int, "classes caught (a gate's status, or a cache class's timed calls uncached)", SELFTEST),
    _c("passed", bool, "1 when every class was caught and the honest control kernel was OK", SELFTEST),
    _c("control", str, "the honest control kernel's status (and reason when not OK)", SELFTEST),
    _c("fresh_inputs", bool, "1 when the cache classes ran with fresh input values (the fresh_inputs axis)", SELFTEST),
    _c("wall_s", float, "the selftest's wall seconds, workers' start included", SELFTEST),
    _c("versions", dict, "JSON: torch, CUDA, driver, ... the run recorded", SELFTEST),
    _c("verdicts", list, "JSON: per class its verdict (a status, UNCACHED, MISSED or NOT RUN) and why", SELFTEST),
    _c("gpu_only", list, "JSON: the classes a CPU cannot mean, each with why (CPU selftests)", SELFTEST),
)


class SelftestError(RecordError):
    """A value no selftests column declares."""


SELFTESTS = Table("selftests", "selftest_id", SELFTEST_COLUMNS, SelftestError, "no selftests column for {}",
                  "selftest row")


def selftest_row(values: dict) -> dict:
    """The row as stored: every column, a value no column declares refused (Table.finish is for status rows)."""
    unknown = set(values) - set(SELFTESTS.names)
    if unknown:
        raise SelftestError(SELFTESTS.unknown_text.format(", ".join(sorted(unknown))))
    return {n: values.get(n) for n in SELFTESTS.names}
