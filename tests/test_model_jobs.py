"""Model steps as the runner's second job type: keys as stored rows have them, the plan (baseline
first, refusals planned out), the job types' registry, and model steps through the multi-device
executor's lanes (as attempts go), each device's rows compared against its own baseline."""
from __future__ import annotations

import pytest

from attnbench import record
from attnbench.backends.base import DeviceInfo
from attnbench.backends.registry import builtin
from attnbench.model.configs import get_config
from attnbench.model.steps import StepSpec
from attnbench.runner import jobs
from attnbench.runner.jobs_model import ModelRequest, ModelStep, plan, row_key
from attnbench.status import Status
from test_ray_executor import cluster  # noqa: F401  (the module's local Ray instance, for the Ray test)

BACKENDS = {b.name: b for b in builtin()}


def _req(specs, names=("reference", "sdpa-flash"), device="cpu") -> ModelRequest:
    return ModelRequest(get_config("tiny"), specs, [BACKENDS[n] for n in names], "sdpa-flash", device, "fp32")


def test_row_keys_are_those_of_stored_rows():
    """A row of the committed H200 model run (results/h200/model-llama3.1-8b-2026-11-30.jsonl): its key is
    the one planning makes now, so a resumed run skips it."""
    req = ModelRequest(get_config("llama3.1-8b", 4), [], [], "sdpa-flash", "cuda", "bf16", 0, "default")
    assert row_key(req, "NVIDIA H200", StepSpec("train", 4, 4096, "eager"), "flex") == "bf9a122b2d4faba2"
    assert row_key(req, "NVIDIA H200", StepSpec("train", 4, 4096), "flex", "GPU-1") != "bf9a122b2d4faba2"


def test_the_plan_puts_the_baseline_first_and_plans_refusals_out():
    specs = [StepSpec("prefill", 2, 64), StepSpec("decode", 2, 64, "graph")]
    got = plan(_req(specs), DeviceInfo("cpu", "CPU"))
    assert [(j.spec.launch, j.backend.name) for j in got] == [
        ("eager", "sdpa-flash"), ("eager", "reference"), ("graph", "sdpa-flash"), ("graph", "reference")]
    assert [j.planned for j in got[:2]] == [None, None]
    assert all(j.planned is Status.UNSUPPORTED and "CUDA" in j.reason for j in got[2:])
    assert all(j.baseline_key == got[0].key for j in got[:2]) and got[2].baseline_key == got[2].key
    assert got[0].workload.mode == "prefill" and got[2].workload.launch == "graph"
    assert len({j.key for j in got}) == 4 and all(j.repeat == 0 for j in got)


def test_each_job_type_is_found_by_its_jobs_requests_and_worker_op():
    from attnbench.runner.conduct import RunRequest
    from attnbench.runner.planner import Attempt

    assert jobs.of_request(RunRequest("cpu", [], [])) is jobs.ATTEMPT
    assert jobs.of_request(_req([])) is jobs.MODEL_STEP
    assert jobs.TYPES["model_step"].table is record.MODEL_STEPS and jobs.TYPES["attempt"].table is record.ATTEMPTS
    (job,) = plan(_req([StepSpec("prefill", 1, 16)], names=("sdpa-flash",)), DeviceInfo("cpu", "CPU"))
    assert isinstance(job, ModelStep) and jobs.of_job(job) is jobs.MODEL_STEP
    assert jobs.of_job(Attempt("k", job.workload, job.backend, 0)) is jobs.ATTEMPT

    class Cfg:
        seed, tol, inputs = 3, None, "normal"
        timing = type("T", (), {})()

    msg = jobs.message(job, "cpu", Cfg)
    assert msg["op"] == "model_step" and msg["spec"] == job.spec.to_dict() and msg["seed"] == 3
    assert msg["config"]["name"] == "tiny" and msg["dtype"] == "fp32"


def test_a_stray_value_from_a_worker_is_refused():
    from attnbench.runner.executors.base import Outcome, Placement
    from attnbench.runner.jobs_model import ModelRows

    (job,) = plan(_req([StepSpec("prefill", 1, 16)], names=("sdpa-flash",)), DeviceInfo("cpu", "CPU"))
    sink = type("S", (), {"run_id": "r", "tag": "t", "run_columns": {}, "store": None})()
    with pytest.raises(record.RecordError, match="median_us"):  # derived from the samples, never reported
        ModelRows(_req([]))(Outcome(job, {"status": "OK", "median_us": 1.0}, 0.1, Placement("CPU")), sink)


@pytest.mark.slow
def test_model_steps_run_through_the_multi_device_executor(tmp_path):
    """Replicated over two CPU lanes: every step x backend once per device, under keys that hold the
    device, each device's reference row compared against that device's baseline."""
    from attnbench.measure.timing import TimingConfig
    from attnbench.runner.conduct import conduct
    from attnbench.runner.executors.devices import DeviceSpec
    from attnbench.runner.executors.local import LocalConfig
    from attnbench.runner.executors.multi import MultiExecutor
    from attnbench.store import model_rows
    from attnbench.store.db import Store

    cfg = LocalConfig(ceilings=False, timing=TimingConfig.for_device("cpu", 0.02))
    ex = MultiExecutor(cfg, [DeviceSpec("cpu:0", "cpu", 0), DeviceSpec("cpu:1", "cpu", 1)], replicate=True,
                       pin=False)
    store = Store(tmp_path / "m.sqlite")
    try:
        report = conduct(ex, store, _req([StepSpec("prefill", 1, 16)]))
        rows = model_rows.rows(store.con)
    finally:
        store.close()
    assert report.counts == {"OK": 4} and len(rows) == 4 and len({r["row_key"] for r in rows}) == 4
    assert sorted((r["device_index"], r["backend"]) for r in rows) == [
        (0, "reference"), (0, "sdpa-flash"), (1, "reference"), (1, "sdpa-flash")]
    for d in (0, 1):
        mine = {r["backend"]: r for r in rows if r["device_index"] == d}
        assert mine["reference"]["measured_speedup"] == pytest.approx(
            mine["sdpa-flash"]["median_us"] / mine["reference"]["median_us"])


@pytest.mark.slow
def test_model_steps_run_through_the_ray_executor(cluster, tmp_path):
    """Sharded over two fake CPU devices of a local Ray instance: the keys of a one-device plan, each
    step's rows on one actor, the run's rows as the local executor writes them."""
    from test_ray_executor import CPU2, config

    from attnbench.runner.conduct import conduct
    from attnbench.runner.executors.ray import RayExecutor
    from attnbench.store import model_rows
    from attnbench.store.db import Store

    req = _req([StepSpec("prefill", 1, 16), StepSpec("decode", 1, 16)], device="cpu:0,cpu:1")
    store = Store(tmp_path / "m.sqlite")
    try:
        report = conduct(RayExecutor(config(tmp_path, ceilings=False), CPU2), store, req)
        rows = model_rows.rows(store.con)
    finally:
        store.close()
    one_device = {j.key for j in plan(req, DeviceInfo("cpu", rows[0]["device_name"]))}
    assert report.counts == {"OK": 4} and {r["row_key"] for r in rows} == one_device
    by_step = {}
    for r in rows:
        by_step.setdefault(r["step"], set()).add(r["device_index"])
    assert all(len(v) == 1 for v in by_step.values())  # a step's backends share one actor
    assert all(r["measured_speedup"] for r in rows)  # compared against the baseline's row
