"""Axis marks of the report's figures placed when a figure is built rather than at each draw (issue 43.3): the "% of
ceiling" axis on its panel, log ticks inside the view only, and axis labels at fixed positions."""
from __future__ import annotations

import functools
import math

import matplotlib as mpl
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.lines import TICKRIGHT, Line2D
from matplotlib.ticker import LogLocator, MaxNLocator, ScalarFormatter
from matplotlib.transforms import ScaledTranslation


class InViewLog(LogLocator):
    """LogLocator's ticks inside the view only: an axis makes a tick (five artists) for every location its locator
    gives, drawn or not, and LogLocator gives a decade beyond each end (a quarter of a log axis's ticks)."""

    def __call__(self):
        lo, hi = sorted(self.axis.get_view_interval())
        locs = super().__call__()
        if not lo > 0:
            return locs
        span = (math.log10(hi) - math.log10(lo)) * 1e-6  # looser than the axis's own test: it drops the rest
        return [v for v in locs if v > 0 and math.log10(lo) - span <= math.log10(v) <= math.log10(hi) + span]


def percent_axis(ax, ceiling: float) -> None:
    """The right-hand "% of ceiling" axis of a throughput panel, drawn on the panel itself: its spine, ticks, tick
    labels and label where matplotlib's secondary_yaxis puts them (the same locator and formatter over the same
    limits), without a second Axes per panel (its creation and its draw were a sixth of a report's figure time)."""
    fig = ax.get_figure()
    lo, hi = ax.get_ylim()
    plo, phi = 100 * lo / ceiling, 100 * hi / ceiling
    height_pt = ax.get_position().height * fig.get_size_inches()[1] * 72
    size = mpl.rcParams["ytick.labelsize"]
    size = FontProperties(size=size).get_size_in_points()
    locator = MaxNLocator(nbins=max(min(int(height_pt // (size * 2)), 9), 1), steps=[1, 2, 2.5, 5, 10])
    span = (phi - plo) * 1e-10
    ticks = [p for p in locator.tick_values(plo, phi) if plo - span <= p <= phi + span]
    formatter = ScalarFormatter()
    formatter.create_dummy_axis()
    formatter.axis.set_view_interval(plo, phi)
    formatter.axis.set_data_interval(plo, phi)
    labels = formatter.format_ticks(ticks)
    ax.spines["right"].set_visible(True)
    tick_len, pad = mpl.rcParams["ytick.major.size"], mpl.rcParams["ytick.major.pad"]
    ys = [p * ceiling / 100 for p in ticks]
    ax.add_artist(Line2D([1.0] * len(ys), ys, transform=ax.get_yaxis_transform(), ls="none", marker=TICKRIGHT,
                         ms=tick_len, mew=mpl.rcParams["ytick.major.width"], color=mpl.rcParams["ytick.color"],
                         clip_on=False))
    shift = ScaledTranslation((tick_len + pad) / 72, 0, fig.dpi_scale_trans)
    widest = 0.0
    for y, text in zip(ys, labels):
        ax.text(1.0, y, text, transform=ax.get_yaxis_transform() + shift, ha="left", va="center_baseline",
                fontsize=size, color=mpl.rcParams["ytick.labelcolor"] if mpl.rcParams["ytick.labelcolor"] != "inherit"
                else mpl.rcParams["ytick.color"], clip_on=False)
        widest = max(widest, svg_width_pt(text, FontProperties(size=size)))
    right = tick_len + pad + widest + mpl.rcParams["axes.labelpad"]
    ax.text(1.0, 0.5, "% of ceiling", transform=ax.transAxes + ScaledTranslation(right / 72, 0, fig.dpi_scale_trans),
            rotation=90, rotation_mode="anchor", ha="center", va="top", fontsize=mpl.rcParams["axes.labelsize"],
            clip_on=False)


@functools.lru_cache(maxsize=4096)
def svg_width_pt(text: str, prop: FontProperties) -> float:
    """The width (points) of one line of text as the SVG renderer measures it (text drawn as paths)."""
    from matplotlib.textpath import text_to_path

    return text_to_path.get_text_width_height_descent(text, prop, ismath=False)[0]


def fixed_label_positions(fig: Figure) -> None:
    """Axis labels at fixed positions, so that a draw does not measure an axis's tick labels a second time to place
    its label: an empty label (inner panels) inside its panel, where it never widens a bounding box; a y label on
    the left where matplotlib would put it, its label pad left of the widest tick label in view (measured as the
    SVG renderer measures text)."""
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            if not axis.label.get_text():
                axis.set_label_coords(0.5, 0.5)
        y = ax.yaxis
        if not y.label.get_text() or y.get_label_position() != "left" or not y.get_visible():
            continue
        lo, hi = sorted(y.get_view_interval())
        locs = list(y.get_majorticklocs())
        texts = y.get_major_formatter().format_ticks(locs) if locs else []
        span = (hi - lo) * 1e-10
        ticks = [t for v, t in zip(locs, texts) if lo - span <= v <= hi + span and t]
        prop = FontProperties(size=mpl.rcParams["ytick.labelsize"])
        major = y.get_major_ticks(1)[0] if ticks else None
        if ticks and not (major.label1.get_visible() and major.tick1line.get_visible()):
            continue  # hidden labels or ticks: left to matplotlib
        widest = max((svg_width_pt(t, prop) for t in ticks),
                     default=None)
        if widest is None:
            continue
        out = mpl.rcParams["ytick.major.size"] + mpl.rcParams["ytick.major.pad"] + widest + y.labelpad
        y.set_label_coords(0.0, 0.5, transform=ax.transAxes + ScaledTranslation(-out / 72, 0, fig.dpi_scale_trans))
