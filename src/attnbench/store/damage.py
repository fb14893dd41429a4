"""Rows whose text is damaged while the store's pages are sound (bytes that are not UTF-8 in a TEXT value):
found and named by row and column, so that a read says which row it could not read, and export saves the rest."""
from __future__ import annotations

from dataclasses import dataclass

KEYS = {"attempts": "attempt_key", "runs": "run_id", "model_rows": "row_key"}  # how a row is named
SHOWN = 3  # damaged values named in one line; the rest are counted


@dataclass(frozen=True)
class Damage:
    rowid: int  # SQLite's rowid: names the row even when its key is the damaged value
    key: str  # the row's key, undecodable bytes replaced
    column: str


def is_decode_failure(e: BaseException) -> bool:
    """Whether SQLite (or pandas reading through it) failed on text that is not UTF-8."""
    return "Could not decode to UTF-8" in str(e)


def scan(con, table: str) -> list[Damage]:
    """Every TEXT value of the table that is not UTF-8, row by row (read as bytes: only when a read failed)."""
    columns = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
    key = KEYS.get(table, columns[0])
    factory = con.text_factory
    con.text_factory = bytes
    try:
        found = []
        for row in con.execute(f"SELECT rowid, {','.join(columns)} FROM {table} ORDER BY rowid"):
            values = dict(zip(columns, tuple(row)[1:]))
            name = values.get(key)
            name = name.decode(errors="replace") if isinstance(name, bytes) else str(name)
            for c, v in values.items():
                if isinstance(v, bytes) and not _utf8(v):
                    found.append(Damage(row[0], name, c))
        return found
    finally:
        con.text_factory = factory


def describe(path, table: str, found: list[Damage]) -> str:
    """One line: the damaged rows and columns, and what to do."""
    return (f"{path}: text that is not UTF-8 in {table} {where(table, found)} (the row was damaged after it was "
            "written); `attnbench export` saves the intact rows")


def where(table: str, found: list[Damage]) -> str:
    """The first damaged values by row (rowid and key) and column; the others counted."""
    named = "; ".join(f"row {d.rowid} ({KEYS.get(table, 'key')} {d.key!r}), column {d.column}" for d in found[:SHOWN])
    return named + (f" and {len(found) - SHOWN} more" if len(found) > SHOWN else "")


def _utf8(b: bytes) -> bool:
    try:
        b.decode()
    except UnicodeDecodeError:
        return False
    return True
