"""Issue 43 (3): the samples table of schema 11 (store/samples.py): each row's raw samples as float64 bytes and its
count and quantiles, written at insert; an older store migrated when opened for writing, read as before when
opened read-only; exports unchanged."""
from __future__ import annotations

import json
import re
import sqlite3

import numpy as np
import pytest

from attnbench.analysis import analyze
from attnbench.record import Status, lacks
from attnbench.store import samples, sources
from attnbench.store.db import Store
from attnbench.store.io import export, import_rows, read_rows
from attnbench.store.schema import SCHEMA_VERSION
from test_scale import rows, store_of

ODD = [5e-324, 1.5e20, 0.1, 2.0, 123456789.123456789, 1e-05, 0.30000000000000004, 7.0]


def table(path) -> dict:
    con = sqlite3.connect(path)
    out = {k: (n, q, samples.from_bytes(d)) for k, n, *q, d in con.execute(
        f"SELECT attempt_key, {', '.join(samples.SUMMARY)}, data FROM samples")}
    con.close()
    return out


def analysis(paths) -> str:
    data = sources.load([str(p) for p in paths])
    a = analyze.analyze(data.attempts, data.runs)
    return json.dumps(a, sort_keys=True, default=str)


def old(path) -> None:
    """The store as schema 10 wrote it: the same rows, no samples table."""
    con = sqlite3.connect(path)
    con.execute("DROP TABLE samples")
    con.execute("UPDATE meta SET value = '10' WHERE key = 'schema_version'")
    con.commit()
    con.close()


def test_each_rows_samples_are_stored_as_its_floats_bit_for_bit(tmp_path):
    rs = rows(n_workloads=2)
    rs[0]["samples_us"] = ODD
    rs[1]["samples_us"] = json.dumps(ODD[::-1])  # as an import hands them: JSON text
    path = store_of(tmp_path / "a.sqlite", rs)
    stored = table(path)
    assert set(stored) == {r["attempt_key"] for r in rs}
    for r in rs:
        want = np.asarray(json.loads(r["samples_us"]) if isinstance(r["samples_us"], str) else r["samples_us"])
        n, q, got = stored[r["attempt_key"]]
        assert n == want.size and got.dtype == np.float64
        assert np.array_equal(got.view(np.int64), want.view(np.int64))  # the same bits, not merely close
        assert q == samples.row_quantiles([want])[0].tolist()
    # the frame a reader gets: the same numbers, the figures computed at insert beside them
    df = sources.load([path]).attempts.set_index("attempt_key")
    assert np.asarray(df.loc[rs[0]["attempt_key"], "samples_us"]).tolist() == ODD
    assert df.loc[rs[0]["attempt_key"], "samples_n"] == len(ODD)


def test_an_older_store_reads_as_before_and_is_migrated_when_opened_for_writing(tmp_path):
    path = store_of(tmp_path / "a.sqlite", rows(repeats=3) + rows(repeats=1, prefix="p", device="CPU other"))
    before = analysis([path])
    keep = table(path)
    old(path)
    assert analysis([path]) == before  # read-only: its JSON text parsed as schema 10 read it
    con = sqlite3.connect(path)
    assert con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == "10"  # nothing written
    assert not con.execute("SELECT 1 FROM sqlite_master WHERE name='samples'").fetchone()
    con.close()
    Store(path).close()  # opened for writing: migrated
    migrated = table(path)
    assert set(migrated) == set(keep)
    assert all(migrated[k][:2] == keep[k][:2] and np.array_equal(migrated[k][2], keep[k][2]) for k in keep)
    assert Store(path, readonly=True).con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] \
        == str(SCHEMA_VERSION)
    assert analysis([path]) == before


def test_a_row_slimmed_of_its_samples_after_they_were_stored_holds_none(tmp_path):
    rs = rows(n_workloads=1)
    path = store_of(tmp_path / "a.sqlite", rs)
    con = sqlite3.connect(path)
    con.execute("UPDATE attempts SET samples_us = NULL WHERE attempt_key = ?", (rs[0]["attempt_key"],))
    con.commit()
    con.close()
    df = sources.load([path]).attempts.set_index("attempt_key")
    assert df.loc[rs[0]["attempt_key"], "samples_us"] is None
    assert np.isnan(df.loc[rs[0]["attempt_key"], "samples_n"])
    assert np.asarray(df.loc[rs[1]["attempt_key"], "samples_us"]).tolist() == rs[1]["samples_us"]


def test_export_and_import_are_unchanged_by_the_samples_table(tmp_path):
    rs = rows(n_workloads=2)
    rs[0].update(samples_us=ODD, median_us=float(np.median(ODD)), p95_us=float(np.percentile(ODD, 95)))
    for r in rs:  # what import requires of an OK row beyond the test rows' values (columns added since)
        r.update({c: 0.0 for c in lacks(Status.OK, r)})
    path = store_of(tmp_path / "a.sqlite", rs)
    first = tmp_path / "a.jsonl"
    export(Store(path, readonly=True), None, first)
    lines = [json.loads(x) for x in first.read_text().splitlines()]
    assert lines[0]["samples_us"] == ODD  # a list, as before
    back = Store(tmp_path / "b.sqlite")
    import_rows(back, read_rows(first))
    back.close()
    second = tmp_path / "b.jsonl"
    export(Store(tmp_path / "b.sqlite", readonly=True), None, second)
    assert second.read_text() == first.read_text()
    a, b = table(path), table(tmp_path / "b.sqlite")
    assert set(a) == set(b) and all(a[k][:2] == b[k][:2] and np.array_equal(a[k][2], b[k][2]) for k in a)
    assert analysis([first]) == analysis([path])  # an export is read as its store is


def test_an_attempt_already_stored_keeps_its_samples(tmp_path):
    rs = rows(n_workloads=1)
    path = store_of(tmp_path / "a.sqlite", rs)
    s = Store(path)
    assert s.insert_many([{**rs[0], "samples_us": [1.0, 2.0]}]) == 0  # the attempt has a row: ignored
    s.close()
    assert table(path)[rs[0]["attempt_key"]][2].tolist() == rs[0]["samples_us"]


def test_a_report_draws_each_figure_once_as_svg_and_no_pdf_unless_asked(tmp_path):  # --pdf: test_html_report
    pytest.importorskip("matplotlib")
    from test_html_report import build, make_store

    store = make_store(tmp_path / "alpha.sqlite", "alpha")
    site = build(tmp_path, store)
    figs = tmp_path / "site" / "figures"
    svgs = sorted(figs.glob("*.svg"))
    assert len(svgs) >= 5 and not list(figs.glob("*.pdf"))  # was: a PDF of every figure, a second draw each
    pages = "".join(p.read_text() for p in site.rglob("*.html"))
    assert 'src="figures/' in pages and not re.search(r'href="[^"]*figures/[^"]*\.pdf"', pages)  # no dead link
    assert all(json.loads(s.with_suffix(".json").read_text())["files"] == {"svg": s.name, "csv": s.stem + ".csv"}
               for s in svgs)


@pytest.mark.parametrize("pdf", [False, True])
def test_a_figure_is_one_svg_and_a_pdf_only_when_asked(tmp_path, pdf):
    pytest.importorskip("matplotlib")
    import pandas as pd
    from matplotlib.figure import Figure

    from attnbench.report.html.figure_files import FigureFiles

    figs = FigureFiles(tmp_path, ["a=a.sqlite"], pdf=pdf)
    fig = Figure(figsize=(2, 1.5))
    fig.subplots().plot([1, 2], [3, 4])
    block = figs.add(fig, pd.DataFrame({"x": [1, 2]}), "one", "One", "all", "caption")
    names = sorted(p.name for p in (tmp_path / "figures").iterdir())
    want = ["01-one.csv", "01-one.json", "01-one.svg"] + (["01-one.pdf"] if pdf else [])
    assert names == sorted(want)  # was: a PDF always, a second full draw of every figure
    assert ('href="figures/01-one.pdf"' in block) == pdf and 'width="200" height="150"' in block
    files = json.loads((tmp_path / "figures" / "01-one.json").read_text())["files"]
    assert set(files) == ({"svg", "csv", "pdf"} if pdf else {"svg", "csv"})
