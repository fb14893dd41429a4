"""SQLite store (WAL): typed insert and query of attempts and runs."""
from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

from .schema import ATTEMPT_COLUMNS, COLUMN_NAMES, JSON_COLUMNS, RUN_COLUMNS, SCHEMA_VERSION, ddl


class StoreError(ValueError):
    """Missing store, or one written by an incompatible schema."""


def utcnow() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Store:
    def __init__(self, path: str | Path, create: bool = True):
        self.path = Path(path)
        if self.path.is_dir():
            raise StoreError(f"store path is a directory: {self.path}")
        if not create and not self.path.is_file():
            raise StoreError(f"store not found: {self.path}")
        try:
            self.con = sqlite3.connect(str(self.path), timeout=30)
            self.con.row_factory = sqlite3.Row
            self._migrate(create)  # refuses a foreign file before anything is changed in it
            self.con.execute("PRAGMA journal_mode=WAL")
            self.con.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{self.path} is not a usable attnbench store: {e}") from None

    def _migrate(self, create: bool) -> None:
        has_meta = self.con.execute("SELECT name FROM sqlite_master WHERE name='meta'").fetchone()
        if has_meta:
            row = self.con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            version = int(row[0]) if row else 0
            if version < 1 or version > SCHEMA_VERSION:
                raise StoreError(f"{self.path} has schema version {version}; this attnbench reads {SCHEMA_VERSION}")
            if version < SCHEMA_VERSION:
                self._upgrade()
            return
        foreign = self.con.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchone()
        if not create or foreign:  # never add our tables to somebody else's database
            raise StoreError(f"{self.path} is not an attnbench store")
        with self.con:
            for stmt in ddl():
                self.con.execute(stmt)
            self.con.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))

    def _upgrade(self) -> None:
        """An older store gains the columns added since (every schema change so far only adds)."""
        have = {r[1] for r in self.con.execute("PRAGMA table_info(attempts)")}
        with self.con:
            for c, t, _ in ATTEMPT_COLUMNS:
                if c not in have:
                    self.con.execute(f"ALTER TABLE attempts ADD COLUMN {c} {t}")
            self.con.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION),))

    def close(self) -> None:
        self.con.close()

    # ---- runs ---------------------------------------------------------------------------------
    def start_run(self, run_id: str, tag: str, grid: str, argv: str, device_name: str, provenance: dict) -> None:
        with self.con:
            self.con.execute("INSERT INTO runs (run_id, tag, grid, argv, device_name, started_at, provenance) "
                             "VALUES (?,?,?,?,?,?,?)",
                             (run_id, tag, grid, argv, device_name, utcnow(), json.dumps(provenance)))

    def finish_run(self, run_id: str, extra: dict | None = None) -> None:
        """Mark the run finished; extra (the sweep's own overheads) is merged into its provenance."""
        with self.con:
            if extra:
                prov = {**(self._provenance(run_id) or {}), **extra}
                self.con.execute("UPDATE runs SET provenance=? WHERE run_id=?", (json.dumps(prov), run_id))
            self.con.execute("UPDATE runs SET finished_at=? WHERE run_id=?", (utcnow(), run_id))

    def runs(self) -> list[dict]:
        out = []
        for r in self.con.execute("SELECT * FROM runs ORDER BY started_at"):
            d = dict(r)
            d["provenance"] = json.loads(d["provenance"]) if d["provenance"] else {}
            out.append(d)
        return out

    def ensure_run(self, row: dict) -> None:
        cols = [c for c, _, _ in RUN_COLUMNS]
        vals = [json.dumps(row[c]) if c == "provenance" and not isinstance(row.get(c), (str, type(None)))
                else row.get(c) for c in cols]
        with self.con:
            self.con.execute(f"INSERT OR IGNORE INTO runs ({','.join(cols)}) VALUES ({','.join('?' * len(cols))})",
                             vals)

    def _provenance(self, run_id: str) -> dict | None:
        """The stored provenance of a run; None when there is no such run."""
        row = self.con.execute("SELECT provenance FROM runs WHERE run_id=?", (run_id,)).fetchone()
        return None if row is None else (json.loads(row[0]) if row[0] else {})

    def put_run(self, row: dict) -> bool:
        """A run row from an export: replaces an import placeholder, never a real run row."""
        prov = self._provenance(row["run_id"])
        if prov is not None:
            if not prov.get("imported"):
                return False
            with self.con:
                self.con.execute("DELETE FROM runs WHERE run_id=?", (row["run_id"],))
        self.ensure_run(row)
        return True

    # ---- attempts -----------------------------------------------------------------------------
    def done_keys(self) -> set[str]:
        return {r[0] for r in self.con.execute("SELECT attempt_key FROM attempts")}

    def delete_failed(self, keys: set[str], statuses=("TIMEOUT", "CRASH", "ERROR")) -> int:
        """Remove rows of these attempts that ended in a retryable status; returns how many."""
        q = f"DELETE FROM attempts WHERE attempt_key = ? AND status IN ({','.join('?' * len(statuses))})"
        with self.con:
            return sum(self.con.execute(q, (k, *statuses)).rowcount for k in keys)

    def insert(self, row: dict) -> bool:
        """Insert one attempt row (one transaction); False if that attempt already has a row."""
        return self.insert_many([row]) == 1

    def insert_many(self, rows: list[dict]) -> int:
        unknown = {k for r in rows for k in r} - set(COLUMN_NAMES)
        if unknown:
            raise StoreError(f"unknown column(s): {', '.join(sorted(unknown))}")
        sql = (f"INSERT OR IGNORE INTO attempts ({','.join(COLUMN_NAMES)}) "
               f"VALUES ({','.join('?' * len(COLUMN_NAMES))})")
        with self.con:
            cur = self.con.executemany(sql, [[_encode(c, r.get(c)) for c in COLUMN_NAMES] for r in rows])
        return cur.rowcount

    def attempts(self, where: str = "", params: tuple = ()) -> list[dict]:
        q = f"SELECT {','.join(COLUMN_NAMES)} FROM attempts {where}"
        return [{c: _decode(c, r[c]) for c in COLUMN_NAMES} for r in self.con.execute(q, params)]

    def dataframe(self):
        return self.table_frame("attempts", COLUMN_NAMES)

    def table_frame(self, table: str, columns):
        import pandas as pd

        return pd.read_sql_query(f"SELECT {','.join(columns)} FROM {table} ORDER BY rowid", self.con)

    def count(self) -> int:
        return self.con.execute("SELECT COUNT(*) FROM attempts").fetchone()[0]


def _encode(col: str, v):
    if col in JSON_COLUMNS and v is not None and not isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, bool):
        return int(v)
    return v


def _decode(col: str, v):
    if col in JSON_COLUMNS and isinstance(v, str):
        return json.loads(v)
    return v



