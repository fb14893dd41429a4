"""Export the attempts table to JSONL, CSV or Parquet, and import it back (round trip)."""
from __future__ import annotations

import json
from pathlib import Path

from .db import Store, StoreError
from .schema import COLUMN_NAMES, JSON_COLUMNS, TYPES_BY_COLUMN

FORMATS = ("jsonl", "csv", "parquet")


def export(store: Store, fmt: str, out: str | Path) -> int:
    """Write every attempt (JSON columns as JSON text in CSV/Parquet, as values in JSONL)."""
    if fmt not in FORMATS:
        raise StoreError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    df = store.dataframe()
    out = Path(out)
    tmp = out.with_name(out.name + ".partial")
    if fmt == "jsonl":
        with tmp.open("w") as f:
            for rec in df.to_dict(orient="records"):
                rec = {k: _clean(v) for k, v in rec.items()}
                for c in JSON_COLUMNS:
                    if isinstance(rec.get(c), str):
                        rec[c] = json.loads(rec[c])
                f.write(json.dumps(rec) + "\n")
    elif fmt == "csv":
        df.to_csv(tmp, index=False)
    else:
        df.to_parquet(tmp, index=False)
    tmp.replace(out)  # nothing half-written under the final name
    return len(df)


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


def read_rows(path: str | Path, fmt: str | None = None) -> list[dict]:
    import pandas as pd

    p = Path(path)
    if not p.is_file():
        raise StoreError(f"file not found: {p}")
    fmt = fmt or p.suffix.lstrip(".")
    if fmt not in FORMATS:
        raise StoreError(f"cannot tell the format of {p}; pass --format {'|'.join(FORMATS)}")
    required = ("attempt_key", "run_id", "backend", "status")
    try:
        if fmt == "jsonl":
            rows = [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
        else:
            if fmt == "csv":  # text columns stay text: '0123' keys and an 'NA' reason survive
                text = {c: str for c in COLUMN_NAMES if TYPES_BY_COLUMN[c] == "TEXT"}
                df = pd.read_csv(p, dtype=text, keep_default_na=False, na_values=[""])
            else:
                df = pd.read_parquet(p)
            absent = [c for c in required if c not in df.columns]
            if absent:
                raise StoreError(f"{p}: no column {', '.join(absent)}")
            rows = [{k: _clean(v) for k, v in r.items()} for r in df.to_dict(orient="records")]
    except (ValueError, OSError) as e:
        raise StoreError(f"cannot read {p} as {fmt}: {str(e).splitlines()[0]}") from None
    out = []
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            raise StoreError(f"{p}: row {i + 1} is not an object")
        missing = [c for c in required if r.get(c) is None]
        if missing:
            raise StoreError(f"{p}: row {i + 1} lacks {', '.join(missing)}")
        typed = {}
        for c in COLUMN_NAMES:
            try:
                typed[c] = _typed(c, r.get(c))
            except (TypeError, ValueError) as e:
                raise StoreError(f"{p}: row {i + 1}, column {c}: {e}") from None
        out.append(typed)
    return out


def _typed(col: str, v):
    if v is None:
        return None
    t = TYPES_BY_COLUMN[col]
    if col in JSON_COLUMNS:
        return v if isinstance(v, str) else json.dumps(v)
    if t == "INTEGER":
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
