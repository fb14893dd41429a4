"""Issue 43.3: the line figures drawn with fewer artists and the same look: the "% of ceiling" axis drawn on its
panel (no second Axes per panel) with the ticks and labels matplotlib's secondary axis gives, and log axes that make
no tick outside their view."""
from __future__ import annotations

import io

import matplotlib
import pandas as pd
import pytest
from matplotlib.figure import Figure
from matplotlib.transforms import IdentityTransform, blended_transform_factory

from attnbench.report.html.figures import STYLE, backend_colors, perf_lines, plain_log_axis


def _frame(scale: float) -> pd.DataFrame:
    rows = []
    for k, bk in enumerate(("flex", "sdpa-flash", "sdpa-math")):
        for b in (1, 8):
            for n in (512, 2048, 8192, 32768):
                us = (k + 1) * n * b / 300
                rows.append({"backend": bk, "role": "accuracy_reference" if k == 2 else "contestant", "batch": b,
                             "kv_len": n, "median_us": us, "value": scale * (k + 1) * n / 32768 * (1 + b / 8),
                             "peak_mem_mib": n / 64, "host_bound": n == 512, "clock_low": (b, n) == (8, 2048)})
    return pd.DataFrame(rows)


def _drawn(fig: Figure) -> None:
    fig.savefig(io.BytesIO(), format="svg")


@pytest.mark.parametrize("scale", [700.0, 40.0, 3.0])  # % of ceiling up to ~200, ~12, ~1: ScalarFormatter's digits
def test_percent_axis_is_drawn_on_the_panel_with_the_secondary_axis_ticks_and_labels(scale):
    ceiling = 989.0
    with matplotlib.rc_context(STYLE):
        fig = perf_lines(_frame(scale), ["time", "throughput", "memory"], "TFLOP/s", ceiling, "matmul", "N",
                         "a heading", backend_colors(["flex", "sdpa-flash", "sdpa-math"]))
        _drawn(fig)
        throughput = [ax for ax in fig.axes if ax.get_title(loc="left").endswith("TFLOP/s")]
        assert len(throughput) == 2
        for ax in throughput:
            assert not ax.child_axes  # no secondary Axes: its creation and draw were the cost
            assert ax.spines["right"].get_visible()
            drawn = {t.get_text(): t.get_position()[1] for t in ax.texts}
            assert drawn.pop("% of ceiling") == 0.5
            # what matplotlib's own secondary axis shows over the same limits and height
            sec = ax.secondary_yaxis("right", functions=(lambda v: 100 * v / ceiling, lambda p: p * ceiling / 100))
            _drawn(fig)
            lo, hi = sorted(sec.get_ylim())
            want = {t.label2.get_text(): t.get_loc() * ceiling / 100 for t in sec.yaxis.get_major_ticks()
                    if lo - 1e-9 * (hi - lo) <= t.get_loc() <= hi + 1e-9 * (hi - lo)}
            assert len(want) >= 2
            assert drawn.keys() == want.keys(), (drawn, want)
            for k, y in want.items():
                assert drawn[k] == pytest.approx(y, rel=1e-9, abs=1e-12)
            # its label where the secondary axis puts its own, to a thousandth of a point
            mine = next(t for t in ax.texts if t.get_text() == "% of ceiling")
            sec.set_ylabel("% of ceiling")
            fig.savefig(io.BytesIO(), format="svg")  # drawn at 72 dpi: the label placed in those pixels
            dpi = fig.dpi
            fig.set_dpi(72)
            a = mine.get_transform().transform(mine.get_position())
            b = sec.yaxis.label.get_transform().transform(sec.yaxis.label.get_position())
            fig.set_dpi(dpi)
            assert (mine.get_ha(), mine.get_va(), mine.get_rotation()) == (
                sec.yaxis.label.get_ha(), sec.yaxis.label.get_va(), sec.yaxis.label.get_rotation())
            assert a == pytest.approx(b, abs=1e-3), (a, b)
            sec.remove()


def test_y_labels_sit_where_matplotlib_places_them_without_placing_them_at_draw():
    with matplotlib.rc_context(STYLE):
        fig = perf_lines(_frame(40.0), ["time", "throughput"], "TFLOP/s", 989.0, "matmul", "N", "a heading",
                         backend_colors(["flex", "sdpa-flash", "sdpa-math"]))
        fig.savefig(io.BytesIO(), format="svg")
        placed = [ax.yaxis.label.get_position() for ax in fig.axes]
        fixed = [ax.yaxis._autolabelpos for ax in fig.axes]
        dpi = fig.dpi
        fig.set_dpi(72)  # an SVG is drawn at 72 dpi, where matplotlib places a label in pixels
        shown = [ax.yaxis.label.get_transform().transform(p) for ax, p in zip(fig.axes, placed)]
        for ax in fig.axes:  # matplotlib's own placement, from the drawn tick labels
            ax.yaxis._autolabelpos = True
            ax.yaxis.label.set_transform(blended_transform_factory(IdentityTransform(), ax.transAxes))  # its own
            ax.yaxis.set_label_position("left")
        fig.savefig(io.BytesIO(), format="svg")
        fig.set_dpi(72)
        auto = [ax.yaxis.label.get_transform().transform(ax.yaxis.label.get_position()) for ax in fig.axes]
        fig.set_dpi(dpi)
    assert not any(fixed)  # no label placed at draw time
    for s, a in zip(shown, auto):
        assert s == pytest.approx(a, abs=1e-3), (s, a)


def test_a_log_axis_makes_ticks_only_inside_its_view():
    with matplotlib.rc_context(STYLE):
        fig = Figure()
        ax = fig.subplots()
        ax.plot([1, 2, 3], [30, 200, 900])
        plain_log_axis(ax)
        _drawn(fig)
        lo, hi = ax.get_ylim()
        assert ax.yaxis.majorTicks, "the axis has ticks"
        # every tick object the axis made is one it draws (LogLocator alone gives a decade beyond each end)
        assert all(lo <= t.get_loc() <= hi for t in ax.yaxis.majorTicks), [t.get_loc() for t in ax.yaxis.majorTicks]
        assert [t.label1.get_text() for t in ax.yaxis.majorTicks] == ["50", "100", "200", "500", "1,000"]
