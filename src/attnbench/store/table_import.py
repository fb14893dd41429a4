"""Results of other tools as attempt rows: `attnbench import --format table FILE.csv`.

The file is CSV (optionally .gz), one row per device × workload × backend × repeat:

- required: `device` (or `device_name`), `backend`, `mode`, `batch`, `q_heads`, `head_dim`, `dtype`,
  `median_us`, and the length: `seqlen` (prefill: Nq = Nkv; decode: the KV-cache length) or
  `q_len` and `kv_len`;
- optional: `kv_heads` (default q_heads), `head_dim_v` (default head_dim), `causal` (default
  false), `causal_align`, `layout`, `launch`, `l2`, `dropout`, `accum`, `window`, `decode_append`
  (decode rows: excluded or included) (defaults as in Workload),
  `repeat` (default 0: give each process repeat its own index), `samples_us` (the raw per-call
  samples in µs, a JSON list or space-separated; their median must be within 1% of median_us),
  `device_uuid`, `torch_version`, `tag` (default "import"), `role` (default contestant), `family`
  (default "imported").

Each row becomes an OK attempt of run "import-<file stem>": samples_us are the raw samples or
[median_us], the attempt key a hash of the device, UUID, toolkit, tag, workload, backend and repeat
(importing a file twice adds nothing). What attnbench did not measure stays NULL in the store:
correctness, cold start and wall time; `dispatch_status` is 'unprobed', `timer` 'imported',
`converged` 0. With one sample per repeat, separation needs 3 repeats (analysis/stats.py).
Every row is validated before the store is touched; one bad row and nothing is written."""
from __future__ import annotations

import gzip
import hashlib
import json
import math
from pathlib import Path

from .. import record
from ..workloads import Workload, WorkloadError
from ..workloads.axes import axis
from ..workloads.cost import flops, io_bytes
from . import meaning
from .db import Store, StoreError, utcnow

REQUIRED = ("backend", "mode", "batch", "q_heads", "head_dim", "dtype", "median_us")
OPTIONAL_AXES = ("kv_heads", "head_dim_v", "causal", "causal_align", "layout", "launch", "l2", "dropout", "accum",
                 "window", "decode_append")
KNOWN = {"device", "device_name", "seqlen", "q_len", "kv_len", "repeat", "samples_us", "device_uuid",
         "torch_version", "tag", "role", "family", *REQUIRED, *OPTIONAL_AXES}
# what attnbench measures and another tool's table does not hold: NaN passes record.finish's
# presence check and is written as NULL ("not measured"), never as a made-up number
NOT_MEASURED = ("wall_s", "cold_start_us", "max_abs_err", "rmse", "cosine", "err_ratio", "ref_err")


def _read_csv(path: Path) -> list[dict]:
    import pandas as pd

    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False, compression="gzip" if path.suffix == ".gz" else None)
    except (ValueError, OSError, EOFError, gzip.BadGzipFile) as e:
        raise StoreError(f"cannot read {path} as a CSV table: {str(e).splitlines()[0]}") from None
    df.columns = [c.strip() for c in df.columns]
    unknown = sorted(set(df.columns) - KNOWN)
    if unknown:
        raise StoreError(f"{path}: unknown column {unknown[0]!r} (columns: see attnbench.store.table_import)")
    absent = [c for c in REQUIRED if c not in df.columns]
    if "device" not in df.columns and "device_name" not in df.columns:
        absent.insert(0, "device")
    if "seqlen" not in df.columns and not {"q_len", "kv_len"} <= set(df.columns):
        absent.append("seqlen (or q_len and kv_len)")
    if absent:
        raise StoreError(f"{path}: no column {', '.join(absent)}")
    return [{k: v.strip() for k, v in r.items() if v.strip() != ""} for r in df.to_dict(orient="records")]


def _parse(r: dict, name: str, column: str | None = None):
    """One axis value of a row's text, a bad one named by its column."""
    try:
        return axis(name).parse(r[column or name])
    except WorkloadError as e:
        raise meaning.RowError(column or name, str(e)) from None


def _workload(r: dict) -> Workload:
    fields = {n: _parse(r, n) for n in ("mode", "batch", "q_heads", "head_dim", "dtype", *OPTIONAL_AXES) if n in r}
    if "seqlen" in r:
        n = _parse(r, "kv_len", "seqlen")
        fields.update(q_len=1 if fields["mode"] == "decode" else n, kv_len=n)
    for n in ("q_len", "kv_len"):
        if n in r:
            fields[n] = _parse(r, n)
    fields.setdefault("kv_heads", fields["q_heads"])
    fields.setdefault("head_dim_v", fields["head_dim"])
    if fields.get("causal") is False and "causal_align" not in fields:
        fields["causal_align"] = "bottom_right"
    return meaning.workload(fields)  # a workload that cannot exist: named by the axis at fault


def _samples(r: dict) -> list[float]:
    """The raw samples of a row (a JSON list or space-separated), else [median_us]: checked as every import
    checks them (store/meaning.py), the median against them."""
    try:
        median = float(r["median_us"])
    except ValueError:
        raise meaning.RowError("median_us", f"must be a positive time in µs, got {r['median_us']!r}") from None
    text = r.get("samples_us")
    if text is None:
        meaning.median_matches(median, [median])  # positive and finite
        return [median]
    try:
        values = json.loads(text) if text.startswith("[") else [float(x) for x in text.replace(";", " ").split()]
    except ValueError:
        raise meaning.RowError("samples_us", f"must be a JSON list or space-separated times, got {text[:40]!r}") \
            from None
    samples = meaning.samples(values)
    meaning.median_matches(median, samples)
    return samples


def attempt_key(device: str, uuid, torch_version, tag: str, workload_key: str, backend: str, repeat: int) -> str:
    blob = json.dumps(["table", device, uuid, torch_version, tag, workload_key, backend, repeat])
    return hashlib.sha1(blob.encode()).hexdigest()[:16]


def attempt_row(r: dict, run_id: str, created: str) -> dict:
    """One row of a results table (column name -> text) as a stored attempt row."""
    w = _workload(r)
    device = r.get("device") or r.get("device_name")
    if not device:
        raise ValueError("no device")
    role = r.get("role", "contestant")
    if role not in ("contestant", "accuracy_reference"):
        raise ValueError(f"role must be contestant or accuracy_reference, got {role!r}")
    repeat = int(r.get("repeat", 0))
    tag = r.get("tag", "import")
    values = {
        **w.to_dict(), "attempt_key": attempt_key(device, r.get("device_uuid"), r.get("torch_version"), tag, w.key(),
                                                  r["backend"], repeat),
        "run_id": run_id, "tag": tag, "backend": r["backend"], "family": r.get("family", "imported"), "role": role,
        "workload_key": w.key(), "repeat": repeat, "status": "OK",
        "samples_us": _samples(r), "calls_per_sample": 1, "timer": "imported", "converged": False,
        "warmup_calls": 0, "warmup_us": 0.0, "check_detail": {"checked": False, "source": "imported table"},
        "dispatch_status": "unprobed", "flops": float(flops(w)), "bytes": None if io_bytes(w) is None else
        float(io_bytes(w)), "device_name": device, "device_uuid": r.get("device_uuid"),
        "torch_version": r.get("torch_version"), "created_at": created, **{c: math.nan for c in NOT_MEASURED}}
    row = record.as_row(record.finish(values))
    row = {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()}
    meaning.check_row(row)  # the checks of every import path, on the row as stored
    return row


def read_table(path: str | Path) -> tuple[list[dict], dict]:
    """The attempt rows of a results table and the run row they belong to; StoreError names the first
    bad row (rows count from 1 after the header)."""
    p = Path(path)
    if not p.is_file():
        raise StoreError(f"file not found: {p}")
    stem = p.name.split(".")[0]
    run_id = f"import-{stem}"
    created = utcnow()
    rows, seen = [], {}
    for i, r in enumerate(_read_csv(p), start=1):
        missing = [c for c in REQUIRED if c not in r]
        if missing:
            raise StoreError(f"{p}: row {i} has no {missing[0]}")
        try:
            row = attempt_row(r, run_id, created)
        except meaning.RowError as e:
            raise StoreError(f"{p}: row {i}, {e}") from None
        except (ValueError, WorkloadError, record.RecordError) as e:
            raise StoreError(f"{p}: row {i}: {e}") from None
        if row["attempt_key"] in seen:
            raise StoreError(f"{p}: rows {seen[row['attempt_key']]} and {i} are the same device, workload, backend "
                             "and repeat (give repeats their own index)")
        seen[row["attempt_key"]] = i
        rows.append(row)
    if not rows:
        raise StoreError(f"{p}: no rows")
    run = {"run_id": run_id, "tag": rows[0]["tag"], "grid": "table", "argv": None,
           "device_name": rows[0]["device_name"], "started_at": created, "finished_at": created,
           "provenance": {"imported": True, "format": "table", "file": p.name}}
    return rows, run


def write_table(store: Store, rows: list[dict], run: dict) -> int:
    """Add the rows (attempts already present are kept) and their run; returns how many were new."""
    store.ensure_run(run)
    return store.insert_many(rows)

