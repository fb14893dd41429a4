"""The model_rows table: one row per (model step × backend) measured by `attnbench model`, in the same
SQLite file as attempts and runs. Provenance is the run's row in `runs` (same run_id) plus the
toolkit columns copied into each row, as attempts do; statuses are the attempts' Status values."""
from __future__ import annotations

import json
import statistics

from ..record import SQL_TYPES, named_row, percentile
from ..status import Status
from .db import table_columns

TABLE = "model_rows"
OK_ONLY = "ok"  # only OK rows carry the value

# (name, type, meaning, carried): carried "ok" means cleared on every status but OK
COLUMNS: tuple[tuple[str, type, str, str], ...] = (
    ("row_key", str, "hash of tag, device model, config, layers, dtype, step, shape, launch, backend, seed", ""),
    ("run_id", str, "the invocation (see runs: its provenance)", ""),
    ("tag", str, "sweep label", ""),
    ("backend", str, "backend whose attend() every layer called", ""),
    ("family", str, "backend library family", ""),
    ("role", str, "contestant or accuracy_reference", ""),
    ("config", str, "model config name (attnbench.model.configs)", ""),
    ("layers", int, "decoder layers built", ""),
    ("hidden", int, "model width", ""),
    ("q_heads", int, "query heads", ""),
    ("kv_heads", int, "key/value heads", ""),
    ("head_dim", int, "D", ""),
    ("intermediate", int, "SwiGLU width", ""),
    ("sliding_window", int, "attention window (NULL: none)", ""),
    ("dtype", str, "fp32 | bf16 | fp16", ""),
    ("step", str, "train (fwd + bwd + AdamW) | prefill | decode (one token, cache append included)", ""),
    ("launch", str, "eager, or graph (decode under a CUDA graph)", ""),
    ("batch", int, "sequences per step", ""),
    ("seqlen", int, "tokens per sequence (decode: cache length read, the new token included)", ""),
    ("tokens", int, "tokens per step (decode: batch)", ""),
    ("attention_calls", int, "attend() calls per step (= layers)", ""),
    ("workload_key", str, "key of the attention Workload each call is (for the kernel-level lookup)", ""),
    ("status", str, " ".join(s.value for s in Status), ""),
    ("reason", str, "why, for every status but OK", ""),
    ("samples_us", list, "JSON raw per-step times (µs)", OK_ONLY),
    ("median_us", float, "median step time", OK_ONLY),
    ("p95_us", float, "95th percentile step time", OK_ONLY),
    ("calls_per_sample", int, "steps per timed block", OK_ONLY),
    ("timer", str, "cuda_event | cuda_graph | host_clock", OK_ONLY),
    ("late_samples", int, "cuda_graph samples dropped because the device reached them before the host had "
                          "queued them (measure/timing.py: GraphSampler); NULL in rows written before the column",
     OK_ONLY),
    ("converged", bool, "1 when the median's 95% half-width reached the target", OK_ONLY),
    ("stationary", bool, "1 when warm-up settled and the samples show no trend", OK_ONLY),
    ("tokens_per_s", float, "tokens / median step time", OK_ONLY),
    ("cold_start_us", float, "first step, compilation and autotuning included", ""),
    ("peak_mem_bytes", int, "peak device memory of one step above what was allocated before it (CUDA)", ""),
    ("err_ratio", float, "probe error over the same-dtype reference model's, against float64", ""),
    ("max_abs_err", float, "largest probe error against float64", ""),
    ("check_detail", dict, "JSON per probe tensor: max_abs, ratio, ref_max_abs", ""),
    ("families", list, "JSON kernel families the profiled step ran", ""),
    ("attn_families", list, "JSON families counted as attention's (declared, not run by the no-op step)", ""),
    ("attn_kernel_us", float, "device time of those families per step (CUDA)", OK_ONLY),
    ("step_kernel_us", float, "device time of every kernel per step (CUDA)", OK_ONLY),
    ("share_profiler", float, "f by the profiler (model/share.py)", OK_ONLY),
    ("share_note", str, "why share_profiler is NULL", ""),
    ("noop_us", float, "median of the same step with attention replaced by a no-op", OK_ONLY),
    ("share_diff", float, "f by difference: (median_us - noop_us) / median_us, unclamped", OK_ONLY),
    ("baseline", str, "the backend speedups are against", OK_ONLY),
    ("measured_speedup", float, "baseline's median_us / this row's", OK_ONLY),
    ("kernel_us", float, "isolated median µs per attention call of this backend (kernel store)", OK_ONLY),
    ("kernel_baseline_us", float, "the same of the baseline", OK_ONLY),
    ("kernel_speedup", float, "s = kernel_baseline_us / kernel_us", OK_ONLY),
    ("f_used", float, "the baseline's share the prediction uses, clamped to [0, 1]", OK_ONLY),
    ("f_source", str, "profiler or difference", OK_ONLY),
    ("predicted_speedup", float, "1 / ((1 - f) + f / s)", OK_ONLY),
    ("gap", float, "measured_speedup / predicted_speedup - 1", OK_ONLY),
    ("explain", dict, "JSON evidence on the gap (model/amdahl.py) and a one-line why", OK_ONLY),
    ("device_name", str, "device model", ""),
    ("device_index", int, "CUDA device index", ""),
    ("torch_version", str, "torch version", ""),
    ("cuda_runtime", str, "CUDA runtime torch was built with", ""),
    ("cudnn_version", int, "cuDNN version loaded", ""),
    ("driver_version", str, "NVIDIA driver", ""),
    ("attnbench_sha", str, "git revision of attnbench (+dirty)", ""),
    ("wall_s", float, "wall seconds of the row's whole measurement", ""),
    ("created_at", str, "UTC time the row was written", ""),
)
NAMES = tuple(c[0] for c in COLUMNS)
JSON_NAMES = frozenset(c[0] for c in COLUMNS if c[1] in (list, dict))
_REQUIRED = ("row_key", "run_id", "backend", "config", "step", "status", "device_name", "created_at")


class ModelRowError(ValueError):
    """A value no column declares, or a row that lacks what its status requires."""


def ddl() -> str:
    cols = ",\n  ".join(f"{n} {SQL_TYPES[t]}" + (" NOT NULL UNIQUE" if n == "row_key" else
                                              " NOT NULL" if n in _REQUIRED else "") for n, t, _, _ in COLUMNS)
    return f"CREATE TABLE IF NOT EXISTS {TABLE} (\n  {cols}\n)"


def finish(values: dict) -> dict:
    """The row as stored: unknown names refused, what the status may not carry cleared, median and
    p95 derived from the samples, what it must carry checked (a failure its reason, OK its samples)."""
    status, row = named_row(values, NAMES, ModelRowError, "no model_rows column for {}")
    if status is not Status.OK:
        for n, _, _, carried in COLUMNS:
            if carried == OK_ONLY:
                row[n] = None
    elif row["samples_us"]:
        row["median_us"] = statistics.median(row["samples_us"])
        row["p95_us"] = percentile(row["samples_us"], 0.95)
    missing = [n for n in _REQUIRED if row.get(n) is None]
    if status is Status.OK and not row["samples_us"]:
        missing.append("samples_us")
    if status is not Status.OK and not row["reason"]:
        missing.append("reason")
    if missing:
        raise ModelRowError(f"{status.value} model row of {row.get('backend')} lacks {', '.join(missing)}")
    return row


def ensure(con) -> None:
    """Create the table in an open store (idempotent); a table written before a column existed gains it
    (NULL in its rows)."""
    with con:
        con.execute(ddl())
        have = table_columns(con, TABLE)
        for n, t, _, _ in COLUMNS:
            if n not in have:
                con.execute(f"ALTER TABLE {TABLE} ADD COLUMN {n} {SQL_TYPES[t]}")


def insert(con, row: dict) -> bool:
    """Write one finished row in its own transaction (the table made by `ensure`); False when its
    key already has a row."""
    vals = [json.dumps(row[n]) if n in JSON_NAMES and row[n] is not None else
            int(row[n]) if isinstance(row[n], bool) else row[n] for n in NAMES]
    with con:
        cur = con.execute(f"INSERT OR IGNORE INTO {TABLE} ({','.join(NAMES)}) VALUES ({','.join('?' * len(NAMES))})",
                          vals)
    return cur.rowcount == 1


def rows(con, where: str = "", params: tuple = ()) -> list[dict]:
    """Rows as dicts (JSON decoded), in insertion order; [] when the table does not exist."""
    have = table_columns(con, TABLE)  # a read-only store's older table: the columns added since read NULL
    if not have:
        return []
    names = [n for n in NAMES if n in have]
    cur = con.execute(f"SELECT {','.join(names)} FROM {TABLE} {where} ORDER BY rowid", params)
    out = []
    for r in cur.fetchall():
        d = dict.fromkeys(NAMES) | dict(zip(names, r))
        for n in JSON_NAMES:
            if isinstance(d[n], str):
                d[n] = json.loads(d[n])
        out.append(d)
    return out


def keys(con) -> set[str]:
    """row_keys already stored (resume skips them)."""
    if not table_columns(con, TABLE):
        return set()
    return {k for (k,) in con.execute(f"SELECT row_key FROM {TABLE}")}
