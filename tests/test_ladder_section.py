"""analyze's ladder section (issue 41; review of the section) on hand-made stores, no Triton needed: each backend's
time is analyze's one definition (the median of its repeat medians, the basis' lines), not its fastest repeat, and
accuracy references never enter what a rung is measured against."""
from __future__ import annotations

from conftest import make_row


def _rows(backend: str, medians: list[float], key: str, role: str = "contestant", **over) -> list[dict]:
    return [make_row(0, attempt_key=f"{backend}-{key}-{i}", backend=backend, role=role, repeat=i, samples_us=[m] * 12,
                     median_us=m, p95_us=m, **over) for i, m in enumerate(medians)]


def _ladder(tmp_path, rows, counted: int = 0):
    from attnbench.analysis.analyze import compute
    from attnbench.measure import counters
    from attnbench.store import counters as store_counters
    from attnbench.store.db import Store
    from attnbench.store.sources import load

    s = Store(tmp_path / "s.sqlite")
    s.start_run("run-a", "default", "g", "attnbench run", "CPU test", {"ceilings": {}})
    s.insert_many(rows)
    for row in rows[:counted]:  # counters (the fake collector's: 4 MB read, 1 MB written per call) on the first rows
        got = counters.collect({"workload": {}}, "standard", counters.FAKES["fake"])
        store_counters.insert(s.con, store_counters.row_of(row, got, "run"))
    s.finish_run("run-a")
    s.close()
    data = load([str(tmp_path / "s.sqlite")])
    return {r.rung: r for r in compute(data.attempts, data.runs, paths=data.paths).ladder.rungs}


def test_a_rung_is_timed_by_the_median_of_its_repeat_medians(tmp_path):
    """triton-fa2's repeats took 10, 20 and 21 us, sdpa-cudnn's 15 each: the rung's time is 20 (as analyze's
    winners say), so it reaches 0.75 of cuDNN, not the 1.5 its one fast repeat gave."""
    got = _ladder(tmp_path, _rows("triton-fa2", [10.0, 20.0, 21.0], "p", kernel_config={"BLOCK_M": 64})
                  + _rows("sdpa-cudnn", [15.0, 15.0, 15.0], "p") + _rows("sdpa-flash", [30.0, 30.0, 30.0], "p"),
                  counted=2)
    r = got["triton-fa2"]
    assert r.against == "sdpa-cudnn" and r.ratio == 0.75 and r.target == 0.70 and r.met is True  # 0.75 >= 0.70
    flops = make_row(0)["flops"]
    assert r.value == round(flops / 20.0 / 1e6, 1) and r.sdpa_flash == round(flops / 30.0 / 1e6, 1)
    assert "BLOCK_M" in r.kernel_config and r.dram_gb == 0.005 and r.tensor_pct == 63.0  # the counted repeats


def test_an_accuracy_reference_is_not_what_a_decode_rung_is_measured_against(tmp_path):
    dec = dict(mode="decode", q_len=1, workload_key="decode-key")
    got = _ladder(tmp_path, _rows("triton-decode", [10.0], "d", **dec) + _rows("sdpa-flash", [12.0], "d", **dec)
                  + _rows("math-ref", [5.0], "d", role="accuracy_reference", **dec))
    r = got["triton-decode"]
    assert r.metric == "GB/s" and r.against == "sdpa-flash" and r.ratio == 1.2 and r.met is True
