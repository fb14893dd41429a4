"""The counters table: one row per attempt whose step was replayed under a collector (record/counters.py), in the
same SQLite file; made by the first run or explain that reads counters, absent (no rows) in other stores."""
from __future__ import annotations

import json

from ..measure import counters_bound
from ..record.counters import COUNTER_COLUMNS, COUNTERS, CountersError, finish  # noqa: F401  (io.py reads them here)
from .db import table_columns, table_rows, utcnow

TABLE = COUNTERS.name
NAMES = COUNTERS.names
JSON_NAMES = frozenset(COUNTERS.json_names)
REQUIRED = tuple(c.name for c in COUNTER_COLUMNS if c.required_by)
# what the attempts frame gains (sources.py, with_counters): enough for show's column, analyze's sections and the
# report pages
SHOWN = ("bound", "bound_evidence", "bytes_ratio", "tensor_pct", "xu_pct", "dram_pct", "shared_pct",
         "warps_active_pct", "sm_pct", "dram_read_bytes", "dram_write_bytes", "profiled_us", "main_kernel",
         "registers", "kernel_count", "note", "cost_s")
__all__ = ["CountersError", "TABLE", "NAMES", "ensure", "insert", "row_of", "rows", "frame", "keys",
           "with_counters"]


def ddl() -> str:
    cols = ",\n  ".join(f"{c.name} {c.sql} {c.constraint}".strip() for c in COUNTER_COLUMNS)
    return f"CREATE TABLE IF NOT EXISTS {TABLE} (\n  {cols}\n)"


def ensure(con) -> None:
    """Create the table in an open store (idempotent); an older table gains a column added since (NULL)."""
    with con:
        con.execute(ddl())
        have = table_columns(con, TABLE)
        for c in COUNTER_COLUMNS:
            if c.name not in have:
                con.execute(f"ALTER TABLE {TABLE} ADD COLUMN {c.name} {c.sql}")


def row_of(attempt: dict, collected: dict, how: str) -> dict:
    """The finished counters row of an attempt (its stored row, or the one being written) from what the counters
    phase collected: the bound from the counters and the attempt's host_bound, measured over modelled bytes."""
    kept = {k: v for k, v in collected.items() if k in NAMES}
    bound, evidence = counters_bound.classify(collected, attempt.get("host_bound"))
    return finish({**kept, "attempt_key": attempt["attempt_key"], "how": how, "collected_at": utcnow(),
                   "bound": bound, "bound_evidence": evidence, "modelled_bytes": attempt.get("bytes"),
                   "bytes_ratio": counters_bound.bytes_ratio(collected, attempt.get("bytes"))})


def insert(con, row: dict, replace: bool = False) -> bool:
    """Write one finished row in its own transaction; an attempt's row already there is kept unless `replace`
    (explain reading counters again). False when nothing was written."""
    ensure(con)
    vals = [json.dumps(row[n]) if n in JSON_NAMES and row[n] is not None else row[n] for n in NAMES]
    verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
    with con:
        cur = con.execute(f"{verb} INTO {TABLE} ({','.join(NAMES)}) VALUES ({','.join('?' * len(NAMES))})", vals)
    return cur.rowcount == 1


def rows(con, where: str = "", params: tuple = ()) -> list[dict]:
    """Rows as dicts (JSON decoded), in insertion order; [] when the table does not exist."""
    return table_rows(con, COUNTERS, where, params)


def keys(con, readable_only: bool = True) -> set[str]:
    """Attempt keys with a counters row (with counters read, unless readable_only is False)."""
    if not table_columns(con, TABLE):
        return set()
    q = f"SELECT attempt_key FROM {TABLE}" + (" WHERE note IS NULL" if readable_only else "")
    return {k for (k,) in con.execute(q)}


def frame(con):
    """attempt_key and SHOWN (the counters' note as counters_note) of every counters row, as a DataFrame; None
    when the store has none."""
    import pandas as pd

    found = rows(con)
    if not found:
        return None
    df = pd.DataFrame(found, columns=list(NAMES))[["attempt_key", *SHOWN]]
    return df.rename(columns={"note": "counters_note", "cost_s": "counters_cost_s"})


def with_counters(attempts, con):
    """The attempts frame of a store (sources.py, the one reader) with the counters columns (frame()) set on each
    row by attempt_key, in place and returned; unchanged (no such columns) when the store has no counters. A column
    the attempts already have is left as it is."""
    extra = frame(con)
    if extra is None or attempts is None or "attempt_key" not in attempts.columns:
        return attempts
    by_key = extra.set_index("attempt_key").reindex(attempts["attempt_key"].to_numpy())
    for c in by_key.columns:
        if c not in attempts.columns:
            attempts[c] = by_key[c].to_numpy()
    return attempts
