"""Issue 43 (3, 4): raw samples read as numbers once per store, with the same figures as the JSON text gave; the
report's portability page compares the sides of --by (several GPUs in one store). The speed and memory
targets are measured by lab/bench_analysis_scale.py on real stores, not here."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from attnbench.analysis import analyze, stats
from attnbench.analysis.frames import evidence, per_backend
from attnbench.store import sources
from attnbench.store.db import Store
from attnbench.store.samples import FRAME_COLUMNS, parse_lists
from conftest import make_row


def test_samples_parse_to_exactly_what_json_reads():
    rng = np.random.default_rng(4)
    values = np.concatenate([rng.lognormal(3, 2, 3000), [1e-05, 1.5e20, 0.1, 2.0, 123456789.123456789, 5e-324]])
    texts = [json.dumps(list(values[i:i + 7])) for i in range(0, len(values), 7)]
    texts += ["[]", None, "[1.0,2.5]", " [ 3.25 ,4.0 ] "]
    got = parse_lists(texts)
    for t, g in zip(texts, got):
        if t is None:
            assert g is None
        else:
            want = json.loads(t)
            assert g.dtype == np.float64 and g.tolist() == want  # bit for bit: == on every float
    # what the fast reader cannot take (JSON's NaN and Infinity) is read by json.loads, the same numbers
    odd = parse_lists(["[NaN, 1.0]", "[Infinity, -Infinity]", "[2.0]"])
    assert np.isnan(odd[0][0]) and odd[0][1] == 1.0 and odd[1].tolist() == [np.inf, -np.inf] and odd[2].tolist() == [2.0]
    # more rows than one chunk
    many = parse_lists(["[1.5, 2.5]"] * 5000)
    assert len(many) == 5000 and all(a.tolist() == [1.5, 2.5] for a in many)


def test_row_quantiles_are_segment_quantiles():
    rng = np.random.default_rng(1)
    arrays = [rng.normal(10, 1, n) for n in (1, 2, 5, 0, 1300, 17)]
    arrays[4][[3, 9]] = np.nan
    counts = np.array([a.size for a in arrays])
    qs = (0.05, 0.5, 0.95, 0.99)
    want = stats.segment_quantiles(np.concatenate(arrays), counts, qs)
    got = stats.row_quantiles(arrays, qs)
    assert np.array_equal(got, want, equal_nan=True)


def rows(n_workloads: int = 4, repeats: int = 3, device: str = "CPU test", prefix: str = "k") -> list[dict]:
    out = []
    for w in range(n_workloads):
        for b, scale in (("be0", 1.0), ("be1", 1.3 if w % 2 else 0.8)):
            for r in range(repeats):
                base = make_row(w, backend=b, repeat=r, device_name=device, attempt_key=f"{prefix}{w}-{b}-{r}")
                s = [scale * (10.0 + 0.37 * j + w) * (1 + 0.01 * r) for j in range(40 + 7 * r)]
                base.update(samples_us=s, median_us=float(np.median(s)), p95_us=float(np.percentile(s, 95)))
                out.append(base)
    return out


def store_of(path, rs) -> str:
    s = Store(path)
    s.start_run("run-a", "default", "t", "t", "CPU test", {})
    s.insert_many(rs)
    s.close()
    return str(path)


def test_a_read_store_holds_samples_as_numbers_not_their_text(tmp_path):
    path = store_of(tmp_path / "a.sqlite", rows())
    df = sources.load([path]).attempts
    ok = df[df["status"] == "OK"]
    assert all(np.asarray(v).dtype == np.float64 for v in ok["samples_us"])  # was JSON text
    text = Store(path, create=False, readonly=True).dataframe()
    assert [np.asarray(a).tolist() for a in ok["samples_us"]] == [json.loads(t) for t in text.loc[ok.index, "samples_us"]]


@pytest.mark.parametrize("repeats", [3, 1])  # paired-repeats, and the pooled-samples bootstrap
def test_analysis_of_the_read_store_equals_that_of_its_json_text(tmp_path, repeats):
    path = store_of(tmp_path / "a.sqlite", rows(repeats=repeats))
    data = sources.load([path])
    text = data.attempts.assign(samples_us=Store(path, create=False, readonly=True).dataframe()["samples_us"])
    text = text.drop(columns=list(FRAME_COLUMNS))  # the figures the store computed at insert: here from the text
    assert isinstance(text["samples_us"].iloc[0], str)
    fast = analyze.analyze(data.attempts, data.runs)
    slow = analyze.analyze(text, data.runs)
    assert json.dumps(fast, sort_keys=True, default=str) == json.dumps(slow, sort_keys=True, default=str)
    methods = {r["separation"] for r in fast["winners"]["rows"]}
    assert methods == {"paired-repeats" if repeats == 3 else "pooled-samples"}


def test_a_lines_pooled_samples_are_its_rows_arrays_joined_only_when_read(tmp_path):
    data = sources.load([store_of(tmp_path / "a.sqlite", rows(n_workloads=1))])
    df = data.attempts
    lines = per_backend(df).set_index("backend")
    pooled = lines.loc["be0", "samples"]
    mine = df[(df["backend"] == "be0") & (df["status"] == "OK")]["samples_us"].tolist()
    assert all(p is a for p, a in zip(pooled.parts, mine))  # no copy per line
    assert np.asarray(pooled).tolist() == [x for a in mine for x in a.tolist()]  # repeats pooled in row order
    assert len(pooled) == lines.loc["be0", "n_samples"] == sum(a.size for a in mine)
    ev = evidence(lines.loc["be0"].to_dict() | {"samples": pooled})
    plain = stats.Evidence(ev.time, ev.units, np.asarray(pooled), ev.repeats)
    other = evidence(lines.loc["be1"].to_dict())
    assert stats.pooled_lower_bound(ev.samples, other.samples) == stats.pooled_lower_bound(plain.samples, other.samples)


def mixed_store(tmp_path) -> str:
    """One store holding two GPU models' rows of the same workloads; be0 is 1.6x slower on GPU-B, so the winner
    changes on the workloads be0 won on GPU-A."""
    return store_of(tmp_path / "mixed.sqlite", rows(device="GPU-A", prefix="a") + [
        {**r, "median_us": r["median_us"] * f, "samples_us": [x * f for x in r["samples_us"]]}
        for r in rows(device="GPU-B", prefix="b") for f in [1.6 if r["backend"] == "be0" else 1.0]])


def test_the_portability_page_compares_the_sides_of_by(tmp_path):
    pytest.importorskip("matplotlib")
    from attnbench.analysis.analyze import of
    from attnbench.cli.main import build_parser
    from attnbench.report.html.context import Context
    from attnbench.report.html.data import SiteData
    from attnbench.report.html.figure_files import FigureFiles
    from attnbench.report.html.pages import portability

    data = sources.load([mixed_store(tmp_path)])
    args = build_parser().parse_args(["report", "x.sqlite", "--out", "site", "--by", "device_name"])
    assert args.by == "device_name"  # was: unrecognized arguments

    def page(by_analysis) -> str:
        (tmp_path / "figs").mkdir(exist_ok=True)
        site = SiteData(data, of(data), "be0", by_analysis)
        return portability.body(Context(site, FigureFiles(tmp_path / "figs", [])))

    assert "Only one store was given (mixed, GPU-A, GPU-B)" in page(None)  # by store: nothing to compare
    by_device = page(of(data, by="device_name"))
    assert "Only one store was given" not in by_device
    assert "2 device models (--by device_name): GPU-A, GPU-B" in by_device
    assert "Winner changes per pair of device models and mode" in by_device
    assert "Transfer cost per ordered pair of device models and mode" in by_device
    assert by_device.count("GPU-A / GPU-B") == 2  # be0 won workloads 0 and 2 on GPU-A, be1 wins them on GPU-B


def test_report_by_device_name_end_to_end(tmp_path):
    """The command as a user runs it (full tier: the site's every page and figure is drawn)."""
    pytest.importorskip("matplotlib")
    from attnbench.cli.main import main

    path = mixed_store(tmp_path)
    assert main(["report", path, "--by", "device_name", "--out", str(tmp_path / "site")]) == 0
    page = (tmp_path / "site" / "portability.html").read_text()
    assert "2 device models (--by device_name): GPU-A, GPU-B" in page and "GPU-A / GPU-B" in page
    (changes,) = (tmp_path / "site" / "figures").glob("*winner-changes.csv")
    assert "GPU-A vs GPU-B" in pd.read_csv(changes)["pair"].tolist()
    assert "Slice: store mixed, GPU-A" in (tmp_path / "site" / "prefill.html").read_text()  # other pages: per store


def test_text_that_is_not_a_flat_list_of_numbers_is_read_as_json_reads_it():
    assert [a.tolist() for a in parse_lists(["[1.0, 2.0]", "[3.0]"])] == [[1.0, 2.0], [3.0]]
    with pytest.raises(ValueError):  # a nested list is not samples: json's reading, then numpy's refusal
        parse_lists(["[[1.0, 2.0], [3.0, 4.5]]", "[1.0]"])
    assert parse_lists([b"[2.5, 1e3]"])[0].tolist() == [2.5, 1000.0]
