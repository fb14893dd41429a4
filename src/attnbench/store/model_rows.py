"""The model_rows table: one row per (model step × backend) measured by `attnbench model`, in the same
SQLite file as attempts and runs. Its columns are declared in attnbench/record/ (MODEL_STEPS), as the
attempts' are; provenance is the run's row in `runs` (same run_id) plus the toolkit columns copied into
each row, as attempts do; statuses are the attempts' Status values."""
from __future__ import annotations

import json

from ..record import MODEL_STEPS, Status
from .db import table_columns, table_rows

TABLE = MODEL_STEPS.name
COLUMNS = MODEL_STEPS.columns
NAMES = MODEL_STEPS.names
JSON_NAMES = frozenset(MODEL_STEPS.json_names)
REQUIRED = tuple(c.name for c in COLUMNS if c.required_by == frozenset(Status))
ModelRowError = MODEL_STEPS.error


def ddl() -> str:
    cols = ",\n  ".join(f"{c.name} {c.sql} {c.constraint}".strip() for c in COLUMNS)
    return f"CREATE TABLE IF NOT EXISTS {TABLE} (\n  {cols}\n)"


def finish(values: dict) -> dict:
    """The row as stored (record.Table.finish): unknown names refused, what the status may not carry
    cleared, median and p95 derived from the samples, what it must carry checked."""
    return MODEL_STEPS.finish(values)


def ensure(con) -> None:
    """Create the table in an open store (idempotent); a table written before a column existed gains it
    (NULL in its rows)."""
    with con:
        con.execute(ddl())
        have = table_columns(con, TABLE)
        for c in COLUMNS:
            if c.name not in have:
                con.execute(f"ALTER TABLE {TABLE} ADD COLUMN {c.name} {c.sql}")


def insert(con, row: dict) -> bool:
    """Write one finished row in its own transaction (the table made by `ensure`); False when its
    key already has a row."""
    vals = [json.dumps(row[n]) if n in JSON_NAMES and row[n] is not None else
            int(row[n]) if isinstance(row[n], bool) else row[n] for n in NAMES]
    with con:
        cur = con.execute(f"INSERT OR IGNORE INTO {TABLE} ({','.join(NAMES)}) VALUES ({','.join('?' * len(NAMES))})",
                          vals)
    return cur.rowcount == 1


def rows(con, where: str = "", params: tuple = ()) -> list[dict]:
    """Rows as dicts (JSON decoded), in insertion order; [] when the table does not exist."""
    return table_rows(con, MODEL_STEPS, where, params)


def keys(con) -> set[str]:
    """row_keys already stored (resume skips them)."""
    if not table_columns(con, TABLE):
        return set()
    return {k for (k,) in con.execute(f"SELECT row_key FROM {TABLE}")}


def delete_failed(con, keys: set[str], statuses=("TIMEOUT", "CRASH", "ERROR")) -> int:
    """Remove rows of these keys that ended in a retryable status; returns how many."""
    if not table_columns(con, TABLE):
        return 0
    q = f"DELETE FROM {TABLE} WHERE row_key = ? AND status IN ({','.join('?' * len(statuses))})"
    with con:
        return sum(con.execute(q, (k, *statuses)).rowcount for k in keys)
