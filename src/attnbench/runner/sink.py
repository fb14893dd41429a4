"""The row sink: turns each outcome into its job's one row (an attempt's record here; a model step's,
runner/jobs_model.py), writes it to the store in its own transaction, and tells the observers (a
progress bar) what was written."""
from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from .. import record
from ..store import counters as store_counters
from ..store.db import Store, utcnow
from ..workloads.cost import flops, io_bytes
from . import counters_phase, gates
from .planner import Attempt

if TYPE_CHECKING:  # executors import the job types, which make rows here
    from .executors.base import Outcome

_MEASURED = record.names_from(record.ATTEMPT)


def new_run_id() -> str:
    return utcnow().replace(":", "").replace("-", "") + "-" + uuid.uuid4().hex[:6]


def toolkit_columns(prov: dict) -> dict:
    """The software a row ran under, copied from the run's provenance so an exported row stands alone."""
    sha = prov.get("git_sha")
    return {"torch_version": prov.get("torch"), "cuda_runtime": prov.get("cuda_runtime"),
            "cudnn_version": prov.get("cudnn"), "driver_version": (prov.get("device") or {}).get("driver"),
            "attnbench_sha": (sha + ("+dirty" if prov.get("git_dirty") else "")) if sha else None}


def planned_columns(a: Attempt) -> dict:
    """The record values the planner knows: identity, workload, models."""
    w = a.workload
    return {"attempt_key": a.key, "backend": a.backend.name, "family": a.backend.family, "role": a.backend.role,
            "backend_version": a.backend.recorded_version(),
            "workload_key": w.key(), **w.to_dict(), "repeat": a.repeat,
            "flops": float(flops(w)), "bytes": io_bytes(w)}


def make_record(outcome: Outcome, run_id: str, tag: str, run_columns: dict, ceilings: dict | None = None,
                l2_bytes: int | None = None, device_type: str = "cpu"):
    """The attempt's record, judged by the plausibility gates (runner/gates.py) against the run's
    measured ceilings. A measured value that is not a column of origin "attempt" is an error
    (record.RecordError): nothing measured is silently dropped, nothing planned is overwritten."""
    measured, _ = counters_phase.split(outcome.measured)  # issue 39: the counters are a row of their own
    stray = set(measured) - _MEASURED
    if stray:
        raise record.RecordError(f"the attempt reported {', '.join(sorted(stray))}, which no column of origin "
                                 f"'attempt' declares (attnbench/record/)")
    values = {**planned_columns(outcome.attempt), "run_id": run_id, "tag": tag, **run_columns,
              **outcome.placement.to_record(), "wall_s": outcome.wall_s, "created_at": utcnow(), **measured}
    return record.finish(gates.judge(values, ceilings or {}, l2_bytes, device_type))


def attempt_row(outcome: Outcome, sink: "RowSink") -> dict:
    """An attempt's row, judged against the ceilings of the GPU model it ran on (the run's, or under
    a run over several models, that model's)."""
    m = sink.models.get(outcome.placement.device_name)
    ceilings, l2, kind = ((m.get("ceilings") or {}, m.get("l2_bytes"), m.get("type") or sink.device_type) if m
                          else (sink.ceilings, sink.l2_bytes, sink.device_type))
    return record.as_row(make_record(outcome, sink.run_id, sink.tag, sink.run_columns, ceilings, l2, kind))


@dataclass
class RowSink:
    """Callable as an executor's sink."""

    store: Store
    run_id: str
    tag: str
    run_columns: dict  # the run's values every row carries: toolkit (toolkit_columns), input distribution
    ceilings: dict = field(default_factory=dict)  # the run's measured ceilings (provenance)
    l2_bytes: int | None = None  # the device's L2 size, when known
    device_type: str = "cpu"
    observers: list[Callable] = field(default_factory=list)  # each called with the written row (a dict)
    store_s: float = 0.0  # seconds spent writing
    # a run over several GPU models (runner/ray_exec.py): device name -> {"ceilings", "l2_bytes",
    # "type"} of that model, used for the rows placed on it instead of the run's
    models: dict = field(default_factory=dict)
    # the job type's (runner/jobs.py): make_row(outcome, sink) -> the finished row; insert(store, row) -> bool
    make_row: Callable[[Outcome, "RowSink"], dict] = attempt_row
    insert: Callable[[Store, dict], bool] = Store.insert

    def __call__(self, outcome: Outcome) -> None:
        row = self.make_row(outcome, self)
        t0 = time.perf_counter()
        written = self.insert(self.store, row)
        self.store_s += time.perf_counter() - t0
        if not written:  # another run sharing the store wrote this row first: not ours to count
            return
        _, collected = counters_phase.split(outcome.measured)
        if collected is not None and row.get("status") == "OK":  # issue 39: run --counters
            store_counters.insert(self.store.con, store_counters.row_of(row, collected, "run"))
        for observe in self.observers:
            observe(row)
