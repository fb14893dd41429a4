"""The model-step row (table model_rows): one per decoder step x backend of `attnbench model`."""
from __future__ import annotations

from ..status import Status
from .columns import ALL, DERIVED, EXECUTOR, ONLY_OK, PLAN, RUN, Column, RecordError, Table, _c

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
