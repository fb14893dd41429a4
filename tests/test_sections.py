"""The sections of `analyze` (analysis/sections): one ordered registry, each computed once, rendered by the
JSON, text, Markdown and HTML renderers; and the report's pages registry (report/html/pages)."""
from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import pandas as pd
import pytest

from attnbench.analysis import analyze, sections
from attnbench.report import analyze as page
from table_rows import rows_for, store

X = {"w1": {"a": [10, 10, 10], "b": [20, 20, 20]}, "w3": {"c": [5, 5, 5], "a": [10, 10, 10]}}
Y = {"w1": {"a": [15, 15, 15], "b": [10, 10, 10]}, "w3": {"a": [10, 10, 10], "b": [12, 12, 12]}}


@pytest.fixture
def data(cli, tmp_path):
    from attnbench.store import sources

    return sources.load([str(store(cli, tmp_path, "x", rows_for(X, device="GPU-X"))),
                         str(store(cli, tmp_path, "y", rows_for(Y, device="GPU-Y")))])


def test_the_registry_is_the_json_in_order(data):
    names = [s.NAME for s in sections.SECTIONS]
    assert len(set(names)) == len(names)
    assert names == ["sources", "host_pace", "definitions", "winners", "transfer", "pairs", "outcomes", "dispatch",
                     "correctness", "efficiency", "mechanism", "ladder"]
    a = analyze.of(data)
    assert list(a.to_json()) == ["by", *names] and list(a.results) == names
    assert a.winners is a.results["winners"] and a.sources.rows[0].label == "x"
    with pytest.raises(AttributeError):
        a.nonesuch


@dataclass(frozen=True)
class Counted:
    n: int

    def to_json(self) -> dict:
        return {"n": self.n}


def test_a_new_section_is_one_module_and_one_entry(data, monkeypatch):
    """A section registered last sees every earlier result, lands in the JSON under its name, and the text and
    Markdown renderers pass over it (it has no entry there)."""
    seen = {}

    def compute(basis, done):
        seen.update(done)
        return Counted(int(len(basis.won)))

    extra = SimpleNamespace(NAME="contests", compute=compute)
    before = analyze.of(data)
    monkeypatch.setattr(sections, "SECTIONS", (*sections.SECTIONS, extra))
    a = analyze.of(data)
    assert list(seen) == [s.NAME for s in sections.SECTIONS[:-1]]
    assert a.to_json()["contests"] == {"n": len(a.basis.won)} and a.contests.n == 4
    assert page.terminal(a)[0] == page.terminal(before)[0] and page.markdown(a) == page.markdown(before)


def test_each_section_is_computed_once_per_report(cli, tmp_path, monkeypatch):
    """The site renders the sections the report command computed; it does not run the analysis again."""
    pytest.importorskip("matplotlib")
    from attnbench.analysis.sections import basis

    calls = []
    real = basis.Basis.of.__func__
    monkeypatch.setattr(basis.Basis, "of", classmethod(lambda cls, *a, **k: calls.append(1) or real(cls, *a, **k)))
    x = store(cli, tmp_path, "x", rows_for(X, device="GPU-X"))
    res = cli("report", x, "--out", tmp_path / "site")
    assert res.rc == 0, res.err
    assert calls == [1]
    assert ">x<" in (tmp_path / "site" / "index.html").read_text()


def test_pages_apply_by_what_the_stores_hold():
    from attnbench.report.html import pages

    rows, none = pd.DataFrame({"a": [1]}), pd.DataFrame()
    files = lambda df, models: [f for _, f in pages.nav(SimpleNamespace(df=df, models=models))]  # noqa: E731
    assert files(rows, none) == ["index.html", "prefill.html", "decode.html", "portability.html", "tables.html",
                                 "methodology.html"]
    assert files(rows, rows)[-2:] == ["model.html", "methodology.html"]
    model_only = pages.nav(SimpleNamespace(df=none, models=rows))
    assert [(p.TITLE, f) for p, f in model_only] == [("Whole workload", "index.html"), ("Methodology",
                                                                                         "methodology.html")]
