"""Export the attempts, runs or model_rows table to JSONL, CSV or Parquet, and import it back (round trip).
A name ending in .gz is written and read gzip-compressed (JSONL and CSV)."""
from __future__ import annotations

import contextlib
import gzip
import json
from dataclasses import dataclass
from pathlib import Path

from .. import record
from . import counters, damage, meaning, model_rows
from .db import DamagedText, Store, StoreError
from .schema import ATTEMPT_COLUMNS, BACKFILL, JSON_COLUMNS, RUN_COLUMNS

FORMATS = ("jsonl", "csv", "parquet")


@dataclass(frozen=True)
class Table:
    name: str
    types: dict  # column -> SQL type, in schema order
    json_columns: tuple[str, ...]
    required: tuple[str, ...]

    @classmethod
    def from_spec(cls, name: str, spec, json_columns, required) -> "Table":
        """From a schema.py column list of (column, SQL type, meaning)."""
        return cls(name, {c: t.split()[0] for c, t, _ in spec}, tuple(json_columns), tuple(required))

    @property
    def columns(self) -> list[str]:
        return list(self.types)


TABLES = {
    "attempts": Table.from_spec("attempts", ATTEMPT_COLUMNS, JSON_COLUMNS,
                                ("attempt_key", "run_id", "backend", "status")),
    "runs": Table.from_spec("runs", RUN_COLUMNS, ("provenance",), ("run_id",)),
    # `attnbench model` rows (store/model_rows.py): validated on import by model_rows.finish
    "model_rows": Table(model_rows.TABLE, {c.name: c.sql for c in model_rows.COLUMNS},
                        tuple(n for n in model_rows.NAMES if n in model_rows.JSON_NAMES), model_rows.REQUIRED),
    # issue 39: the counters of attempts (store/counters.py): validated on import by record/counters.py finish
    "counters": Table(counters.TABLE, {c.name: c.sql for c in counters.COUNTER_COLUMNS},
                      tuple(n for n in counters.NAMES if n in counters.JSON_NAMES), counters.REQUIRED),
}


def _table(name: str) -> Table:
    if name not in TABLES:
        raise StoreError(f"unknown table {name!r}; use one of {', '.join(TABLES)}")
    return TABLES[name]


def format_of(path: str | Path, fmt: str | None = None) -> tuple[str, bool]:
    """(format, gzip?) of a file: the given format, else the name's suffix (x.jsonl.gz -> jsonl,
    gzip); a format that is not one of FORMATS is an error."""
    path = Path(path)
    gz = path.suffix == ".gz"
    if fmt is None:
        fmt = (Path(path.stem) if gz else path).suffix.lstrip(".")
        if fmt not in FORMATS:
            raise StoreError(f"cannot tell the format of {path}; pass --format {'|'.join(FORMATS)}")
    elif fmt not in FORMATS:
        raise StoreError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    else:
        named = (Path(path.stem) if gz else path).suffix.lstrip(".")
        if named in FORMATS and named != fmt:
            raise StoreError(f"--format {fmt} contradicts the name {path.name} ({named})")
    return fmt, gz


def with_tags(frame, tags: list[str] | None, table: str = "attempts"):
    """The rows of a table's frame whose tag is one of `tags` (all rows when none is given). A tag
    that no row has is an error: most likely a typo, and an empty result would look like an empty
    store."""
    if not tags:
        return frame
    present = set(frame["tag"].dropna().astype(str))
    unknown = [t for t in tags if t not in present]
    if unknown:
        known = ", ".join(sorted(present)) or "none"
        raise StoreError(f"no {table} row has tag {unknown[0]!r} (tags in {table}: {known})")
    return frame[frame["tag"].isin(tags)].reset_index(drop=True)


def export(store: Store, fmt: str | None, out: str | Path, table: str = "attempts", tags=None,
           damaged: list | None = None) -> int:
    """Write every row of a table, or those of the given tags (JSON columns as JSON text in
    CSV/Parquet, as values in JSONL); the format is fmt, or else from the name of out. Nothing is
    written when a tag is unknown. A row whose text is damaged (db.DamagedText) is an error, unless
    `damaged` is a list: then the intact rows are written and what was left out (damage.Damage) is
    added to it."""
    fmt, gz = format_of(out, fmt)
    t = _table(table)
    out = Path(out)
    refuse_to_overwrite_a_store(store.path, out)
    if gz and fmt == "parquet":
        raise StoreError("parquet compresses itself: write it without .gz")
    if store._columns(t.name):
        frame = _intact_frame(store, t, damaged)
    else:  # a store that never held the table (model_rows before any `attnbench model`): no rows
        import pandas as pd

        frame = pd.DataFrame(columns=t.columns)
    df = with_tags(frame, tags, t.name)
    tmp = out.with_name(out.name + ".partial")
    try:
        if fmt == "jsonl":
            with (gzip.open(tmp, "wt") if gz else tmp.open("w")) as f:
                for rec in df.to_dict(orient="records"):
                    rec = {k: _clean(v) for k, v in rec.items()}
                    for c in t.json_columns:
                        if isinstance(rec.get(c), str):
                            rec[c] = json.loads(rec[c])
                    f.write(json.dumps(rec) + "\n")
        elif fmt == "csv":
            df.to_csv(tmp, index=False, compression="gzip" if gz else None)
        else:
            df.to_parquet(tmp, index=False)
        tmp.replace(out)  # nothing half-written under the final name
    except OSError as e:  # disk full, a read-only place: one line, and no .partial left behind
        raise StoreError(f"cannot write {out}: {e.strerror or e}") from None
    finally:
        with contextlib.suppress(OSError):  # a read-only place refuses even the removal of what is not there
            tmp.unlink(missing_ok=True)
    return len(df)


def _intact_frame(store: Store, t: Table, damaged: list | None):
    """The table's rows as a frame; those whose text is damaged (store/damage.py) are a DamagedText, or, with
    `damaged` a list, left out and added to it."""
    rowids = damage.suspects(store.con, t.name)  # JSON and number damage, found by SQLite itself
    found = damage.scan(store.con, t.name, rowids) if rowids or rowids is None else []
    while True:
        try:
            frame = store.table_frame(t.name, t.columns, skip=frozenset(d.rowid for d in found))
            break
        except DamagedText as e:  # bytes that are not UTF-8: SQLite fails on them as it reads
            found += [d for d in e.found if d not in found]
    if found and damaged is None:
        raise DamagedText(damage.describe(store.path, t.name, found), found)
    if damaged is not None:
        damaged += found
    return frame


SQLITE_MAGIC = b"SQLite format 3\0"
# the files SQLite keeps beside a database: rows not yet checkpointed live in -wal, so writing there loses them
SIDECARS = ("-wal", "-shm", "-journal")


def refuse_to_overwrite_a_store(db: Path | None, out: Path, option: str = "--out") -> None:
    """An output file never replaces a store: not the one read (under any name), nor any other SQLite
    database, nor the -wal, -shm or -journal file beside either, nor a directory."""
    if out.is_dir():
        raise StoreError(f"{option} is a directory: {out}")
    for name in dict.fromkeys((out, out.resolve())):  # a symlink's own name, and the file it names
        for suffix in SIDECARS:
            base = name.with_name(name.name[:-len(suffix)]) if name.name.endswith(suffix) else None
            if base is not None and (_is_sqlite(base) or (db is not None and base.absolute() == db.absolute())):
                raise StoreError(f"{option} {out} is the {suffix[1:]} file of the SQLite database {base}; write "
                                 "to another name (the store's unsaved rows live there)")
    if not out.exists():
        return
    if db is not None and db.exists() and out.samefile(db):
        raise StoreError(f"{option} {out} is the store being exported; write the export to another file")
    if _is_sqlite(out):
        raise StoreError(f"{option} {out} is a SQLite database; an output file does not overwrite one")


def _is_sqlite(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:  # absent, a directory, unreadable: not a database this command could harm
        return False


def _clean(v):
    try:
        import math

        if isinstance(v, float) and math.isnan(v):
            return None
    except TypeError:
        pass
    if hasattr(v, "item"):
        return v.item()
    return v


def read_rows(path: str | Path, fmt: str | None = None, table: str = "attempts") -> list[dict]:
    import pandas as pd

    t = _table(table)
    p = Path(path)
    if not p.is_file():
        raise StoreError(f"file not found: {p}")
    fmt, gz = format_of(p, fmt)
    try:
        if fmt == "jsonl":
            with (gzip.open(p, "rt") if gz else p.open()) as f:
                rows = [json.loads(line) for line in f if line.strip()]
        else:
            if fmt == "csv":  # text columns stay text: '0123' keys and an 'NA' reason survive
                text = {c: str for c, typ in t.types.items() if typ == "TEXT"}
                df = pd.read_csv(p, dtype=text, keep_default_na=False, na_values=[""],
                                 compression="gzip" if gz else None)
            else:
                df = pd.read_parquet(p)
            absent = [c for c in t.required if c not in df.columns]
            if absent:
                raise StoreError(f"{p}: no column {', '.join(absent)}")
            rows = [{k: _clean(v) for k, v in r.items()} for r in df.to_dict(orient="records")]
    except (ValueError, OSError, EOFError) as e:
        raise StoreError(f"cannot read {p} as {fmt}: {str(e).splitlines()[0]}") from None
    out = []
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            raise StoreError(f"{p}: row {i + 1} is not an object")
        missing = [c for c in t.required if r.get(c) is None]
        if missing:
            fits = [n for n, o in TABLES.items() if n != table and all(r.get(c) is not None for c in o.required)]
            other = max(fits, key=lambda n: len(TABLES[n].required), default=None)  # the most specific
            hint = f" (it reads as a {other} export: --table {other})" if other else ""
            raise StoreError(f"{p}: row {i + 1} lacks {', '.join(missing)}{hint}")
        if table == "attempts":  # an export written before a workload axis existed: its default
            r = {**{c: v for c, v in BACKFILL.items() if r.get(c) is None}, **{c: v for c, v in r.items() if v is not None}}
        typed = {}
        for c in t.types:
            try:
                typed[c] = _typed(t, c, r.get(c))
            except (TypeError, ValueError) as e:
                raise StoreError(f"{p}: row {i + 1}, column {c}: {e}") from None
        if table == "attempts":
            why = _not_a_record(typed)
            if why:
                raise StoreError(f"{p}: row {i + 1}: {why}")
        decoded = {c: json.loads(v) if c in t.json_columns and v is not None else v for c, v in typed.items()}
        try:  # what the values mean, as every import path checks them (store/meaning.py)
            meaning.check_row(decoded, record.TABLES[table]) if table in record.TABLES else meaning.check_run(decoded)
        except meaning.RowError as e:
            raise StoreError(f"{p}: row {i + 1}, {e}") from None
        if table == model_rows.TABLE:
            try:
                typed = model_rows.finish(decoded)
            except model_rows.ModelRowError as e:
                raise StoreError(f"{p}: row {i + 1}: {e}") from None
        if table == counters.TABLE:
            try:
                typed = counters.finish(decoded)
            except counters.CountersError as e:
                raise StoreError(f"{p}: row {i + 1}: {e}") from None
        out.append(typed)
    return out


def _not_a_record(row: dict) -> str | None:
    """Why an imported attempts row could not have been written by attnbench: an unknown status, or
    a value its status must carry (samples of an OK row, the reason of a failure) missing."""
    from ..record import Status, lacks

    try:
        status = Status(row["status"])
    except ValueError:
        return f"unknown status {row['status']!r}; statuses: {', '.join(s.value for s in Status)}"
    missing = lacks(status, {**row, "samples_us": json.loads(row.get("samples_us") or "[]")})
    return f"a {status.value} row lacks {', '.join(missing)}" if missing else None


def _typed(table: Table, col: str, v):
    if v is None:
        return None
    t = table.types[col]
    if col in table.json_columns:
        if isinstance(v, str):
            json.loads(v)  # invalid JSON text would break every later read of the store
            return v
        return json.dumps(v)
    if t == "INTEGER":
        if isinstance(v, float) and not v.is_integer():  # int() would cut 1.5 to 1 without a word
            raise ValueError(f"{v!r} is not an integer")
        return int(v)
    if t == "REAL":
        return float(v)
    return str(v)


def import_rows(store: Store, rows: list[dict]) -> int:
    """Insert rows (attempts already present are kept); unknown runs get a placeholder run row."""
    for run_id in {r["run_id"] for r in rows}:
        store.ensure_run({"run_id": run_id, "tag": next(r["tag"] for r in rows if r["run_id"] == run_id),
                          "grid": "imported", "provenance": {"imported": True}})
    return store.insert_many(rows)


def import_model_rows(store: Store, rows: list[dict]) -> int:
    """Insert model rows read by read_rows(table="model_rows") (rows already present are kept); unknown runs
    get a placeholder run row. Returns how many were new."""
    for run_id in {r["run_id"] for r in rows}:
        store.ensure_run({"run_id": run_id, "tag": next(r["tag"] for r in rows if r["run_id"] == run_id) or "",
                          "grid": "imported", "provenance": {"imported": True}})
    model_rows.ensure(store.con)
    return sum(model_rows.insert(store.con, r) for r in rows)


def import_counters(store: Store, rows: list[dict]) -> int:
    """Insert counters rows read by read_rows(table="counters") (an attempt's row already present is kept).
    Returns how many were new."""
    return sum(counters.insert(store.con, r) for r in rows)


def import_runs(store: Store, rows: list[dict]) -> int:
    """Insert run rows; a placeholder left by an earlier import of attempts is replaced, a real run
    row already present is kept. Returns how many were written."""
    return sum(store.put_run(r) for r in rows)
