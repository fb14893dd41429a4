"""scripts/sweep_parts.py: what the attempts left of a sweep in parts would add, from repeat 0's rows."""
import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "sweep_parts.py"


@pytest.fixture(scope="module")
def parts():
    spec = importlib.util.spec_from_file_location("sweep_parts", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def attempt(backend, wk, mode, repeat):
    return SimpleNamespace(backend=SimpleNamespace(name=backend), repeat=repeat,
                           workload=SimpleNamespace(key=lambda: wk, mode=mode))


def row(backend, wk, mode, repeat, wall, samples, calls, cold, phases_as_text=True):
    phases = {"timing": 1.0} | ({} if cold is None else {"cold_call": cold})
    return {"backend": backend, "workload_key": wk, "mode": mode, "repeat": repeat, "wall_s": wall,
            "samples_us": json.dumps(samples) if samples is not None else None, "calls_per_sample": calls,
            "phases_s": json.dumps(phases) if phases_as_text else phases}


def test_each_attempt_left_costs_its_repeat0_row_else_its_backend_and_modes_mean(parts):
    ok = pd.DataFrame([
        row("a", "w1", "prefill", 0, 4.0, [100_000.0, 100_000.0], 2, 1.5),  # timed 0.4 s
        row("a", "w2", "prefill", 0, 2.0, [50_000.0], 1, 0.5, phases_as_text=False),  # timed 0.05 s
        row("a", "w1", "prefill", 1, 99.0, [9e9], 1, 99.0),  # a later repeat's row is no yardstick
        row("a", "w3", "prefill", 0, 50.0, None, None, 40.0),  # samples slimmed away: no yardstick
        row("b", "w1", "decode", 0, 1.0, [10_000.0] * 3, None, None),  # calls unknown: 1; no first call
    ])
    todo = [attempt("a", "w1", "prefill", 1), attempt("a", "w1", "prefill", 2),  # its own repeat-0 row
            attempt("a", "w9", "prefill", 1),  # no row of its own: the mean of a's prefill rows
            attempt("b", "w1", "decode", 2),
            attempt("c", "w1", "prefill", 0)]  # nothing to go by
    c = parts.remaining_cost(ok, todo)
    assert c["unmatched"] == 1
    assert c["wall_s"] == pytest.approx(4.0 * 2 + 3.0 + 1.0)
    assert c["timed"] == pytest.approx(0.4 * 2 + 0.225 + 0.03)
    assert c["first_call"] == pytest.approx(1.5 * 2 + 1.0 + 0.0)
