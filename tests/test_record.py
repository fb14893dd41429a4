"""The attempt record (attnbench/record/): every measured value reaches the store, nothing else
does, and the schema, the export columns and docs/schema.md follow the record."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from attnbench import record
from attnbench.backends.base import DeviceInfo
from attnbench.backends.registry import load_plugin_file
from attnbench.measure import telemetry
from attnbench.runner import attempt
from attnbench.runner.executors.base import Outcome, Placement
from attnbench.runner.planner import plan
from attnbench.runner.sink import RowSink, make_record
from attnbench.status import ORDER, Status
from attnbench.store import io
from attnbench.store.db import Store
from attnbench.store.schema import COLUMN_NAMES, SCHEMA_VERSION, markdown
from attnbench.workloads import Workload
from conftest import FAKES, rows_of

PREFILL = Workload(mode="prefill", batch=1, q_len=32, kv_len=32, q_heads=2, kv_heads=1, head_dim=16, head_dim_v=16,
                   dtype="fp32")
DECODE = Workload(mode="decode", batch=1, q_len=1, kv_len=64, q_heads=2, kv_heads=1, head_dim=16, head_dim_v=16,
                  dtype="fp32")
FAST = dict(warmup_s=0.0, min_samples=3, max_samples=5, max_time_s=0.05)
NVML = {"sm_clock_mhz": 1980.0, "sm_clock_min_mhz": 1965.0, "sm_clock_max_mhz": 1980.0, "clock_low": False,
        "clock_samples": 4, "mem_clock_mhz": 3201.0, "temp_c": 41.0, "power_w": 312.5, "throttle": "none"}


class FakeTelemetry:
    """What telemetry reports over a GPU's timed window, on any host."""

    def __init__(self, device):
        self.reads = 0

    def read(self):
        self.reads += 1

    def summary(self):
        return dict(NVML, clock_samples=self.reads)
PLACE = Placement("CPU x", None, None)


def fakes():
    return {b.name: b for b in load_plugin_file(FAKES)}


def attempt_of(name: str, w: Workload = PREFILL):
    (a,) = plan([w], [fakes()[name]], DeviceInfo("cpu", "CPU x"), 1, "t", 0)
    return a


def measure(name: str, w: Workload, monkeypatch) -> dict:
    """What a worker reports for one attempt, with NVML readings as a GPU host would give them."""
    monkeypatch.setattr(telemetry, "Telemetry", FakeTelemetry)
    # the dtype's own tolerance: a fixed 3x is bf16's, and float32 on an AVX2-only CPU scored 3.23x on outliers
    spec = {"op": "attempt", "workload": w.to_dict(), "device": "cpu", "seed": 0, "timing": FAST}
    return attempt.run(spec, fakes()[name], attempt.WorkloadCache())


@pytest.mark.parametrize("w", [PREFILL, DECODE], ids=["prefill", "decode"])
def test_an_ok_attempt_measures_exactly_the_declared_attempt_columns(w, monkeypatch):
    """Adding a measured value without a column, or a column nothing measures, fails here."""
    measured = measure("fake-good", w, monkeypatch)
    assert measured["status"] == "OK", measured["reason"]
    assert set(measured) == record.names_from(record.ATTEMPT)


@pytest.mark.parametrize("w", [PREFILL, DECODE], ids=["prefill", "decode"])
def test_every_measured_value_reaches_the_store(w, monkeypatch, tmp_path):
    measured = measure("fake-good", w, monkeypatch)
    store = Store(tmp_path / "s.sqlite")
    RowSink(store, "run", "t", {"torch_version": "2.x"})(Outcome(attempt_of("fake-good", w), dict(measured), 0.5,
                                                                  PLACE))
    (row,) = store.attempts()
    store.close()
    for name, value in measured.items():
        if value is None:
            # OK has no reason; CPU has no allocator statistics or kernel time; GEMMs are no attention family
            assert name in ("reason", "peak_mem_bytes", "rel_err", "dispatch_attention_family", "kernel_us",
                            "kernel_calls_us", "trend",  # trend: too few samples at this budget
                            "kernel_config",  # the fake chooses no launch config
                            "fp8_ratio",  # no fp8 scheme for a 16-bit row (issue 40)
                            # CPU: no NVML, which gpu_others_why says
                            "gpu_others_before", "gpu_others_after", "gpu_util_before", "gpu_util_after",
                            "gpu_shared"), name
            continue
        assert row[name] is not None, f"{name} was measured but not stored"
        assert row[name] == (int(value) if isinstance(value, bool) else value), name
    assert row["median_us"] > 0 and row["p95_us"] >= row["median_us"]


def test_a_value_without_a_column_is_an_error_not_a_silent_drop():
    a = attempt_of("fake-good")
    with pytest.raises(record.RecordError, match="junk"):
        make_record(Outcome(a, {"status": "OK", "samples_us": [1.0], "junk": 1}, 0.5, PLACE), "run", "t", {})
    with pytest.raises(record.RecordError, match="backend"):  # a worker cannot overwrite what the plan says
        make_record(Outcome(a, {"status": "ERROR", "reason": "x", "backend": "other"}, 0.5, PLACE), "run", "t", {})


def test_numbers_only_for_ok_and_derived_statistics():
    a = attempt_of("fake-good")
    ok = record.as_row(make_record(Outcome(a, _ok_measured([3.0, 1.0, 2.0, 10.0]), 0.5, PLACE), "run", "t", {}))
    assert ok["median_us"] == 2.5 and ok["p95_us"] == pytest.approx(record.percentile([1, 2, 3, 10], 0.95))
    assert ok["causal"] is False and ok["attempt_key"] == a.key and ok["tag"] == "t" and ok["wall_s"] == 0.5
    assert ok["flops"] == 2 * 1 * 2 * 32 * 32 * 32 and ok["device_name"] == "CPU x" and ok["decode_append"] is None
    bad = record.as_row(make_record(Outcome(a, {**_ok_measured([1.0, 2.0]), "status": "INCORRECT",
                                                "reason": "x"}, 0.5, PLACE), "run", "t", {}))
    assert bad["samples_us"] is None and bad["median_us"] is None and bad["p95_us"] is None
    assert bad["calls_per_sample"] == 1 and bad["err_ratio"] == 1.0  # what was measured before the verdict stays


def _ok_measured(samples) -> dict:
    return {"status": "OK", "reason": None, "samples_us": samples, "calls_per_sample": 1, "timer": "host_clock",
            "converged": True, "rel_err": 0.01, "warmup_calls": 2, "warmup_us": 5.0, "cold_start_us": 9.0,
            "max_abs_err": 1e-6, "rmse": 1e-7, "cosine": 1.0, "err_ratio": 1.0, "ref_err": 1e-6,
            "check_detail": {}, "dispatch_status": "probed", "phases_s": {"timing": 0.1}}


@pytest.mark.parametrize("values,text", [
    ({"status": "OK"}, "lacks samples_us"),
    ({"status": "SKIPPED"}, "unknown status 'SKIPPED'"),
    ({"status": "CRASH"}, "lacks reason"),
])
def test_a_row_that_lacks_what_its_status_requires_is_refused(values, text):
    a = attempt_of("fake-good")
    with pytest.raises(record.RecordError, match=text):
        make_record(Outcome(a, {"reason": None, **values}, 0.5, PLACE), "run", "t", {})


def test_planned_rows_carry_no_measurement():
    a = attempt_of("fake-good")
    row = record.as_row(make_record(Outcome(a, {"status": "OOM_PREDICTED", "reason": "too big"}, 0.0, PLACE),
                                    "run", "t", {}))
    measured = record.names_from(record.ATTEMPT) - {"status", "reason"}
    assert all(row[n] is None for n in measured)


def test_status_is_the_bottom_layer_and_in_its_documented_order():
    assert ORDER == ["OK", "UNSUPPORTED", "OOM_PREDICTED", "OOM", "INCORRECT", "DISPATCH_MISMATCH", "IMPLAUSIBLE",
                     "TIMEOUT", "CRASH", "ERROR"]
    assert Status("OK") is Status.OK
    assert all(s in record.BY_NAME["status"].required_by for s in Status)


def test_the_store_the_export_and_the_docs_follow_the_record(tmp_path):
    assert COLUMN_NAMES == list(record.NAMES)
    s = Store(tmp_path / "s.sqlite")
    assert [r[1] for r in s.con.execute("PRAGMA table_info(attempts)")] == list(record.NAMES)
    s.close()
    assert io.TABLES["attempts"].columns == list(record.NAMES)
    assert set(io.TABLES["attempts"].json_columns) == {c.name for c in record.COLUMNS if c.json}
    docs = Path(__file__).resolve().parent.parent / "docs" / "schema.md"
    assert docs.read_text() == markdown(), "docs/schema.md is stale: regenerate it from store.schema.markdown()"


def test_every_workload_axis_is_a_required_column():
    """Every axis is a planned column every row holds, except an axis of some modes only (decode_append),
    which rows of the other modes hold as NULL."""
    from attnbench.workloads.axes import AXES

    for a in AXES:
        assert record.BY_NAME[a.name].origin == record.PLAN
        assert (Status.OK in record.BY_NAME[a.name].required_by) == (a.modes is None), a.name
    assert [a.name for a in AXES if a.modes] == ["decode_append"]


@pytest.mark.parametrize("version, added", [
    ("1", ("dispatch_main_family", "dispatch_attention_family", "device_uuid", "late_samples")),
    ("8", ("late_samples",)),
])
def test_an_older_store_gains_the_new_columns_when_opened(tmp_path, version, added):
    """Stores written before schema 2 (or 9) open, keep their rows, and gain the columns added since."""
    from conftest import make_row

    p = tmp_path / f"v{version}.sqlite"
    s = Store(p)
    s.insert(make_row(0))
    s.close()
    con = sqlite3.connect(p)  # make it look like an older store: those columns absent
    con.execute(f"CREATE TABLE old AS SELECT {','.join(c for c in COLUMN_NAMES if c not in added)} FROM attempts")
    con.execute("DROP TABLE attempts")
    con.execute("ALTER TABLE old RENAME TO attempts")
    con.execute("UPDATE meta SET value=? WHERE key='schema_version'", (version,))
    con.commit()
    con.close()
    s = Store(p, create=False)
    assert s.con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    (row,) = s.attempts()
    assert row["attempt_key"] == "key0000" and all(row[c] is None for c in added)
    s.close()


@pytest.mark.slow
def test_a_spawned_sweep_stores_every_measured_column(tmp_path):
    """The same guarantee through the CLI, the worker process and the pipe."""
    from attnbench.cli.main import main

    db = tmp_path / "r.sqlite"
    assert main(["run", "--repeats", "1", "--grid", "smoke", "--where", "mode=prefill", "--where", "causal=false", "--plugin", FAKES,
                 "--backends", "fake-good", "--db", str(db), "--max-time", "0.05"]) == 0
    (row,) = rows_of(db)
    assert row["status"] == "OK"
    on_cpu_absent = {"peak_mem_bytes", "rel_err", "dispatch_attention_family", "kernel_us", "kernel_calls_us",
                     "trend", "kernel_config", "fp8_ratio"} | set(NVML) | {  # the fake chooses no launch config
        "gpu_others_before", "gpu_others_after", "gpu_util_before", "gpu_util_after", "gpu_shared"}  # CPU: no NVML
    for name in record.names_from(record.ATTEMPT) - on_cpu_absent - {"reason"}:
        assert row[name] is not None, name
    assert json.loads(row["phases_s"]).keys() == {"inputs", "prepare", "cold_call", "check", "probe", "memory",
                                                  "timing", "recheck", "hard"}
