"""The one statistics definition (analysis/stats.py): quantiles, the resampled median, separation
methods, and show's `clear` on the same function."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnbench.analysis import stats
from attnbench.analysis.analyze import analyze
from attnbench.analysis.regress import compare, verdict
from attnbench.analysis.stats import Evidence, separate
from attnbench.analysis.winners import best_per_workload
from attnbench.store.table_import import attempt_row
from table_rows import rows_for


def ev(repeat_medians, samples_per_repeat=5, spread=0.002, tag="t") -> Evidence:
    units = {f"{tag}#{i}": m for i, m in enumerate(repeat_medians)}
    samples = np.concatenate([m * (1 + spread * np.linspace(-1, 1, samples_per_repeat)) for m in repeat_medians])
    return Evidence(float(np.median(repeat_medians)), units, samples, len(repeat_medians))


def frame(rows: list[dict], label: str = "x") -> pd.DataFrame:
    return pd.DataFrame([attempt_row({k: str(v) for k, v in r.items()}, "run", "2026-01-01T00:00:00Z")
                         for r in rows]).assign(label=label)


def test_segment_quantiles_are_numpys_percentiles_per_segment():
    rng = np.random.default_rng(0)
    counts = np.array([1, 5, 0, 12, 2])
    values = rng.random(counts.sum())
    q = stats.segment_quantiles(values, counts, (0.05, 0.5, 0.99))
    start = 0
    for i, n in enumerate(counts):
        seg = values[start:start + n]
        if n:
            assert q[i] == pytest.approx(np.percentile(seg, [5, 50, 99]))
        else:
            assert np.isnan(q[i]).all()
        start += n


@pytest.mark.parametrize("n", [2, 7, 12])
def test_resampled_medians_have_the_distribution_of_explicit_resamples(n):
    a = np.random.default_rng(n).lognormal(0, 0.5, n)
    fast = stats.resampled_medians(a, 100_000, np.random.default_rng(1))
    slow = np.median(np.random.default_rng(2).choice(a, (100_000, n)), axis=1)
    assert np.percentile(fast, [2.5, 50, 97.5]) == pytest.approx(np.percentile(slow, [2.5, 50, 97.5]), rel=0.02)


def test_three_shared_repeats_are_paired_and_a_steady_2x_lead_is_separated():
    s = separate(ev([10, 10.1, 9.9]), ev([20, 20.2, 19.8]))
    assert s.method == stats.PAIRED and s.separated and s.ratio == pytest.approx(2.0) and s.lower > 1.9


def test_one_noisy_repeat_in_three_breaks_the_separation():
    s = separate(ev([10, 30, 10]), ev([20, 20, 20]))
    assert s.method == stats.PAIRED and s.ratio == pytest.approx(2.0) and not s.separated and s.lower < 1


def test_fewer_repeats_fall_back_to_pooled_samples_and_one_sample_per_repeat_to_none():
    s = separate(ev([10, 10]), ev([20, 20]))
    assert s.method == stats.POOLED and s.separated
    s = separate(ev([10, 10], samples_per_repeat=1), ev([20, 20], samples_per_repeat=1))
    assert s.method == stats.NONE and not s.separated and s.lower is None
    s = separate(ev([10, 10, 10], samples_per_repeat=1), ev([20, 20, 20], samples_per_repeat=1))
    assert s.method == stats.PAIRED and s.separated  # three repeats of one median each are enough


def test_a_tie_is_never_separated():
    s = separate(ev([10, 10, 10]), ev([10, 10, 10]))
    assert s.ratio == 1.0 and not s.separated


def test_show_clear_uses_the_shared_separation_and_says_which_method():
    df = frame(rows_for({"w1": {"a": [10, 30, 10], "b": [20, 20, 20]}, "w2": {"a": [10, 10], "b": [20, 20]}}))
    best = best_per_workload(df, []).set_index("q_len")
    assert best.loc[1024, "best"] == "a" and best.loc[1024, "separation"] == stats.PAIRED
    assert not best.loc[1024, "clear"]  # 2x by the medians, but one repeat in three reverses it
    assert best.loc[2048, "separation"] == stats.POOLED and best.loc[2048, "clear"]
    assert best.loc[1024, "p5_us"] <= best.loc[1024, "median_us"] <= best.loc[1024, "p95_us"] <= best.loc[1024, "p99_us"]


times = st.dictionaries(st.sampled_from(["w1", "w2", "w3", "w4"]),
                        st.dictionaries(st.sampled_from(["a", "b", "c"]),
                                        st.lists(st.floats(1.0, 100.0), min_size=1, max_size=3), min_size=1),
                        min_size=1)


@settings(max_examples=15, deadline=None)
@given(times, times)
def test_transfer_cost_is_never_below_one(x, y):
    df = pd.concat([frame(rows_for(x, device="G1"), "x"), frame(rows_for(y, device="G2"), "y")], ignore_index=True)
    result = analyze(df, {"x": [], "y": []})
    for r in result["transfer"]:
        for part in ("all", "separated"):
            s = r[part]
            assert s["compared"] + s["unavailable"] == s["n"]
            if s["compared"]:
                assert s["median"] >= 1.0 - 1e-12 and s["max"] >= s["p95"] >= s["median"]


@settings(max_examples=15, deadline=None)
@given(times)
def test_a_store_against_itself_changes_no_winner_and_regresses_nothing(x):
    one = frame(rows_for(x), "x")
    result = analyze(pd.concat([one, one.assign(label="x2")], ignore_index=True), {"x": [], "x2": []})
    for p in result["pairs"]["rows"]:
        assert p["changed"] == 0 and p["noise_floor"]
    for r in result["transfer"]:
        assert r["all"]["unavailable"] == 0 and r["all"]["max"] == 1.0
    v = verdict(compare(one, one, 1.05))
    assert v["regressed"] == 0 and v["lost"] == 0 and v["same"] == v["compared"] > 0


def test_flat_samples_reads_text_lists_and_missing_cells_of_one_column():
    # a store resumed from a slimmed one holds rows without samples (NULL) beside rows with them;
    # pandas reads NULL as None, or as NaN once the column is aligned with other frames
    col = pd.Series(["[1.0, 2.0]", None, float("nan"), [3.0], "[]"], dtype=object)
    values, counts = stats.flat_samples(col)
    assert values.tolist() == [1.0, 2.0, 3.0] and counts.tolist() == [2, 0, 0, 1, 0]
    values, counts = stats.flat_samples(pd.Series(["[NaN, 4.0]", float("nan"), [5.0]], dtype=object))
    assert np.isnan(values[0]) and values[1:].tolist() == [4.0, 5.0] and counts.tolist() == [2, 0, 1]


def test_winners_of_a_store_whose_older_rows_lost_their_samples_still_come_from_the_medians():
    df = frame(rows_for({"w1": {"a": [10, 10, 10], "b": [20, 20, 20]}, "w2": {"a": [30, 30], "b": [15, 15]}}))
    df.loc[df.q_len == 1024, "samples_us"] = np.nan  # the slimmed part's rows
    best = best_per_workload(df, []).set_index("q_len")
    assert best.loc[1024, "best"] == "a" and best.loc[2048, "best"] == "b"
    assert best.loc[2048, "clear"]
