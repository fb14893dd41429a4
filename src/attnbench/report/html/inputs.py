"""The stores a report reads: SQLite stores, or exports read back through the store's own import path into a
temporary store (with the runs export beside them, when there is one, for provenance and ceilings)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ...store import io, model_rows
from ...store.db import Store, StoreError
from ...store.labelled import Source, parse_sources

RUNS_SUFFIXES = (".runs.jsonl", ".runs.jsonl.gz", ".runs.csv", ".runs.csv.gz", ".runs.parquet")


def _base(path: Path) -> str:
    """quick-2026-11-30c.jsonl.gz -> quick-2026-11-30c: the name before its first dot."""
    return path.name.split(".")[0] or path.name


def is_store(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(len(io.SQLITE_MAGIC)) == io.SQLITE_MAGIC
    except OSError as e:
        raise StoreError(f"cannot read {path}: {e.strerror or e}") from None


def runs_export(path: Path, suffixes=RUNS_SUFFIXES) -> Path | None:
    """The runs export written beside an attempts export (NAME.runs.jsonl for NAME.jsonl.gz), if any."""
    for suffix in suffixes:
        p = path.with_name(_base(path) + suffix)
        if p.is_file() and p != path:
            return p
    return None


def sources(specs: list[str]) -> list[Source]:
    """STORE or LABEL=STORE per argument (store/labelled.py); an export's default label is its name before
    the first dot, not Path.stem (quick.jsonl.gz -> quick, not quick.jsonl). Every file must exist."""
    named = []
    for spec in specs:
        p = Path(spec)
        plain = "=" not in spec or p.is_file()
        named.append(f"{_base(p)}={spec}" if plain and p.suffix != ".sqlite" and "=" not in _base(p) else spec)
    out = parse_sources(named)
    for s in out:
        if s.path.is_dir():
            raise StoreError(f"{s.path} is a directory, not a store or an export")
        if not s.path.is_file():
            raise StoreError(f"store not found: {s.path}")
    return out


def _read(store: Store, label: str) -> tuple[pd.DataFrame, list[dict]]:
    try:
        return store.dataframe().assign(label=label), store.runs()
    finally:
        store.close()


def read(specs: list[str], workdir: Path) -> tuple[pd.DataFrame, dict[str, list[dict]], dict[str, Path]]:
    """Every attempt of every source with its `label`, each label's runs (oldest first) and its file. Exports
    are validated and imported (io.read_rows, io.import_rows) into a store under `workdir`; nothing is
    written beside the sources."""
    srcs = sources(specs)
    frames, runs = [], {}
    for i, s in enumerate(srcs):
        if is_store(s.path):
            df, r = _read(Store(s.path, create=False, readonly=True), s.label)
        else:
            try:
                io.format_of(s.path)
            except StoreError:  # not io's advice (--format): report takes no format
                raise StoreError(f"{s.path} is neither an attnbench store nor an export of one (.jsonl, .csv or "
                                 ".parquet, optionally .gz)") from None
            rows = io.read_rows(s.path)  # validated first: a bad file is one line and exit 2
            side = runs_export(s.path)
            run_rows = io.read_rows(side, table="runs") if side else []
            tmp = Store(workdir / f"import-{i}.sqlite")
            io.import_rows(tmp, rows)
            io.import_runs(tmp, run_rows)
            df, r = _read(tmp, s.label)
        frames.append(df)
        runs[s.label] = r
    df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return df, runs, {s.label: s.path for s in srcs}


def read_models(specs: list[str]) -> pd.DataFrame:
    """The model_rows (`attnbench model`) of every source with its `label`: a store's own table, or for an
    export the model_rows export beside it (NAME.model_rows.jsonl), validated as `import --table model_rows`
    validates it. Empty when no source holds any."""
    frames = []
    for s in sources(specs):
        if is_store(s.path):
            store = Store(s.path, create=False, readonly=True)
            try:
                got = model_rows.rows(store.con)
            finally:
                store.close()
        else:
            side = runs_export(s.path, tuple(x.replace(".runs.", ".model_rows.") for x in RUNS_SUFFIXES))
            got = io.read_rows(side, table="model_rows") if side else []
        if got:
            frames.append(pd.DataFrame(got, columns=model_rows.NAMES).assign(label=s.label))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*model_rows.NAMES, "label"])
