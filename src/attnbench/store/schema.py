"""The store's schema: one table of attempts (one row each), one of runs, versioned."""
from __future__ import annotations

SCHEMA_VERSION = 1

# (column, SQLite type, meaning). This list is the export schema too; docs/schema.md is made from it.
ATTEMPT_COLUMNS: list[tuple[str, str, str]] = [
    ("attempt_key", "TEXT NOT NULL UNIQUE", "identity of the attempt: hash of tag, device model, workload, backend, repeat, seed"),
    ("run_id", "TEXT NOT NULL", "the invocation that executed the attempt (see runs)"),
    ("tag", "TEXT", "sweep label; resume continues attempts with the same tag"),
    ("backend", "TEXT NOT NULL", "backend name (e.g. sdpa-flash)"),
    ("family", "TEXT", "backend library family (reference, sdpa, flex, compile, plugin...)"),
    ("role", "TEXT", "contestant, or accuracy_reference (measured, not a fair latency contest)"),
    ("workload_key", "TEXT", "hash of every semantic field of the workload"),
    ("mode", "TEXT", "train_fwd | train_fwd_bwd | prefill | decode"),
    ("batch", "INTEGER", "B"),
    ("q_len", "INTEGER", "query length Nq (1 for decode)"),
    ("kv_len", "INTEGER", "key/value length Nkv (KV-cache length for decode)"),
    ("q_heads", "INTEGER", "query heads Hq"),
    ("kv_heads", "INTEGER", "key/value heads Hkv (Hq: MHA, 1: MQA, else GQA)"),
    ("head_dim", "INTEGER", "D of Q and K"),
    ("head_dim_v", "INTEGER", "D of V and O"),
    ("dtype", "TEXT", "fp32 | bf16 | fp16"),
    ("accum", "TEXT", "accumulation precision asked for"),
    ("causal", "INTEGER", "1 when a causal mask applies"),
    ("causal_align", "TEXT", "top_left (j <= i) or bottom_right (j <= i + Nkv - Nq)"),
    ("dropout", "REAL", "dropout probability"),
    ("layout", "TEXT", "BHND or BNHD memory layout of Q, K, V, O"),
    ("launch", "TEXT", "eager or graph (CUDA graph replay)"),
    ("l2", "TEXT", "warm, or cold (L2 flushed before every sample, one call per sample)"),
    ("decode_append", "TEXT", "decode only: 'excluded' = appending K/V is not inside the timed step"),
    ("repeat", "INTEGER", "process-level repeat index (0-based)"),
    ("status", "TEXT NOT NULL", "OK UNSUPPORTED OOM_PREDICTED OOM INCORRECT DISPATCH_MISMATCH TIMEOUT CRASH ERROR"),
    ("reason", "TEXT", "why, for every status but OK"),
    ("median_us", "REAL", "median of samples_us (OK rows)"),
    ("p95_us", "REAL", "95th percentile of samples_us"),
    ("samples_us", "TEXT", "JSON list of raw per-call times in microseconds"),
    ("calls_per_sample", "INTEGER", "k calls between one pair of events (block timing)"),
    ("timer", "TEXT", "cuda_event (eager: k calls from the host, host cost included when it is the slower), "
                      "cuda_graph (replays behind a device-side delay: device time only) or host_clock (CPU)"),
    ("converged", "INTEGER", "1 when the median's 95% half-width reached the target"),
    ("rel_err", "REAL", "95% half-width of the median over the median at stop"),
    ("warmup_calls", "INTEGER", "calls in the timed warm-up"),
    ("warmup_us", "REAL", "wall time of the warm-up"),
    ("wall_s", "REAL", "wall seconds of the whole attempt, including the start of a worker started for it alone"),
    ("phases_s", "TEXT", "JSON wall seconds per phase: inputs, prepare, cold_call, check, probe, memory, timing"),
    ("cold_start_us", "REAL", "first call, compilation and autotuning included (host clock, synchronized)"),
    ("peak_mem_bytes", "INTEGER", "peak device memory of one call above its inputs (CUDA only)"),
    ("max_abs_err", "REAL", "max |x - ref64| over output (and gradients), sampled slices"),
    ("rmse", "REAL", "RMS error of the output against float64"),
    ("cosine", "REAL", "lowest cosine similarity with float64 over checked tensors"),
    ("err_ratio", "REAL", "error over the same-dtype unfused reference's error (pass <= tolerance)"),
    ("ref_err", "REAL", "max abs error of the same-dtype unfused reference against float64"),
    ("check_detail", "TEXT", "JSON per tensor (o, dq, dk, dv): max_abs, ratio, ref_max_abs"),
    ("dispatch_status", "TEXT", "probed or unprobed"),
    ("dispatch_kernels", "TEXT", "JSON list of kernel (CUDA) or operator (CPU) names seen, most time first"),
    ("dispatch_families", "TEXT", "JSON list of kernel families seen"),
    ("flops", "REAL", "FLOP model of the timed step (see workloads/cost.py)"),
    ("bytes", "REAL", "HBM byte model of the forward step (NULL for fwd+bwd)"),
    ("device_name", "TEXT", "device model (e.g. NVIDIA H200) or CPU"),
    ("device_index", "INTEGER", "CUDA device index"),
    ("torch_version", "TEXT", "torch version the worker ran"),
    ("cuda_runtime", "TEXT", "CUDA runtime torch was built with (NULL on a CPU build)"),
    ("cudnn_version", "INTEGER", "cuDNN version actually loaded"),
    ("driver_version", "TEXT", "NVIDIA driver (NVML)"),
    ("attnbench_sha", "TEXT", "git revision of attnbench (+dirty when the tree had changes)"),
    ("sm_clock_mhz", "REAL", "SM clock after timing (NVML)"),
    ("mem_clock_mhz", "REAL", "memory clock after timing (NVML)"),
    ("temp_c", "REAL", "GPU temperature after timing (NVML)"),
    ("power_w", "REAL", "board power after timing (NVML)"),
    ("throttle", "TEXT", "clock event reasons after timing (NVML)"),
    ("created_at", "TEXT", "UTC time the row was written"),
]
JSON_COLUMNS = ("samples_us", "phases_s", "check_detail", "dispatch_kernels", "dispatch_families")
COLUMN_NAMES = [c for c, _, _ in ATTEMPT_COLUMNS]

RUN_COLUMNS: list[tuple[str, str, str]] = [
    ("run_id", "TEXT PRIMARY KEY", "one invocation of attnbench run"),
    ("tag", "TEXT", "sweep label"),
    ("grid", "TEXT", "grid name or config path"),
    ("argv", "TEXT", "command line"),
    ("device_name", "TEXT", "device model"),
    ("started_at", "TEXT", "UTC"),
    ("finished_at", "TEXT", "UTC, NULL if interrupted"),
    ("provenance", "TEXT", "JSON: device, driver, CUDA, cuDNN, libraries, git sha, seed, ceilings, event overhead"),
]


def ddl() -> list[str]:
    cols = ",\n  ".join(f"{c} {t}" for c, t, _ in ATTEMPT_COLUMNS)
    runs = ",\n  ".join(f"{c} {t}" for c, t, _ in RUN_COLUMNS)
    return [
        "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)",
        f"CREATE TABLE IF NOT EXISTS runs (\n  {runs}\n)",
        f"CREATE TABLE IF NOT EXISTS attempts (\n  {cols}\n)",
        "CREATE INDEX IF NOT EXISTS attempts_workload ON attempts (workload_key, backend)",
    ]


def markdown() -> str:
    """The schema as the Markdown tables of docs/schema.md."""
    lines = [f"# Store schema (version {SCHEMA_VERSION})", "",
             "Generated from `src/attnbench/store/schema.py`; `attnbench export` writes the `attempts` columns.",
             "", "## attempts", "", "| column | type | meaning |", "| --- | --- | --- |"]
    lines += [f"| `{c}` | {t.split()[0]} | {d} |" for c, t, d in ATTEMPT_COLUMNS]
    lines += ["", "## runs", "", "| column | type | meaning |", "| --- | --- | --- |"]
    lines += [f"| `{c}` | {t.split()[0]} | {d} |" for c, t, d in RUN_COLUMNS]
    return "\n".join(lines) + "\n"
