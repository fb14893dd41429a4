"""The model-step job type's runner side: a request, its jobs (step spec × backend) planned and
keyed, the worker message of one, and how its row is made (the Amdahl comparison included)."""
from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import ClassVar

from .. import record
from ..backends.base import Backend, DeviceInfo
from ..model.configs import ModelConfig
from ..model.steps import StepSpec, attention_workload, validate
from ..status import Status
from ..store import model_rows
from ..store.db import utcnow
from ..workloads import Workload

_MEASURED = record.MODEL_STEPS.names_from(record.STEP)


@dataclass
class ModelRequest:
    """What `attnbench model` asks for (conduct() reads the fields it shares with RunRequest)."""

    op: ClassVar[str] = "model_step"  # its job type (runner/jobs.py)
    config: ModelConfig
    specs: list[StepSpec]
    backends: list[Backend]
    baseline: str
    device: str
    dtype: str
    seed: int = 0
    tag: str = "default"
    kernel_frame: object = None  # attempts of a kernel-level store (DataFrame) or None
    argv: str = "attnbench model"
    retry_failed: bool = False  # TIMEOUT, CRASH and ERROR rows of these steps are run again
    began: float | None = None  # time.monotonic() when the command began

    @property
    def grid(self) -> str:
        return f"model:{self.config.name}"


@dataclass
class ModelStep:
    """One job: a step spec measured with one backend's attention. `workload` is the attention call
    each layer makes (grouping, the executors' release between specs, the capability gate)."""

    key: str
    workload: Workload
    backend: Backend
    spec: StepSpec
    config: ModelConfig
    dtype: str
    baseline_key: str = ""  # the row this one's speedups are against (the same step, the baseline)
    repeat: int = 0  # a model step has no process-level repeats
    planned: Status | None = None  # UNSUPPORTED: written without running
    reason: str | None = None


def row_key(req: ModelRequest, device_name: str, spec: StepSpec, backend: str, device_id: str | None = None) -> str:
    """Identity of a row (unchanged since the first model rows, so stored rows resume); device_id
    (a GPU's identity when every GPU runs the whole plan) makes rows of GPUs of one model distinct."""
    parts = [req.tag, device_name, req.config.name, req.config.layers, req.dtype, spec.to_dict(), backend, req.seed]
    blob = json.dumps(parts + ([device_id] if device_id is not None else []), sort_keys=True)
    return hashlib.sha1(blob.encode()).hexdigest()[:16]


def plan(req: ModelRequest, dev: DeviceInfo, device_id: str | None = None) -> list[ModelStep]:
    """Every spec × backend in spec order, the baseline first in each (the others compare against its
    row); a backend that cannot run the step is planned out UNSUPPORTED with the reason."""
    ordered = sorted(req.backends, key=lambda b: b.name != req.baseline)
    out = []
    for spec in req.specs:
        w = attention_workload(req.config, spec, req.dtype)
        base = row_key(req, dev.name, spec, req.baseline, device_id)
        for b in ordered:
            job = ModelStep(row_key(req, dev.name, spec, b.name, device_id), w, b, spec, req.config, req.dtype, base)
            why = validate(spec) or b.availability() or b.supports(w, dev) or \
                (None if b.offers_attend() else f"{b.name} does not offer attend(): it runs only on prepared inputs")
            if why:
                job.planned, job.reason = Status.UNSUPPORTED, why
            out.append(job)
    return out


def message(job: ModelStep, device: str, cfg) -> dict:
    """The worker message of one job (runner/worker.py runs it through model/step.py); cfg: the
    executor's LocalConfig (seed, tolerance, stopping rule)."""
    return {"op": "model_step", "backend": job.backend.name, "config": dataclasses.asdict(job.config),
            "dtype": job.dtype, "spec": job.spec.to_dict(), "device": device, "seed": cfg.seed, "tol": cfg.tol,
            "timing": dict(cfg.timing.__dict__)}


def planned_columns(job: ModelStep) -> dict:
    """The row values the plan knows: identity, model shape, step."""
    c, spec = job.config, job.spec
    return {"row_key": job.key, "backend": job.backend.name, "family": job.backend.family, "role": job.backend.role,
            "config": c.name, "layers": c.layers, "hidden": c.hidden, "q_heads": c.heads, "kv_heads": c.kv_heads,
            "head_dim": c.head_dim, "intermediate": c.intermediate, "sliding_window": c.sliding_window,
            "dtype": job.dtype, "attention_calls": c.layers, **spec.to_dict(), "tokens": spec.tokens,
            "workload_key": job.workload.key()}


class ModelRows:
    """Makes a job's row as the sink writes it: the Amdahl comparison against the baseline's OK row of
    the same step (this run's, written first, or an earlier run's) and the kernel-level medians."""

    def __init__(self, req: ModelRequest):
        self.req = req
        self.kernels: dict[tuple, dict] = {}  # (workload key, device name) -> backend -> median µs

    def __call__(self, outcome, sink) -> dict:
        stray = set(outcome.measured) - _MEASURED
        if stray:
            raise record.RecordError(f"the model step reported {', '.join(sorted(stray))}, which no model_rows "
                                     f"column of origin 'step' declares (attnbench/record/)")
        job, p = outcome.attempt, outcome.placement
        values = {**planned_columns(job), "run_id": sink.run_id, "tag": sink.tag, **sink.run_columns,
                  "device_name": p.device_name, "device_index": p.device_index, "wall_s": outcome.wall_s,
                  "created_at": utcnow(), **outcome.measured}
        row = record.MODEL_STEPS.finish(values)  # its median derived from the samples, for the comparison
        if row["status"] != Status.OK.value:
            return row
        self._compare(row, job, p.device_name, sink.store)
        return record.MODEL_STEPS.finish(row)  # what the comparison added is declared too

    def _compare(self, values: dict, job: ModelStep, device_name: str, store) -> None:
        from ..model.amdahl import compare, kernel_medians

        if job.key == job.baseline_key:
            base = values
        else:
            found = model_rows.rows(store.con, "WHERE row_key=? AND status='OK'", (job.baseline_key,))
            if not found:
                return
            base = found[0]
        k = (job.workload.key(), device_name)
        if k not in self.kernels:
            self.kernels[k] = kernel_medians(self.req.kernel_frame, job.workload, device_name)
        values.update(compare(values, base, self.kernels[k], job.config.layers))
