"""The attempt row (table attempts): every column declared once, in groups; finish() makes the row."""
from __future__ import annotations

import dataclasses

from ..status import Status
from ..workloads.axes import AXES
from .columns import ALL, ATTEMPT, DERIVED, EXECUTOR, ONLY_OK, PLAN, RAN, RUN, TIMED, Column, Table, _c

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
    _c("phases_s", dict, "JSON wall seconds per phase: inputs, prepare, cold_call, check, hard, probe, memory, timing, "
                         "recheck, counters", ATTEMPT, RAN),
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
                             "on fp8 rows contract (fp8-emulated:FACTORx) and fp8 (scheme, rmse, "
                             "emulated_rmse, ratio, slice: measure/fp8_contract.py)", ATTEMPT,
       RAN, ONLY_OK),
    _c("hard_err_ratio", float, "worst error ratio on the hard input distributions the timed calls did not use "
                                "(outliers, large-logits; measure/inputs.py)", ATTEMPT, RAN),
    # issue 40 (the fp8 numerical contract; max_abs_err, rmse and cosine above are the protocol's others)
    _c("rel_l2", float, "relative L2 error of the output against float64, norm(o - ref) / norm(ref), worst checked set "
                        "(NULL in rows stored before it)", ATTEMPT, RAN),
    _c("fp8_ratio", float, "output RMS error over its declared fp8 scheme's emulated error on the same inputs, worst "
                           "slice (measure/fp8_contract.py; INCORRECT beyond its factor); NULL: no fp8 scheme",
       ATTEMPT, RAN),
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
    # issue 42.2: an OK that no dispatch check stands behind is shown marked (analysis/dispatch_checked.py)
    _c("dispatch_checked", bool, "1: the probe ran and the kernels it saw were checked against the families the "
                                 "backend declares on this device; 0: dispatch unchecked (it declares none there, or "
                                 "the probe could not run), shown as name? in tables; NULL: rows before the column",
       ATTEMPT, RAN),
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
# issue 39.4-39.5 (ceilings a row cannot exceed; unrelated concurrent work): measure/peaks.py, measure/concurrency.py
_CEILINGS_CONCURRENCY = [
    _c("sm_clock_max_mhz", float, "highest SM clock read over the timed window (NVML): the clock peak's clock",
       ATTEMPT, TIMED),
    _c("peak_tflops_clock", float, "dense tensor peak of the row's dtype at sm_clock_max_mhz: FLOP per SM per clock x "
                                   "SMs x clock (measure/peaks.py; NULL where the architecture or clock is unknown)",
       DERIVED, TIMED),
    _c("pct_peak_clock", float, "achieved FLOP/s (flops / median) as % of peak_tflops_clock", DERIVED, TIMED),
    _c("pct_read", float, "modelled bytes/s as % of the run's measured read bandwidth (read_gbps), when the bytes "
                          "cannot sit in L2", DERIVED, TIMED),
    _c("gpu_others_before", str, "PIDs of other processes on the attempt's GPU before it (NVML; the run's own "
                                 "supervisor and workers excluded), comma-separated; empty: none", ATTEMPT, RAN),
    _c("gpu_others_after", str, "the same after the attempt", ATTEMPT, RAN),
    _c("gpu_util_before", float, "GPU utilisation % before the attempt (NVML's last sample period)", ATTEMPT, RAN),
    _c("gpu_util_after", float, "GPU utilisation % after the attempt", ATTEMPT, RAN),
    _c("host_load_before", float, "the host's 1-minute load average before the attempt", ATTEMPT, RAN),
    _c("host_load_after", float, "the host's 1-minute load average after the attempt", ATTEMPT, RAN),
    _c("gpu_shared", bool, "1 when another process was on the attempt's GPU before or after it", ATTEMPT, RAN),
    _c("gpu_others_why", str, "why the process columns are empty or uncertain (CPU: no NVML; NVML error; another "
                              "PID namespace)", ATTEMPT, RAN),
]
# issue 41 (the FlashAttention ladder): what a backend chose in its first call (backends/base.py Prepared.config)
_KERNEL_CONFIG = [
    _c("kernel_config", dict, "JSON launch config the backend chose in the first call (the triton ladder: tile "
                              "sizes, warps, stages per kernel, how many candidates were timed; autotuning is "
                              "cold-start cost); NULL for a backend that chooses none", ATTEMPT, RAN),
]
_WRITTEN = [_c("created_at", str, "UTC time the row was written", EXECUTOR, required_by=ALL)]

COLUMNS: tuple[Column, ...] = tuple(_IDENTITY + _WORKLOAD + _OUTCOME + _TIMING + _CORRECTNESS + _DISPATCH
                                    + _MODELS + _PLACE + _TOOLKIT + _CONDITIONS + _CEILINGS_CONCURRENCY
                                    + _KERNEL_CONFIG + _WRITTEN)
NAMES: tuple[str, ...] = tuple(c.name for c in COLUMNS)
BY_NAME = {c.name: c for c in COLUMNS}
JSON_NAMES: tuple[str, ...] = tuple(c.name for c in COLUMNS if c.json)


def names_from(origin: str) -> frozenset[str]:
    """The columns whose values come from one origin (e.g. what a worker's attempt may report)."""
    return frozenset(c.name for c in COLUMNS if c.origin == origin)


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
