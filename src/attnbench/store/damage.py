"""Rows whose text is damaged while the store's pages are sound (bytes that are not UTF-8, a JSON column that is
not JSON, text in a number column): found and named by row and column, so that a read says which row it could
not read, and export saves the rest."""
from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass

from ..record import TABLES

# how a row is named: the record tables' keys, and the runs table's (store/schema.py; not a record table)
KEYS = {**{t.name: t.key for t in TABLES.values()}, "runs": "run_id"}
SHOWN = 3  # damaged values named in one line; the rest are counted
NUMBER_LISTS = ("samples_us", "kernel_calls_us")  # JSON lists the readers turn into arrays of numbers


@dataclass(frozen=True)
class Damage:
    rowid: int  # SQLite's rowid: names the row even when its key is the damaged value
    key: str  # the row's key, undecodable bytes replaced
    column: str
    what: str  # not UTF-8 | not JSON | text in a number column


def is_read_failure(e: BaseException) -> bool:
    """Whether a read failed on a value's text: SQLite (or pandas through it) on bytes that are not UTF-8, or
    a parser on JSON or numbers (scan tells whether a stored value is to blame)."""
    return "Could not decode to UTF-8" in str(e) or isinstance(e, (ValueError, TypeError))


def _json_columns(table: str) -> dict[str, type]:
    """JSON column -> the kind of value it holds (list or dict)."""
    if table in TABLES:
        return {c.name: c.type for c in TABLES[table].columns if c.json}
    return {"provenance": dict} if table == "runs" else {}


def suspects(con, table: str) -> set[int] | None:
    """The rowids whose JSON columns are not valid JSON (or JSON of the wrong kind) or whose number columns hold
    text, by SQLite itself (fast: what export checks before it writes); None when this SQLite lacks json_valid."""
    info = list(con.execute(f"PRAGMA table_info({table})"))
    opens = {list: "[", dict: "{"}  # valid JSON opening with [ is an array (json_type would cost 7x json_valid)
    tests = [f"({c} IS NOT NULL AND (NOT json_valid({c}) OR substr(ltrim({c}), 1, 1) != '{opens[k]}'))"
             for c, k in _json_columns(table).items() if c in {r[1] for r in info}]
    tests += [f"typeof({r[1]}) = 'text'" for r in info if r[2].upper() in ("REAL", "INTEGER")]
    if not tests:
        return set()
    try:
        return {r[0] for r in con.execute(f"SELECT rowid FROM {table} WHERE {' OR '.join(tests)}")}
    except sqlite3.OperationalError:
        return None


def scan(con, table: str, rowids: set[int] | None = None) -> list[Damage]:
    """Every damaged value of the table (or of those rows), row by row: read as bytes, only when a read failed
    or suspects() named the rows."""
    info = list(con.execute(f"PRAGMA table_info({table})"))
    columns = [r[1] for r in info]
    numbers = {r[1] for r in info if r[2].upper() in ("REAL", "INTEGER")}
    jsons = _json_columns(table)
    key = KEYS.get(table, columns[0])
    where = f"WHERE rowid IN ({','.join(str(int(r)) for r in rowids)})" if rowids is not None else ""
    factory = con.text_factory
    con.text_factory = bytes
    try:
        found = []
        for row in con.execute(f"SELECT rowid, {','.join(columns)} FROM {table} {where} ORDER BY rowid"):
            values = dict(zip(columns, tuple(row)[1:]))
            name = values.get(key)
            name = name.decode(errors="replace") if isinstance(name, bytes) else str(name)
            for c, v in values.items():
                what = _what(v, jsons.get(c), c in numbers, c in NUMBER_LISTS)
                if what:
                    found.append(Damage(row[0], name, c, what))
        return found
    finally:
        con.text_factory = factory


def describe(path, table: str, found: list[Damage]) -> str:
    """One line: the damaged rows and columns, and what to do."""
    return (f"{path}: damaged text in {table} {where(table, found)} (changed after it was written, or imported "
            "unchecked by an older attnbench); `attnbench export` saves the intact rows")


def where(table: str, found: list[Damage]) -> str:
    """The first damaged values by row (rowid and key), column and what is wrong; the others counted."""
    named = "; ".join(f"row {d.rowid} ({KEYS.get(table, 'key')} {d.key!r}), column {d.column}: {d.what}"
                      for d in found[:SHOWN])
    return named + (f" and {len(found) - SHOWN} more" if len(found) > SHOWN else "")


def _what(v, kind: type | None, is_number: bool, numbers: bool) -> str | None:
    """What is wrong with one stored value (None: nothing a reader would fail on)."""
    if not isinstance(v, bytes):
        return None
    try:
        text = v.decode()
    except UnicodeDecodeError:
        return "not UTF-8"
    if is_number:
        return "text in a number column"
    if kind is None:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return "not JSON"
    if not isinstance(value, kind):
        return f"JSON of the wrong kind (not a {'list' if kind is list else 'object'})"
    if numbers and any(isinstance(x, bool) or not isinstance(x, (int, float)) for x in value):
        return "not a list of numbers"
    return None
