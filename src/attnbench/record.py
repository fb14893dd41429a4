"""The attempt record: the one definition of a stored row.

Every column is declared once here: its type, what it means, where its value comes from, and which
statuses carry it. The store's schema, the export columns and docs/schema.md are derived from
COLUMNS; `AttemptRecord.finish()` is the only way a row is made, so a value that no column declares
is an error, not a silent drop, and a number a status must not carry (samples of a failed attempt)
is cleared."""
from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass

from .status import Status
from .workloads.axes import AXES

ALL = frozenset(Status)
RAN = ALL - {Status.OOM_PREDICTED}  # the attempt reached a worker (UNSUPPORTED may come from the library)
ONLY_OK = frozenset({Status.OK})
# reached timing: INCORRECT may be found after it (the KV cache changed), IMPLAUSIBLE is judged on it
TIMED = frozenset({Status.OK, Status.INCORRECT, Status.IMPLAUSIBLE})

# where a value comes from
PLAN = "plan"  # the planner: identity, workload, models
RUN = "run"  # the run: tag, run id, toolkit (copied from provenance so an exported row stands alone)
EXECUTOR = "executor"  # where the attempt ran and how long it took as a whole
ATTEMPT = "attempt"  # measured inside the worker (runner/attempt.py)
DERIVED = "derived"  # computed from other columns when the record is finished

SQL_TYPES = {int: "INTEGER", bool: "INTEGER", float: "REAL", str: "TEXT", list: "TEXT", dict: "TEXT"}


@dataclass(frozen=True)
class Column:
    name: str
    type: type  # int | bool | float | str | list | dict (list and dict are stored as JSON text)
    doc: str
    origin: str
    carried_by: frozenset = ALL  # statuses whose rows may hold a value here (others are cleared)
    required_by: frozenset = frozenset()  # statuses whose rows must hold a value here
    constraint: str = ""  # SQL constraint, e.g. NOT NULL

    @property
    def sql(self) -> str:
        return SQL_TYPES[self.type]

    @property
    def json(self) -> bool:
        return self.type in (list, dict)


def _c(name, type_, doc, origin, carried_by=ALL, required_by=frozenset(), constraint=""):
    return Column(name, type_, doc, origin, frozenset(carried_by), frozenset(required_by), constraint)


_IDENTITY = [
    _c("attempt_key", str, "identity of the attempt: hash of tag, device model, workload, backend, repeat, seed",
       PLAN, required_by=ALL, constraint="NOT NULL UNIQUE"),
    _c("run_id", str, "the invocation that executed the attempt (see runs)", RUN, required_by=ALL,
       constraint="NOT NULL"),
    _c("tag", str, "sweep label; resume continues attempts with the same tag", RUN),
    _c("inputs", str, "input distribution of the first check and the timed calls: normal, outliers or "
                      "large-logits (run --inputs; measure/inputs.py)", RUN),
    _c("backend", str, "backend name (e.g. sdpa-flash)", PLAN, required_by=ALL, constraint="NOT NULL"),
    _c("family", str, "backend library family (reference, sdpa, flex, compile, plugin...)", PLAN),
    _c("backend_version", str, "the backend's library version as its version() reports it (torch's for SDPA, "
                               "flex and compile; e.g. flash-attn-4's, jax's); NULL when not installed", PLAN),
    _c("role", str, "contestant, or accuracy_reference (measured, not a fair latency contest)", PLAN),
    _c("workload_key", str, "hash of every semantic field of the workload", PLAN, required_by=ALL),
]
# One column per workload axis (workloads/axes.py): a new Workload field is a new column; an axis of some
# modes only (decode_append) is NULL in the rows of the others, so no row must hold it.
_WORKLOAD = [_c(a.name, a.type, a.doc, PLAN, required_by=ALL if a.modes is None else frozenset()) for a in AXES] + [
    _c("repeat", int, "process-level repeat index (0-based)", PLAN, required_by=ALL),
]
_OUTCOME = [
    _c("status", str, " ".join(s.value for s in Status), ATTEMPT, required_by=ALL, constraint="NOT NULL"),
    _c("reason", str, "why, for every status but OK", ATTEMPT, carried_by=ALL - ONLY_OK,
       required_by=ALL - ONLY_OK),
]
_TIMING = [
    _c("median_us", float, "median of samples_us (OK rows)", DERIVED, ONLY_OK, ONLY_OK),
    _c("p95_us", float, "95th percentile of samples_us", DERIVED, ONLY_OK, ONLY_OK),
    _c("samples_us", list, "JSON list of raw per-call times in microseconds", ATTEMPT, ONLY_OK, ONLY_OK),
    _c("calls_per_sample", int, "k calls between one pair of events (block timing)", ATTEMPT, TIMED, ONLY_OK),
    _c("timer", str, "cuda_event (eager: k calls from the host, host cost included when it is the slower), "
                     "cuda_graph (replays queued in chunks behind a device-side delay, each sample kept only "
                     "when queued before the device reached it: device time only) or host_clock (CPU)",
       ATTEMPT, TIMED, ONLY_OK),
    _c("late_samples", int, "cuda_graph samples dropped because the device reached their start event before the "
                            "host had queued their end event (the lead delay then doubles); 0 otherwise",
       ATTEMPT, TIMED),
    _c("converged", bool, "1 when the median's 95% half-width reached the target", ATTEMPT, TIMED, ONLY_OK),
    _c("rel_err", float, "95% half-width of the median over the median at stop", ATTEMPT, TIMED),
    _c("warmup_calls", int, "calls in the timed warm-up", ATTEMPT, TIMED, ONLY_OK),
    _c("warmup_us", float, "wall time of the warm-up", ATTEMPT, TIMED, ONLY_OK),
    _c("warmup_settled", bool, "1 when warm-up ended because the per-call time had stopped drifting (0: its "
                               "time cap ended it)", ATTEMPT, TIMED),
    _c("trend", float, "median of the last third of samples minus that of the first third, over the median",
       ATTEMPT, TIMED),
    _c("stationary", bool, "1 when warm-up settled and |trend| is within the threshold (measure/timing.py)",
       ATTEMPT, TIMED),
    _c("kernel_us", float, "device time of one call's kernels on every stream, from the dispatch probes (CUDA): "
                           "the median of kernel_calls_us where present, else the smaller probe's mean",
       ATTEMPT, RAN),
    _c("kernel_calls_us", list, "JSON list of each probed call's device time in µs, the probe before timing "
                                "then the one after (CUDA; none where a kernel could not be told to its call)",
       ATTEMPT, RAN),
    _c("timed_over_kernel", float, "median_us / kernel_us: 1 when the timer sees exactly the kernels' time; "
                                   "above it, launch gaps and host cost", DERIVED, TIMED),
    _c("host_bound", bool, "1 for an eager row whose median is more than HOST_BOUND_RATIO x its kernel time "
                           "(runner/gates.py): the host's Python and launch path, not the kernel, sets it",
       DERIVED, TIMED),
    _c("wall_s", float, "wall seconds of the whole attempt, including the start of a worker started for it alone",
       EXECUTOR, required_by=ALL),
    _c("phases_s", dict, "JSON wall seconds per phase: inputs, prepare, cold_call, check, hard, probe, memory, timing, recheck",
       ATTEMPT, RAN),
    _c("cold_start_us", float, "first call, compilation and autotuning included (host clock, synchronized)",
       ATTEMPT, RAN, ONLY_OK),
    _c("peak_mem_bytes", int, "peak device memory of one call above its inputs (CUDA only)", ATTEMPT, RAN),
]
_CORRECTNESS = [
    _c("max_abs_err", float, "max |x - ref64| over output (and gradients), sampled slices", ATTEMPT, RAN, ONLY_OK),
    _c("rmse", float, "RMS error of the output against float64", ATTEMPT, RAN, ONLY_OK),
    _c("cosine", float, "lowest cosine similarity with float64 over checked tensors", ATTEMPT, RAN, ONLY_OK),
    _c("err_ratio", float, "error over the same-dtype unfused reference's error (pass <= tolerance)", ATTEMPT,
       RAN, ONLY_OK),
    _c("ref_err", float, "max abs error of the same-dtype unfused reference against float64", ATTEMPT, RAN,
       ONLY_OK),
    _c("check_detail", dict, "JSON per tensor (o, dq, dk, dv): max_abs, ratio, ref_max_abs, sys (systematic error "
                             "over the same-dtype reference's RMS error), slope (fitted against float64); "
                             "contract: \"provisional-fp8\" on fp8 rows, not yet contract-checked", ATTEMPT,
       RAN, ONLY_OK),
    _c("hard_err_ratio", float, "worst error ratio on the hard input distributions the timed calls did not use "
                                "(outliers, large-logits; measure/inputs.py)", ATTEMPT, RAN),
]
_DISPATCH = [
    _c("dispatch_status", str, "probed or unprobed", ATTEMPT, RAN, ONLY_OK),
    _c("dispatch_kernels", list, "JSON list of kernel (CUDA) or operator (CPU) names seen, most time first",
       ATTEMPT, RAN),
    _c("dispatch_families", list, "JSON list of kernel families seen", ATTEMPT, RAN),
    _c("dispatch_main_family", str, "the recognised kernel family that took the most device time (CPU: most calls)",
       ATTEMPT, RAN),
    _c("undeclared_share", float, "share of the probed calls' device time (CPU: self time) in recognised kernel "
                                  "families the backend does not declare; NULL when it declares none", ATTEMPT, RAN),
    _c("dispatch_attention_family", str, "the attention kernel family that took the most device time; NULL when "
                                         "no declared attention kernel ran", ATTEMPT, RAN),
]
_MODELS = [
    _c("flops", float, "FLOP model of the timed step (see workloads/cost.py)", PLAN, required_by=ALL),
    _c("bytes", float, "HBM byte model of the forward step (NULL for fwd+bwd)", PLAN),
]
_PLACE = [
    _c("device_name", str, "device model (e.g. NVIDIA H200) or CPU", EXECUTOR, required_by=ALL),
    _c("device_index", int, "CUDA device index as the run saw it (after CUDA_VISIBLE_DEVICES)", EXECUTOR),
    _c("device_uuid", str, "the GPU's UUID (NVML or torch): tells GPUs of one model apart", EXECUTOR),
    _c("host_cores", str, "host cores the attempt's workers were pinned to (e.g. 0-7; NULL: not pinned)", EXECUTOR),
]
_TOOLKIT = [
    _c("torch_version", str, "torch version the worker ran", RUN),
    _c("cuda_runtime", str, "CUDA runtime torch was built with (NULL on a CPU build)", RUN),
    _c("cudnn_version", int, "cuDNN version actually loaded", RUN),
    _c("driver_version", str, "NVIDIA driver (NVML)", RUN),
    _c("attnbench_sha", str, "git revision of attnbench (+dirty when the tree had changes)", RUN),
]
_CONDITIONS = [  # read by NVML from the attempt's own GPU before, between and after the sample batches
    _c("sm_clock_mhz", float, "median SM clock over the timed window (NVML)", ATTEMPT, TIMED),
    _c("sm_clock_min_mhz", float, "lowest SM clock over the timed window", ATTEMPT, TIMED),
    _c("clock_low", bool, "1 when the lowest SM clock was more than 5% below the device's maximum", ATTEMPT,
       TIMED),
    _c("clock_samples", int, "NVML readings over the timed window", ATTEMPT, TIMED),
    _c("mem_clock_mhz", float, "median memory clock over the timed window", ATTEMPT, TIMED),
    _c("temp_c", float, "highest GPU temperature over the timed window", ATTEMPT, TIMED),
    _c("power_w", float, "median board power over the timed window", ATTEMPT, TIMED),
    _c("throttle", str, "every clock event reason seen over the timed window", ATTEMPT, TIMED),
]
_WRITTEN = [_c("created_at", str, "UTC time the row was written", EXECUTOR, required_by=ALL)]

COLUMNS: tuple[Column, ...] = tuple(_IDENTITY + _WORKLOAD + _OUTCOME + _TIMING + _CORRECTNESS + _DISPATCH
                                    + _MODELS + _PLACE + _TOOLKIT + _CONDITIONS + _WRITTEN)
NAMES: tuple[str, ...] = tuple(c.name for c in COLUMNS)
BY_NAME = {c.name: c for c in COLUMNS}
JSON_NAMES: tuple[str, ...] = tuple(c.name for c in COLUMNS if c.json)


def names_from(origin: str) -> frozenset[str]:
    """The columns whose values come from one origin (e.g. what a worker's attempt may report)."""
    return frozenset(c.name for c in COLUMNS if c.origin == origin)


class RecordError(ValueError):
    """A value no column declares, or a row that lacks what its status requires."""


def named_row(values: dict, names, error: type[Exception], unknown_text: str) -> tuple[Status, dict]:
    """The status and the row over `names` of a table's finish(): a name no column declares, or an
    unknown status, raises `error` (`unknown_text` formats the unknown names)."""
    unknown = set(values) - set(names)
    if unknown:
        raise error(unknown_text.format(", ".join(sorted(unknown))))
    try:
        status = Status(values.get("status"))
    except ValueError:
        raise error(f"unknown status {values.get('status')!r}") from None
    return status, {n: values.get(n) for n in names}


def percentile(xs: list[float], q: float) -> float:
    """Linear-interpolation quantile, q in [0, 1]."""
    import numpy as np

    return float(np.percentile(xs, 100 * q))


@dataclass(frozen=True)
class Table:
    """One table of the record family: its columns and how a row of it is finished, the same way for
    every table (a job type's rows, runner/jobs.py)."""

    name: str  # the SQLite table
    key: str  # the column that identifies a row (resume and claims go by it)
    columns: tuple[Column, ...]
    error: type[Exception] = RecordError
    unknown_text: str = "no column for {} (declare it in attnbench/record.py)"
    what: str = "row"  # how an error names a row

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def json_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns if c.json)

    def names_from(self, origin: str) -> frozenset[str]:
        return frozenset(c.name for c in self.columns if c.origin == origin)

    def lacks(self, status: Status, values: dict) -> list[str]:
        """The columns a row of this status must hold and `values` does not (an OK row: samples too)."""
        missing = [c.name for c in self.columns if status in c.required_by and values.get(c.name) is None]
        if status is Status.OK and not values.get("samples_us"):
            missing.insert(0, "samples_us")
        return list(dict.fromkeys(missing))

    def finish(self, values: dict) -> dict:
        """The row as stored, from the values gathered for it: a value no column declares is an error;
        what its status does not carry is cleared (a number is only reported when it is true); median
        and p95 are derived from the samples; a value its status requires and lacks is an error."""
        status, row = named_row(values, self.names, self.error, self.unknown_text)
        for c in self.columns:
            if status not in c.carried_by:
                row[c.name] = None
        samples = row["samples_us"]
        if samples:
            row["median_us"] = statistics.median(samples)
            row["p95_us"] = percentile(samples, 0.95)
        missing = self.lacks(status, row)
        if missing:
            raise self.error(f"{status.value} {self.what} of {row.get('backend')} lacks {', '.join(missing)}")
        return row


ATTEMPTS = Table("attempts", "attempt_key", COLUMNS)

AttemptRecord = dataclasses.make_dataclass(
    "AttemptRecord", [(c.name, c.type, dataclasses.field(default=None, metadata={"column": c})) for c in COLUMNS],
    frozen=True)
AttemptRecord.__module__ = __name__  # picklable by name
AttemptRecord.__doc__ = "One stored row: a field per column of COLUMNS (see docs/schema.md)."


def finish(values: dict) -> "AttemptRecord":
    """The record of one attempt from the values gathered for it (Table.finish). Raises RecordError on
    a value that no column declares, or when the status lacks a value it requires."""
    return AttemptRecord(**ATTEMPTS.finish(values))


def lacks(status: Status, values: dict) -> list[str]:
    """The columns an attempt row of this status must hold and `values` does not (an OK row: samples too)."""
    return ATTEMPTS.lacks(status, values)


def as_row(record) -> dict:
    """The record as a column -> value dict (what the store writes)."""
    return dataclasses.asdict(record)


# ---- the model-step row: one per decoder step x backend of `attnbench model` (table model_rows) ----
STEP = "step"  # measured inside the worker (model/step.py)
NOT_OK = ALL - ONLY_OK
_M = "NOT NULL"
MODEL_STEP_COLUMNS: tuple[Column, ...] = (
    _c("row_key", str, "hash of tag, device model, config, layers, dtype, step, shape, launch, backend, seed", PLAN,
       required_by=ALL, constraint="NOT NULL UNIQUE"),
    _c("run_id", str, "the invocation (see runs: its provenance)", RUN, required_by=ALL, constraint=_M),
    _c("tag", str, "sweep label", RUN),
    _c("backend", str, "backend whose attend() every layer called", PLAN, required_by=ALL, constraint=_M),
    _c("family", str, "backend library family", PLAN),
    _c("role", str, "contestant or accuracy_reference", PLAN),
    _c("config", str, "model config name (attnbench.model.configs)", PLAN, required_by=ALL, constraint=_M),
    _c("layers", int, "decoder layers built", PLAN),
    _c("hidden", int, "model width", PLAN),
    _c("q_heads", int, "query heads", PLAN),
    _c("kv_heads", int, "key/value heads", PLAN),
    _c("head_dim", int, "D", PLAN),
    _c("intermediate", int, "SwiGLU width", PLAN),
    _c("sliding_window", int, "attention window (NULL: none)", PLAN),
    _c("dtype", str, "fp32 | bf16 | fp16", PLAN),
    _c("step", str, "train (fwd + bwd + AdamW) | prefill | decode (one token, cache append included)", PLAN,
       required_by=ALL, constraint=_M),
    _c("launch", str, "eager, or graph (decode under a CUDA graph)", PLAN),
    _c("batch", int, "sequences per step", PLAN),
    _c("seqlen", int, "tokens per sequence (decode: cache length read, the new token included)", PLAN),
    _c("tokens", int, "tokens per step (decode: batch)", PLAN),
    _c("attention_calls", int, "attend() calls per step (= layers)", PLAN),
    _c("workload_key", str, "key of the attention Workload each call is (for the kernel-level lookup)", PLAN),
    _c("status", str, " ".join(s.value for s in Status), STEP, required_by=ALL, constraint=_M),
    _c("reason", str, "why, for every status but OK", STEP, required_by=NOT_OK),
    _c("samples_us", list, "JSON raw per-step times (µs)", STEP, ONLY_OK, ONLY_OK),
    _c("median_us", float, "median step time", DERIVED, ONLY_OK),
    _c("p95_us", float, "95th percentile step time", DERIVED, ONLY_OK),
    _c("calls_per_sample", int, "steps per timed block", STEP, ONLY_OK),
    _c("timer", str, "cuda_event | cuda_graph | host_clock", STEP, ONLY_OK),
    _c("late_samples", int, "cuda_graph samples dropped because the device reached them before the host had "
                            "queued them (measure/timing.py: GraphSampler); NULL in rows written before the column",
       STEP, ONLY_OK),
    _c("converged", bool, "1 when the median's 95% half-width reached the target", STEP, ONLY_OK),
    _c("stationary", bool, "1 when warm-up settled and the samples show no trend", STEP, ONLY_OK),
    _c("tokens_per_s", float, "tokens / median step time", STEP, ONLY_OK),
    _c("cold_start_us", float, "first step, compilation and autotuning included", STEP),
    _c("peak_mem_bytes", int, "peak device memory of one step above what was allocated before it (CUDA)", STEP),
    _c("err_ratio", float, "probe error over the same-dtype reference model's, against float64", STEP),
    _c("max_abs_err", float, "largest probe error against float64", STEP),
    _c("check_detail", dict, "JSON per probe tensor: max_abs, ratio, ref_max_abs", STEP),
    _c("families", list, "JSON kernel families the profiled step ran", STEP),
    _c("attn_families", list, "JSON families counted as attention's (declared, not run by the no-op step)", STEP),
    _c("attn_kernel_us", float, "device time of those families per step (CUDA)", STEP, ONLY_OK),
    _c("step_kernel_us", float, "device time of every kernel per step (CUDA)", STEP, ONLY_OK),
    _c("share_profiler", float, "f by the profiler (model/share.py)", STEP, ONLY_OK),
    _c("share_note", str, "why share_profiler is NULL", STEP),
    _c("noop_us", float, "median of the same step with attention replaced by a no-op", STEP, ONLY_OK),
    _c("share_diff", float, "f by difference: (median_us - noop_us) / median_us, unclamped", STEP, ONLY_OK),
    # the Amdahl comparison (model/amdahl.py), made when the row is written: against the baseline's row
    # of the same step (this run's or a stored one) and the kernel-level store's medians
    _c("baseline", str, "the backend speedups are against", DERIVED, ONLY_OK),
    _c("measured_speedup", float, "baseline's median_us / this row's", DERIVED, ONLY_OK),
    _c("kernel_us", float, "isolated median µs per attention call of this backend (kernel store)", DERIVED, ONLY_OK),
    _c("kernel_baseline_us", float, "the same of the baseline", DERIVED, ONLY_OK),
    _c("kernel_speedup", float, "s = kernel_baseline_us / kernel_us", DERIVED, ONLY_OK),
    _c("f_used", float, "the baseline's share the prediction uses, clamped to [0, 1]", DERIVED, ONLY_OK),
    _c("f_source", str, "profiler or difference", DERIVED, ONLY_OK),
    _c("predicted_speedup", float, "1 / ((1 - f) + f / s)", DERIVED, ONLY_OK),
    _c("gap", float, "measured_speedup / predicted_speedup - 1", DERIVED, ONLY_OK),
    _c("explain", dict, "JSON evidence on the gap (model/amdahl.py) and a one-line why", DERIVED, ONLY_OK),
    _c("device_name", str, "device model", EXECUTOR, required_by=ALL, constraint=_M),
    _c("device_index", int, "CUDA device index", EXECUTOR),
    _c("torch_version", str, "torch version", RUN),
    _c("cuda_runtime", str, "CUDA runtime torch was built with", RUN),
    _c("cudnn_version", int, "cuDNN version loaded", RUN),
    _c("driver_version", str, "NVIDIA driver", RUN),
    _c("attnbench_sha", str, "git revision of attnbench (+dirty)", RUN),
    _c("wall_s", float, "wall seconds of the row's whole measurement, as the executor saw it", EXECUTOR),
    _c("created_at", str, "UTC time the row was written", EXECUTOR, required_by=ALL, constraint=_M),
)


class ModelStepError(RecordError):
    """A value no model_rows column declares, or a model row that lacks what its status requires."""


MODEL_STEPS = Table("model_rows", "row_key", MODEL_STEP_COLUMNS, ModelStepError, "no model_rows column for {}",
                    "model row")
TABLES = {t.name: t for t in (ATTEMPTS, MODEL_STEPS)}
