"""The store's schema: one table of attempts (one row each), one of runs, versioned; the model_rows
table (store/model_rows.py) is made by the first model run and described here too."""
from __future__ import annotations

from ..record import COLUMNS, COUNTERS, JSON_NAMES, MODEL_STEPS, NAMES, SELFTESTS, Status
from ..workloads.axes import AXES
from .samples import SAMPLES_DDL

# 1: the first schema. 2: dispatch_main_family, dispatch_attention_family, device_uuid.
# 3: kernel_us, timed_over_kernel, host_bound, warm-up and sample stationarity, clocks over the
# timed window. An older store gains the new columns when it is opened: every change so far only
# adds columns. 4: host_cores (the cores a multi-device run pinned the attempt's workers to),
# backend_version, inputs (the input distribution), hard_err_ratio, undeclared_share.
# 5: the workload axis window (sliding window). A workload axis added later is a migration, not a
# refusal: an older store's rows hold the axis' default (BACKFILL), written into the new column when
# the store is opened for writing, and read as it from a read-only store or an older export.
# 6: the workload axis lengths (packed variable-length batches; older rows: fixed).
# 7: the workload axis page_size (a paged decode KV cache; older rows: 0, a contiguous cache).
# 8: the workload axis decode_append (the K/V append inside a decode's timed step). Its column is as old
# as the store and older rows already hold its values ('excluded' in decode rows, NULL in others): the
# migration adds nothing; the version keeps an older attnbench from reading 'included' rows as the
# decode it knows.
# 9: late_samples (graph samples queued in chunks, those the host was late for dropped and counted).
# 10: kernel_calls_us (each probed call's device time, beside kernel_us, the smaller probe's mean).
# Later, in the same version (no column changed): kernel_us is the median of kernel_calls_us where a row
# has them, the smaller probe's mean where it has none. Rows of runs at git_sha 2c79b72 or before hold the
# smaller mean beside their kernel_calls_us (the median of those is the later figure).
# 11: the samples table (store/samples.py): each row's raw samples as float64 bytes with their count and
# p5/p50/p95/p99, written at insert, so analysis reads neither the JSON text nor sorts a row; an older store's
# is filled from samples_us when it is opened for writing, one opened read-only is read as before.
SCHEMA_VERSION = 11

# (column, SQLite type, meaning). This list is the export schema too; docs/schema.md is made from it.
# (column, SQL type and constraint, meaning), derived from the attempt record (attnbench/record/):
# the store's table, the export columns and docs/schema.md all follow it.
ATTEMPT_COLUMNS: list[tuple[str, str, str]] = [(c.name, f"{c.sql} {c.constraint}".strip(), c.doc) for c in COLUMNS]
JSON_COLUMNS = JSON_NAMES
# column -> the value of every row written before its axis existed (the axis' default: workloads
# at that default keep their workload_key, see Workload.key). An axis of some modes only has no one
# value for older rows (NULL outside its modes); decode_append, the only one, had its column before.
BACKFILL: dict[str, object] = {a.name: a.default for a in AXES if a.since is not None and a.modes is None}
COLUMN_NAMES = list(NAMES)

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


# Which run is measuring which attempt right now, so two runs sharing a store never measure one
# attempt twice; a claim lives from just before the attempt runs until its row is written.
CLAIMS_DDL = ("CREATE TABLE IF NOT EXISTS claims (attempt_key TEXT PRIMARY KEY, run_id TEXT NOT NULL, "
              "host TEXT, pid INTEGER, claimed_at TEXT)")


def ddl() -> list[str]:
    cols = ",\n  ".join(f"{c} {t}" for c, t, _ in ATTEMPT_COLUMNS)
    runs = ",\n  ".join(f"{c} {t}" for c, t, _ in RUN_COLUMNS)
    return [
        "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)",
        f"CREATE TABLE IF NOT EXISTS runs (\n  {runs}\n)",
        f"CREATE TABLE IF NOT EXISTS attempts (\n  {cols}\n)",
        "CREATE INDEX IF NOT EXISTS attempts_workload ON attempts (workload_key, backend)",
        CLAIMS_DDL,
        SAMPLES_DDL,
    ]


def _statuses(c) -> str:
    if c.carried_by == frozenset(Status) and c.required_by in (frozenset(), frozenset(Status)):
        return "**all**" if c.required_by else "all"
    if c.carried_by == c.required_by == frozenset(Status) - {Status.OK}:
        return "**all but OK**"
    if c.carried_by == frozenset(Status) - {Status.OOM_PREDICTED}:
        must = ", ".join(f"**{s.value}**" for s in Status if s in c.required_by)
        return "all but OOM_PREDICTED" + (f" ({must} must)" if must else "")
    return ", ".join(f"**{s.value}**" if s in c.required_by else s.value for s in Status if s in c.carried_by)


def _table(columns, origin: bool = False, statuses: bool = False) -> list[str]:
    """A Markdown table of record columns: name, type, meaning, and where asked, `from` and the statuses."""
    heads = ["column", "type", "meaning"] + ["from"] * origin + ["statuses"] * statuses
    out = ["| " + " | ".join(heads) + " |", "| " + " | ".join("---" for _ in heads) + " |"]
    for c in columns:
        cells = [f"`{c.name}`", c.sql, c.doc] + [c.origin] * origin + [_statuses(c)] * statuses
        out.append("| " + " | ".join(cells) + " |")
    return out


def _section(table, intro: str, origin: bool = False, statuses: bool = False) -> list[str]:
    return ["", f"## {table.name}", "", intro, "", *_table(table.columns, origin, statuses)]


def markdown() -> str:
    """The schema as the Markdown tables of docs/schema.md."""
    lines = [f"# Store schema (version {SCHEMA_VERSION})", "",
             "Generated from the attempt record, `src/attnbench/record/` by `attnbench.store.schema.markdown()`; "
             "`attnbench export` writes the `attempts` columns.", "",
             "`from` says where a value comes from: the planner (`plan`), the run (`run`: copied from its "
             "provenance), the executor that ran the attempt, the attempt inside its worker, or `derived` "
             "from other columns. `statuses` lists the statuses whose rows may hold a value (others leave it "
             "NULL); **bold** ones must.", "",
             "## attempts", ""]
    lines += _table(COLUMNS, origin=True, statuses=True)
    lines += ["", "## runs", "", "| column | type | meaning |", "| --- | --- | --- |"]
    lines += [f"| `{c}` | {t.split()[0]} | {d} |" for c, t, d in RUN_COLUMNS]
    lines += _section(MODEL_STEPS, "One row per decoder step × backend of `attnbench model` (a model step, the second "
                      "job type; `from`: `step` is measured inside the worker, model/step.py); `attnbench export --table "
                      f"{MODEL_STEPS.name}` writes these columns.", origin=True, statuses=True)
    lines += _section(COUNTERS, "One row per OK attempt whose step was replayed under a collector (`run --counters`, "  # issue 39
                      "`attnbench explain`; docs/method/counters.md), keyed by `attempt_key`; `from`: `counters` is read "
                      "by the collector, `derived` from it and the attempt's row; a row with a `note` holds no number. "
                      f"`attnbench export --table {COUNTERS.name}` writes these columns.", origin=True)
    lines += _section(SELFTESTS, "One row per `attnbench selftest --db STORE` (made by its first one; docs/usage.md), "  # issue 42.1
                      "keyed by `selftest_id`: the verdict of each class of misbehaving kernel on one device. The "
                      "report's methodology page shows the last one per device.")
    lines += ["", "## samples", "", "Each attempt row's `samples_us` as numbers, written with the row (schema 11; an older "
              "store's filled when it is opened for writing): `attempt_key`, `n` (how many), `q05`, `q50`, `q95`, "
              "`q99` (their quantiles, linear interpolation) and `data` (the samples as little-endian float64 bytes). "
              "Analysis reads these instead of the JSON text; `samples_us` stays the record that exports carry."]
    return "\n".join(lines) + "\n"

