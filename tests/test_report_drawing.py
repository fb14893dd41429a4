"""Issue 43.3: a report's figures drawn in other processes while the next ones are built — the same files, byte for
byte, as drawn in the builder; a drawing that fails fails the report and leaves no site behind."""
from __future__ import annotations

import matplotlib
import pytest
from matplotlib.figure import Figure

from attnbench.report.html import figure_files, site
from test_html_report import build, make_store


def _files(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted((root / "figures").iterdir())}


def test_figures_drawn_in_other_processes_are_the_builders_byte_for_byte(tmp_path, monkeypatch):
    store = make_store(tmp_path / "alpha.sqlite", "alpha")
    monkeypatch.setattr(site, "drawing_workers", lambda: 0)
    here = build(tmp_path, store, out="here")
    monkeypatch.setattr(site, "drawing_workers", lambda: 1)
    monkeypatch.setattr(figure_files.FigureFiles, "START", 0)  # every figure to the drawing process
    calls = []
    submit = figure_files.ProcessPoolExecutor.submit
    monkeypatch.setattr(figure_files.ProcessPoolExecutor, "submit",
                        lambda self, fn, *a: calls.append(a[1]) or submit(self, fn, *a))
    there = build(tmp_path, store, out="there")
    a, b = _files(here), _files(there)
    assert len(calls) >= 3 and len(a) == len(b) and a.keys() == b.keys()
    assert any(k.endswith(".svg") for k in a)  # PDFs go the same way (the style is the figure's, not the format's)
    assert [k for k in a if a[k] != b[k]] == []


def test_a_failed_drawing_fails_the_report_and_writes_no_site(tmp_path, monkeypatch):
    ff = figure_files.FigureFiles(tmp_path, [], workers=1, style={"svg.fonttype": "no-such-type"})
    monkeypatch.setattr(ff, "START", 0)
    with matplotlib.rc_context({"svg.fonttype": "path"}):
        fig = Figure()
        fig.add_subplot().plot([1, 2], [3, 4])
    import pandas as pd

    ff.add(fig, pd.DataFrame({"x": [1]}), "one", "a title", "a slice", "a caption")
    assert ff.pool is not None and len(ff.pending) == 1
    with pytest.raises(ValueError, match="no-such-type"):
        ff.close()
    assert ff.pool is None


def test_an_unpicklable_figure_is_drawn_in_the_builder(tmp_path, monkeypatch):
    ff = figure_files.FigureFiles(tmp_path, [], workers=1)
    monkeypatch.setattr(ff, "START", 0)
    fig = Figure()
    ax = fig.add_subplot()
    ax.plot([1, 2], [3, 4])
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v}"))  # a lambda: no pickle
    import pandas as pd

    ff.add(fig, pd.DataFrame({"x": [1]}), "one", "a title", "a slice", "a caption")
    assert ff.pending == [] and (tmp_path / "figures" / "01-one.svg").stat().st_size > 0
    ff.close()


def test_the_drawing_processes_leave_a_core_to_the_builder(monkeypatch):
    for cores, want in ((1, 0), (2, 1), (4, 3), (64, 3)):
        monkeypatch.setattr(figure_files.os, "sched_getaffinity", lambda _pid, n=cores: set(range(n)))
        assert figure_files.drawing_workers() == want
