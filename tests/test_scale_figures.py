"""Issue 43.3: the speedup heatmaps laid out without constrained layout (its extra pass over every tick and
cell label was a large part of their saving); drawn, nothing overlaps and all stays on the figure."""
from __future__ import annotations

import io

import matplotlib
import pandas as pd
from matplotlib.backends.backend_agg import RendererAgg

from attnbench.report.html.figures import NOT_MEASURED, STYLE, speedup_heatmaps


def _frame(backends) -> pd.DataFrame:
    rows = []
    for k, bk in enumerate(backends):
        for b in (1, 8, 64, 256):
            for n in (512, 4096, 32768, 131072):
                blank = (k == 2 and n == 131072) or (k == 3 and b == 256)
                rows.append({"backend": bk, "batch": b, "kv_len": n, "speedup": None if blank else 0.2 + k * 0.7 + n / 9e4,
                             "status": (NOT_MEASURED if k == 3 else "OOM") if blank else ""})
    return pd.DataFrame(rows)


def test_speedup_heatmaps_are_laid_out_without_constrained_layout_and_nothing_overlaps():
    for backends in (["sdpa-math", "flex", "compile", "sdpa-flash", "cudnn-fe"], ["sdpa-math", "flex"]):
        with matplotlib.rc_context(STYLE):
            fig = speedup_heatmaps(_frame(backends), "sdpa-math", "decode: a heading long enough to wrap " * 4,
                                   "KV length")
            assert fig.get_layout_engine() is None
            fig.savefig(io.BytesIO(), format="svg")
            r = RendererAgg(*(int(v) for v in fig.get_size_inches() * fig.dpi), fig.dpi)
            boxes = [ax.get_tightbbox(r) for ax in fig.axes if ax.get_visible()]
            legend, sup = fig.legends[0].get_window_extent(r), fig._suptitle.get_window_extent(r)
        assert len(boxes) == len(backends)  # the panels but the baseline's, and the colorbar
        panels = [ax for ax in fig.axes if ax.get_visible() and ax.get_subplotspec() is not None]
        # the batches named once per row of panels, the length axis's name once per column
        assert sum(bool(ax.get_ylabel()) for ax in panels) == (len(panels) + 2) // 3
        assert sum(bool(ax.get_xlabel()) for ax in panels) == min(3, len(panels))
        W, H = fig.get_size_inches() * fig.dpi
        assert legend.x0 >= -1 and legend.x1 <= W + 1  # the legend's columns fit the figure's width
        for i, a in enumerate(boxes):
            assert a.x0 >= -1 and a.y0 >= -1 and a.x1 <= W + 1 and a.y1 <= H + 1, (i, a, W, H)
            assert not a.overlaps(legend) and not a.overlaps(sup)
            for b in boxes[i + 1:]:
                assert not a.overlaps(b), (a, b)


def test_fastest_maps_are_laid_out_without_constrained_layout_and_nothing_overlaps():
    from attnbench.report.html.figures import backend_colors, fastest_map

    rows = [{"batch": b, "kv_len": n, "best": ("flex", "sdpa-flash", "cudnn-fe")[(b + n) % 3], "median_us": n / b,
             "separated": n != 4096, "noisy": b == 8, "status": "OOM" if (b, n) == (256, 131072) else ""}
            for b in (1, 8, 64, 256) for n in (512, 4096, 32768, 131072)]
    with matplotlib.rc_context(STYLE):
        fig = fastest_map(pd.DataFrame(rows), "decode: fastest per cell, a heading long enough to wrap " * 3,
                          backend_colors(["flex", "sdpa-flash", "cudnn-fe"]), "KV length")
        assert fig.get_layout_engine() is None
        fig.savefig(io.BytesIO(), format="svg")
        r = RendererAgg(*(int(v) for v in fig.get_size_inches() * fig.dpi), fig.dpi)
        a = fig.axes[0].get_tightbbox(r)
        legend, sup = fig.legends[0].get_window_extent(r), fig._suptitle.get_window_extent(r)
    W, H = fig.get_size_inches() * fig.dpi
    assert a.x0 >= -1 and a.y0 >= -1 and a.x1 <= W + 1 and a.y1 <= H + 1
    assert legend.x0 >= -1 and legend.x1 <= W + 1  # it was cut at both sides in three columns
    assert not a.overlaps(legend) and not a.overlaps(sup)
