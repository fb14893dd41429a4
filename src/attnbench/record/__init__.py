"""The record family: the one definition of every stored row.

Each table's columns are declared once, in a module of this package (attempts.py: the attempt row;
model_steps.py: the model-step row; a new table: a new module and its entry in TABLES): a column's
type, what it means, where its value comes from and which statuses carry it. The store's schema, the
export columns and docs/schema.md are derived from them; a table's `finish()` is the only way a row is
made, so a value that no column declares is an error, not a silent drop, and a number a status must
not carry (samples of a failed attempt) is cleared."""
from __future__ import annotations

from .attempts import (ATTEMPTS, BY_NAME, COLUMNS, JSON_NAMES, NAMES, AttemptRecord, as_row, finish, lacks,
                       names_from)
from .columns import (ALL, ATTEMPT, DERIVED, EXECUTOR, ONLY_OK, PLAN, RAN, RUN, SQL_TYPES, TIMED, Column,
                      RecordError, Table, named_row, percentile)
from .counters import COUNTERS
from .model_steps import MODEL_STEP_COLUMNS, MODEL_STEPS, NOT_OK, STEP, ModelStepError
from .selftests import SELFTESTS  # issue 42.1
from ..status import Status

TABLES = {t.name: t for t in (ATTEMPTS, MODEL_STEPS, COUNTERS, SELFTESTS)}

__all__ = ["ALL", "ATTEMPT", "ATTEMPTS", "BY_NAME", "COLUMNS", "COUNTERS", "DERIVED", "EXECUTOR", "JSON_NAMES",
           "MODEL_STEPS", "MODEL_STEP_COLUMNS", "NAMES", "NOT_OK", "ONLY_OK", "PLAN", "RAN", "RUN", "SELFTESTS", "SQL_TYPES", "STEP", "TABLES",
           "TIMED", "AttemptRecord", "Column", "ModelStepError", "RecordError", "Status", "Table", "as_row",
           "finish", "lacks", "named_row", "names_from", "percentile"]
