"""SQLite store (WAL): typed insert and query of attempts and runs, claims of running attempts."""
from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from pathlib import Path
from urllib.parse import quote

from . import claims
from . import damage
from . import samples
from .schema import ATTEMPT_COLUMNS, BACKFILL, CLAIMS_DDL, COLUMN_NAMES, JSON_COLUMNS, RUN_COLUMNS, SCHEMA_VERSION, ddl

LOCK_TIMEOUT_S = 30  # how long a write waits for another process's lock before giving up



def table_columns(con, table: str) -> set[str]:
    """The columns a table of this SQLite connection has (none when it does not exist)."""
    return {r[1] for r in con.execute(f"PRAGMA table_info({table})")}

class StoreError(ValueError):
    """Missing store, or one written by an incompatible schema."""


class DamagedText(StoreError):
    """A row whose text is damaged in a sound store (damage.py): named by row and column (found: every such value)."""

    def __init__(self, message: str, found: list):
        super().__init__(message)
        self.found = found

    @property
    def rowids(self) -> frozenset[int]:
        return frozenset(d.rowid for d in self.found)


@contextlib.contextmanager
def reading(con, table: str, path=None):
    """Reads of a table: a failure on a stored value's text (not UTF-8, not JSON, text in a number column) is a
    DamagedText naming the row and column (it was a read, not a write that failed)."""
    try:
        yield
    except Exception as e:
        if isinstance(e, StoreError) or not damage.is_read_failure(e):
            raise
        found = damage.scan(con, table)
        if not found:  # not the stored text's fault: the failure as it was
            raise
        path = path or con.execute("PRAGMA database_list").fetchone()[2]
        raise DamagedText(damage.describe(path, table, found), found) from None


def table_rows(con, table, where: str = "", params: tuple = ()) -> list[dict]:
    """The rows of a record table (record.Table) as dicts over its columns, JSON decoded, in insertion order; []
    when the table does not exist; a column an older table lacks reads None; damaged text is named (reading)."""
    have = table_columns(con, table.name)
    if not have:
        return []
    names = [n for n in table.names if n in have]
    with reading(con, table.name):
        fetched = con.execute(f"SELECT {','.join(names)} FROM {table.name} {where} ORDER BY rowid", params).fetchall()
    json_names = table.json_names
    out = []
    for r in fetched:
        d = dict.fromkeys(table.names) | dict(zip(names, r))
        for n in json_names:
            if isinstance(d[n], str):
                d[n] = json.loads(d[n])
        out.append(d)
    return out


def open_readonly(path: Path) -> sqlite3.Connection:
    """A connection that never writes, not even WAL files, so a store in a read-only place can be read."""
    uri = "file:" + quote(str(Path(path).resolve()))
    if Path(str(path) + "-wal").exists():
        # a writer has it open (or stopped without closing): its uncheckpointed rows are in the
        # -wal file, read through SQLite's shared-memory index beside it, which exists already
        return sqlite3.connect(uri + "?mode=ro", uri=True, timeout=LOCK_TIMEOUT_S)
    # Nobody has it open: read the file as it is. This writes nothing (no -shm or -wal file
    # appears, so a read-only directory works); a run that opens it meanwhile writes to its own
    # -wal and checkpoints only after about 4 MB of rows.
    return sqlite3.connect(uri + "?immutable=1", uri=True)


def utcnow() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Store:
    """One store file. readonly=True (show, export, analysis) never writes, not even WAL files, so
    a store in a read-only place can be read; a damaged store is refused on open, by every command."""

    def __init__(self, path: str | Path, create: bool = True, readonly: bool = False):
        self.path = Path(path)
        self.readonly = readonly
        if not str(path).strip():
            raise StoreError("the store path is empty")
        if self.path.is_dir():
            raise StoreError(f"store path is a directory: {self.path}")
        if (readonly or not create) and not self.path.is_file():
            raise StoreError(f"store not found: {self.path}")
        try:
            self.con = self._open_readonly() if readonly else sqlite3.connect(str(self.path), timeout=LOCK_TIMEOUT_S)
            self.con.row_factory = sqlite3.Row
            self._check_integrity()
            if readonly:
                self._check_version(self._version())
            else:
                self._migrate(create)  # refuses a foreign file before anything is changed in it
                self.con.execute("PRAGMA journal_mode=WAL")
                self.con.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.OperationalError as e:
            raise StoreError(_operational(self.path, e)) from None
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{self.path} is not a usable attnbench store: {e}") from None

    def _open_readonly(self) -> sqlite3.Connection:
        return open_readonly(self.path)

    def _check_integrity(self) -> None:
        bad = [r[0] for r in self.con.execute("PRAGMA quick_check(3)")]
        if bad != ["ok"]:
            first = (bad[0] or "").strip().splitlines()[0] if bad and bad[0] else "integrity check failed"
            raise StoreError(f"{self.path} is damaged: {first}")

    def _version(self) -> int | None:
        """The schema version, or None for a database that is not (yet) a store."""
        if not self.con.execute("SELECT name FROM sqlite_master WHERE name='meta'").fetchone():
            return None
        row = self.con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        return int(row[0]) if row else 0

    def _check_version(self, version: int | None) -> None:
        if version is None:
            raise StoreError(f"{self.path} is not an attnbench store")
        if version < 1 or version > SCHEMA_VERSION:
            raise StoreError(f"{self.path} has schema version {version}; this attnbench reads {SCHEMA_VERSION}")

    def _migrate(self, create: bool) -> None:
        # Under a write lock from the first read: processes creating one store at once take turns,
        # and the later ones find the tables made.
        self.con.isolation_level = None
        self.con.execute("BEGIN IMMEDIATE")
        try:
            version = self._version()
            if version is None:
                foreign = self.con.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchone()
                if not create or foreign:  # never add our tables to somebody else's database
                    raise StoreError(f"{self.path} is not an attnbench store")
                for stmt in ddl():
                    self.con.execute(stmt)
                self.con.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            else:
                self._check_version(version)
                if version < SCHEMA_VERSION:
                    self._upgrade()
            self.con.execute("COMMIT")
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        finally:
            self.con.isolation_level = ""

    def _upgrade(self) -> None:
        """An older store gains the columns and tables added since (every change so far only adds);
        a workload axis added since gets its default in every older row (BACKFILL)."""
        have = table_columns(self.con, "attempts")
        for c, t, _ in ATTEMPT_COLUMNS:
            if c not in have:
                self.con.execute(f"ALTER TABLE attempts ADD COLUMN {c} {t}")
                if c in BACKFILL:
                    self.con.execute(f"UPDATE attempts SET {c} = ?", (BACKFILL[c],))
        self.con.execute(CLAIMS_DDL)
        self.con.execute(samples.SAMPLES_DDL)
        samples.fill(self.con)  # 11: each row's samples as numbers, from the JSON text
        self.con.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION),))

    def close(self) -> None:
        """Closes the connection; closing again does nothing."""
        self.con.close()  # sqlite3: a second close() is a no-op

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
        with reading(self.con, "runs", self.path):
            for r in self.con.execute("SELECT * FROM runs ORDER BY started_at").fetchall():
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
        with reading(self.con, "attempts", self.path):
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
        written = []
        with self.con:
            for r in rows:
                if self.con.execute(sql, [_encode(c, r.get(c)) for c in COLUMN_NAMES]).rowcount == 1:
                    written.append(r)
            # each written row's samples as numbers beside it (store/samples.py); a row already present keeps its own
            samples.write(self.con, [r["attempt_key"] for r in written], [samples.as_array(r.get("samples_us"))
                                                                          for r in written])
        return len(written)

    def attempts(self, where: str = "", params: tuple = ()) -> list[dict]:
        have = self._columns("attempts")
        q = f"SELECT {','.join(c for c in COLUMN_NAMES if c in have)} FROM attempts {where}"
        with reading(self.con, "attempts", self.path):
            rows = self.con.execute(q, params).fetchall()
            return [{c: _decode(c, r[c]) if c in have else BACKFILL.get(c) for c in COLUMN_NAMES} for r in rows]

    def ok_walls(self) -> list[dict]:
        """backend, mode, repeat and wall_s of every OK row (what an ETA reads; runner/eta.py)."""
        q = "SELECT backend, mode, repeat, wall_s FROM attempts WHERE status = 'OK' AND wall_s IS NOT NULL"
        with reading(self.con, "attempts", self.path):
            return [{"status": "OK", **dict(r)} for r in self.con.execute(q)]

    def dataframe(self):
        return self.table_frame("attempts", COLUMN_NAMES)

    def table_frame(self, table: str, columns, skip: frozenset[int] = frozenset()):
        """The table's rows in insertion order, but those of the rowids in skip; a column an older (read-only)
        store lacks reads NULL (a workload axis added since: its default, BACKFILL)."""
        import pandas as pd

        have = self._columns(table)
        present = [c for c in columns if c in have]
        where = f"WHERE rowid NOT IN ({','.join(str(int(r)) for r in skip)})" if skip else ""
        with reading(self.con, table, self.path):
            df = pd.read_sql_query(f"SELECT {','.join(present)} FROM {table} {where} ORDER BY rowid", self.con)
            numbers = {r[1] for r in self.con.execute(f"PRAGMA table_info({table})") if r[2] in ("REAL", "INTEGER")}
            for c in numbers & set(present):  # text where a number belongs: every later reader would fail on it
                if df[c].dtype == object and df[c].notna().any() and df[c].map(lambda v: isinstance(v, str)).any():
                    raise ValueError(f"text in column {c}")
        for c in columns:
            if c not in have:
                df[c] = BACKFILL.get(c) if table == "attempts" else None
        return df[list(columns)]

    def _columns(self, table: str) -> set[str]:
        return table_columns(self.con, table)

    # ---- claims: two runs sharing a store never measure one attempt twice (store/claims.py: liveness) -----
    def claim(self, attempt_key: str, run_id: str, take_over: bool = False) -> bool:
        """Take the attempt for this run: False when it already has a row, or another live run holds it
        (claims.held: a process still running on this host; a claim of another host refreshed within
        CLAIM_STALE_S, unless `take_over`). A claim names its process by host, boot and start time."""
        host, pid = claims.own_id(), os.getpid()
        with self.con:
            self.con.execute("BEGIN IMMEDIATE")
            if self.con.execute("SELECT 1 FROM attempts WHERE attempt_key=?", (attempt_key,)).fetchone():
                return False
            had = self.con.execute("SELECT run_id, host, pid, claimed_at FROM claims WHERE attempt_key=?",
                                   (attempt_key,)).fetchone()
            if had and had["run_id"] != run_id and claims.held(had["host"], had["pid"], had["claimed_at"], take_over):
                return False
            self.con.execute("INSERT OR REPLACE INTO claims VALUES (?,?,?,?,?)",
                             (attempt_key, run_id, host, pid, utcnow()))
        return True

    def release_claims(self, run_id: str) -> None:
        """This run's claims, and any claim of an attempt that has its row (left by a run that could not
        release it: a full disk, kill -9), are deleted."""
        with self.con:
            self.con.execute("DELETE FROM claims WHERE run_id=? OR attempt_key IN (SELECT attempt_key FROM attempts)",
                             (run_id,))

    def heartbeat(self, run_id: str) -> claims.Heartbeat:
        """A context that keeps this run's claims fresh while it runs (claims.Heartbeat)."""
        return claims.Heartbeat(self.path, run_id, lock_timeout_s=LOCK_TIMEOUT_S)

    def claimants(self, keys) -> str:
        """Who holds the claims of these attempts (host, pid, how fresh), in one phrase; "" when none."""
        keys = list(keys)
        rows = [r for i in range(0, len(keys), 500) for r in self.con.execute(
            f"SELECT host, pid, claimed_at FROM claims WHERE attempt_key IN ({','.join('?' * len(keys[i:i + 500]))})",
            keys[i:i + 500])]
        return claims.describe(rows)

    def count(self) -> int:
        return self.con.execute("SELECT COUNT(*) FROM attempts").fetchone()[0]


def _operational(path: Path, e: sqlite3.OperationalError) -> str:
    text = str(e)
    if "locked" in text or "busy" in text:
        return f"{path} is locked by another program (waited {LOCK_TIMEOUT_S} s); try again when it is done"
    if "disk" in text and "full" in text:
        return f"{path}: the disk is full"
    return f"{path}: {text}"


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



