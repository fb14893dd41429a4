"""The one loader of every command that reads results: SQLite stores and exports alike, each under a label."""
from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from . import counters, io, model_rows, samples
from .db import Store, StoreError, open_readonly, reading, table_columns
from .samples import CHUNK_ROWS, parse_lists
from .schema import COLUMN_NAMES

RUNS_SUFFIXES = (".runs.jsonl", ".runs.jsonl.gz", ".runs.csv", ".runs.csv.gz", ".runs.parquet")
MODEL_SUFFIXES = tuple(x.replace(".runs.", ".model_rows.") for x in RUNS_SUFFIXES)
COUNTERS_SUFFIXES = tuple(x.replace(".runs.", ".counters.") for x in RUNS_SUFFIXES)  # export --table counters


@dataclass(frozen=True)
class Source:
    """One argument of a reading command: the label its rows carry and the file they come from."""

    label: str
    path: Path


@dataclass(frozen=True)
class Dataset:
    """What the stores and exports of one command hold, side by side."""

    # every attempt of every source, with a `label` column; samples_us as numbers (sources.attempts_frame); where
    # a source has counters (issue 39), their columns (store/counters.py SHOWN) on its rows, NaN on rows without
    attempts: pd.DataFrame
    runs: dict[str, list[dict]]  # label -> that source's runs, oldest first (provenance, ceilings)
    models: pd.DataFrame  # the model rows (`attnbench model`) of every source, with `label`; may be empty
    paths: dict[str, Path]  # label -> the file it was read from, in argument order

    @property
    def labels(self) -> list[str]:
        return list(self.paths)


def label_of(path: Path) -> str:
    """The default label of a file, for every command alike: its name before the first dot
    (quick.sqlite and quick.jsonl.gz are both `quick`)."""
    return path.name.split(".")[0] or path.name


def parse(specs: list[str]) -> list[Source]:
    """STORE or LABEL=STORE per argument. Two sources with one label are an error: their rows could not
    be told apart. A name that exists as a file is a file, even with '=' in it."""
    out: list[Source] = []
    for spec in specs:
        label, sep, path = spec.partition("=")
        if not sep or Path(spec).is_file() or "/" in label:
            label, path = label_of(Path(spec)), spec
        if not label:
            raise StoreError(f"empty label in {spec!r}; use LABEL=STORE")
        if any(s.label == label for s in out):
            raise StoreError(f"two stores are labelled {label!r}; name them apart with LABEL=STORE")
        out.append(Source(label, Path(path)))
    return out


def single(path: str) -> Source:
    """One file named by an option (show --db): the path as given, '=' and all, under its default label."""
    if not str(path).strip():
        raise StoreError("the store path is empty")
    return Source(label_of(Path(path)), Path(path))


def is_store(path: Path) -> bool:
    """Whether the file is a SQLite database (an attnbench store or not: Store tells)."""
    try:
        with path.open("rb") as f:
            return f.read(len(io.SQLITE_MAGIC)) == io.SQLITE_MAGIC
    except OSError as e:
        raise StoreError(f"cannot read {path}: {e.strerror or e}") from None


def beside(path: Path, suffixes=RUNS_SUFFIXES) -> Path | None:
    """The export written beside an attempts export (NAME.runs.jsonl for NAME.jsonl.gz), if any."""
    for suffix in suffixes:
        p = path.with_name(label_of(path) + suffix)
        if p.is_file() and p != path:
            return p
    return None


def check(sources: list[Source]) -> None:
    """Every file exists and is a file, before any is read."""
    for s in sources:
        if s.path.is_dir():
            raise StoreError(f"{s.path} is a directory, not a store or an export")
        if not s.path.is_file():
            raise StoreError(f"store not found: {s.path}")


def attempts_frame(store: Store, lazy: bool = True) -> pd.DataFrame:
    """The store's attempts in insertion order, with each row's raw samples as numbers (None when it holds none)
    instead of their JSON text. From the samples table (schema 11, store/samples.py), with its per-row count
    and quantiles in the columns samples.FRAME_COLUMNS: `lazy`, a samples.Stored per row, read from the store only
    when asked for (most never are); else the arrays. A row without a samples row (a store written before 11,
    opened read-only) has its JSON parsed, in chunks, as before, and NaN in those columns."""
    con = store.con
    in_tx = con.in_transaction
    if not in_tx:
        con.execute("BEGIN")  # one snapshot for every read: a run may be writing to the store meanwhile
    try:
        df = store.table_frame("attempts", [c for c in COLUMN_NAMES if c != "samples_us"])
        arrays: list = [None] * len(df)
        summary = pd.DataFrame(np.nan, index=df.index, columns=list(samples.FRAME_COLUMNS))
        if "samples_us" in table_columns(con, "attempts"):
            with reading(con, "attempts", store.path):  # a damaged row's text: named by row and column
                parse = _stored(store, lazy, arrays, summary)
                for lo in range(0, len(parse), CHUNK_ROWS):
                    part = parse[lo:lo + CHUNK_ROWS]
                    texts = con.execute(f"SELECT samples_us FROM attempts WHERE rowid IN ({','.join('?' * len(part))}) "
                                        "ORDER BY rowid", [r for _, r in part]).fetchall()
                    for (i, _), a in zip(part, parse_lists(t[0] for t in texts)):
                        arrays[i] = a
    finally:
        if not in_tx:
            con.execute("ROLLBACK")
    df.insert(COLUMN_NAMES.index("samples_us"), "samples_us", pd.Series(arrays, index=df.index, dtype=object))
    return pd.concat([df, summary], axis=1)


def _stored(store: Store, lazy: bool, arrays: list, summary: pd.DataFrame) -> list[tuple[int, int]]:
    """Fills `arrays` and `summary` from the samples table for the rows that have a samples row; returns
    (position, rowid) of the rows whose JSON text is to be parsed (holding samples, no samples row)."""
    con = store.con
    if not con.execute("SELECT 1 FROM sqlite_master WHERE name = 'samples'").fetchone():
        return [(i, r) for i, (r, has) in enumerate(con.execute(
            "SELECT rowid, samples_us IS NOT NULL FROM attempts ORDER BY rowid")) if has]
    cols = ", ".join(f"s.{c}" for c in samples.SUMMARY)
    # samples_us IS NOT NULL: a row slimmed of its samples after they were stored (lab/sweep_parts.py) holds none
    q = (f"SELECT a.rowid, a.samples_us IS NOT NULL, a.attempt_key, {cols} FROM attempts a "
         "LEFT JOIN samples s ON s.attempt_key = a.attempt_key ORDER BY a.rowid")
    rows = con.execute(q).fetchall()
    parse = [(i, r[0]) for i, r in enumerate(rows) if r[1] and r[3] is None]
    have = [i for i, r in enumerate(rows) if r[1] and r[3] is not None]
    if not have:
        return parse
    summary.iloc[have] = np.array([tuple(rows[i][3:]) for i in have], dtype=float)
    if lazy:
        reader = samples.Reader(store.path, open_readonly)
        for i in have:
            arrays[i] = samples.Stored(reader, rows[i][2], rows[i][3])
    else:
        cur = con.execute("SELECT a.rowid, s.data FROM attempts a JOIN samples s ON s.attempt_key = a.attempt_key "
                          "WHERE a.samples_us IS NOT NULL ORDER BY a.rowid")
        for i, (_, data) in zip(have, cur):
            arrays[i] = samples.from_bytes(data)
    return parse


def _from_store(store: Store, label: str, lazy: bool = True) -> tuple[pd.DataFrame, list[dict], list[dict]]:
    try:
        df = counters.with_counters(attempts_frame(store, lazy), store.con)  # the counters table, joined once
        return df.assign(label=label), store.runs(), model_rows.rows(store.con)
    finally:
        store.close()


def _from_export(path: Path, label: str, workdir: Path) -> tuple[pd.DataFrame, list[dict], list[dict]]:
    """An export read through the checks of `import` (io.read_rows) into a temporary store, with the runs,
    model_rows and counters exports beside it when there are any."""
    try:
        io.format_of(path)
    except StoreError:  # not io's advice (--format): the readers take no format
        raise StoreError(f"{path} is neither an attnbench store nor an export of one (.jsonl, .csv or "
                         ".parquet, optionally .gz)") from None
    rows = io.read_rows(path)  # validated first: a bad file is one line and exit 2
    side = beside(path)
    run_rows = io.read_rows(side, table="runs") if side else []
    side = beside(path, MODEL_SUFFIXES)
    models = io.read_rows(side, table="model_rows") if side else []
    side = beside(path, COUNTERS_SUFFIXES)
    counter_rows = io.read_rows(side, table="counters") if side else []
    tmp = Store(workdir / f"{len(list(workdir.iterdir()))}.sqlite")
    io.import_rows(tmp, rows)
    io.import_runs(tmp, run_rows)
    if counter_rows:
        io.import_counters(tmp, counter_rows)
    df, runs, _ = _from_store(tmp, label, lazy=False)  # the temporary store is gone once read
    return df, runs, models


def load(specs: list[str]) -> Dataset:
    """Every source of STORE or LABEL=STORE arguments (parse) as one Dataset (read)."""
    return read(parse(specs))


def read(sources: list[Source]) -> Dataset:
    """The sources as one Dataset. Missing, foreign or malformed files raise StoreError (one line) before
    anything is returned; nothing is written beside the sources."""
    check(sources)
    frames, runs, models = [], {}, []
    with tempfile.TemporaryDirectory(prefix="attnbench-read-") as work:
        for s in sources:
            if is_store(s.path):
                df, r, m = _from_store(Store(s.path, create=False, readonly=True), s.label)
            else:
                df, r, m = _from_export(s.path, s.label, Path(work))
            frames.append(df)
            runs[s.label] = r
            if m:
                models.append(pd.DataFrame(m, columns=model_rows.NAMES).assign(label=s.label))
    return Dataset(attempts=pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(), runs=runs,
                   models=pd.concat(models, ignore_index=True) if models
                   else pd.DataFrame(columns=[*model_rows.NAMES, "label"]),
                   paths={s.label: s.path for s in sources})
