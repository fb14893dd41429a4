"""The selftests table: written by `attnbench selftest --db STORE`, read for the report (the last one per device)."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from ..record.selftests import SELFTESTS, selftest_row

TABLE = SELFTESTS.name
DDL = (f"CREATE TABLE IF NOT EXISTS {TABLE} (\n  "
       + ",\n  ".join(f"{c.name} {c.sql} {c.constraint}".strip() for c in SELFTESTS.columns) + "\n)")


def save(db: Path, values: dict) -> None:
    """One selftest row into the store (a new file is a new store; the table is made on first use)."""
    from .db import Store  # the store's own checks: a file that is no store is refused, the schema is made

    row = selftest_row(values)
    store = Store(db)
    try:
        with store.con:
            store.con.execute(DDL)
            store.con.execute(f"INSERT INTO {TABLE} ({','.join(row)}) VALUES ({','.join('?' * len(row))})",
                              [json.dumps(v) if isinstance(v, (dict, list)) else v for v in row.values()])
    finally:
        store.close()


def last_per_device(db: Path) -> list[dict]:
    """The latest selftest of each device (by device_name, then device) in a store; [] when it holds none or
    the file is not a SQLite store (an export)."""
    try:
        con = sqlite3.connect(f"file:{Path(db).resolve()}?mode=ro", uri=True)
    except sqlite3.Error:
        return []
    try:
        con.row_factory = sqlite3.Row
        rows = con.execute(f"SELECT * FROM {TABLE} ORDER BY started_at").fetchall()
    except sqlite3.DatabaseError:  # no such table, or not a database
        return []
    finally:
        con.close()
    latest: dict = {}
    for r in map(dict, rows):
        for c in SELFTESTS.json_names:
            try:
                r[c] = json.loads(r[c]) if r.get(c) else None
            except ValueError:
                r[c] = None
        latest[(r["device_name"], r["device"])] = r
    return list(latest.values())
