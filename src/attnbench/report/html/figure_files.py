"""Each figure of the site as files: SVG (shown in the page), PDF (for papers: `report --pdf`), its data as CSV and a
JSON with its title, slice, caption and the same data; and the HTML block that shows it."""
from __future__ import annotations

import json
import logging
import os
import pickle
import re
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from ...analysis.frames import json_ready
from .markup import e

log = logging.getLogger(__name__)

META = {"svg": {"Date": None}, "pdf": {"CreationDate": None, "ModDate": None}}


def drawing_workers() -> int:
    """Processes that draw figures while the report builds the next ones: one core is the builder's, the others
    draw (at most 3: the builder makes a figure about as fast as one process draws it); none on one core."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(0, min(3, cores - 1))


def _draw(blob: bytes, files: list[tuple[str, str]], style: dict) -> None:
    """In a drawing process: the pickled figure saved in each format under the site's style (the style is read
    at draw time: SVG text as paths, the id salt), so its files are those the builder would have written."""
    import matplotlib

    with matplotlib.rc_context(style):
        fig = pickle.loads(blob)
        for fmt, path in files:
            fig.savefig(path, format=fmt, metadata=META[fmt])


def slug(text: str, limit: int = 60) -> str:
    """A file-name-safe form of any text (plugin names included): [a-z0-9-] only."""
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9]+", "-", text.lower())).strip("-")[:limit] or "figure"


class FigureFiles:
    """Writes the figures of one site under root/figures, numbered in the order they are added."""

    # the drawing processes start at this many figures: a small site is drawn here, sooner than a process starts
    START = 3

    def __init__(self, root: Path, stores: list[str], pdf: bool = False, workers: int = 0, style: dict | None = None):
        self.dir = root / "figures"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.stores = stores
        self.count = 0
        # a PDF is a second full draw of the figure (~40% of a report's time on a large store): on request only
        self.formats = ("svg", "pdf") if pdf else ("svg",)
        # figures drawn in other processes (spawned: nothing of this process's threads is inherited); close()
        # waits for them and raises the first failure
        self.style = style or {}
        self.workers, self.pool, self.pending = workers, None, []

    def _save(self, fig: Figure, base: str) -> None:
        files = [(fmt, str(self.dir / f"{base}.{fmt}")) for fmt in self.formats]
        if self.workers > 0 and self.pool is None and self.count > self.START:
            try:
                self.pool = ProcessPoolExecutor(self.workers, mp_context=get_context("spawn"))
            except (OSError, ImportError) as e:  # no process semaphores here (some sandboxes): drawn in the builder
                log.debug("figures drawn in the builder: %s", e)
                self.workers = 0
        if self.pool is not None:
            try:
                blob = pickle.dumps(fig)
            except Exception as e:  # a figure holding something unpicklable (a plugin's artist): drawn here
                log.debug("figure %s drawn in the builder: %s", base, e)
            else:
                self.pending.append(self.pool.submit(_draw, blob, files, self.style))
                return
        for fmt, path in files:
            fig.savefig(path, format=fmt, metadata=META[fmt])

    def close(self, wait: bool = True) -> None:
        """Wait for the figures being drawn (raising the first failure), or drop them (wait=False)."""
        if self.pool is None:
            return
        try:
            if wait:
                for f in self.pending:
                    f.result()
        finally:
            self.pool.shutdown(wait=True, cancel_futures=not wait)
            self.pool, self.pending, self.workers = None, [], 0

    def add(self, fig: Figure, data: pd.DataFrame, name: str, title: str, slice_text: str, caption: str,
            depth: int = 0) -> str:
        """Save `fig` and `data` (the frame it was drawn from) and return the <figure> block of a page
        `depth` folders below the site's root."""
        self.count += 1
        base = f"{self.count:02d}-{slug(name)}"
        self._save(fig, base)
        width, height = fig.get_size_inches() * fig.dpi  # the caller drops the figure: not cleared (Axes.clear
        # makes every tick again, a tenth of the drawing) nor closed (a Figure, not pyplot's: no state holds it)
        data.to_csv(self.dir / f"{base}.csv", index=False)
        records = json_ready(data.astype(object).where(data.notna(), None).to_dict(orient="records"))
        about = {"figure": self.count, "title": title, "slice": slice_text, "caption": caption,
                 "stores": self.stores, "files": {k: f"{base}.{k}" for k in (*self.formats, "csv")},
                 "columns": list(data.columns), "data": records}
        (self.dir / f"{base}.json").write_text(json.dumps(about, indent=1, default=str) + "\n")
        log.debug("figure %s: %s", base, title)
        up = "../" * depth
        src = f"{up}figures/{base}"
        pdf = f'<a href="{src}.pdf">PDF</a> · ' if "pdf" in self.formats else ""
        return (f'<figure id="fig-{self.count}">\n'
                f'<img src="{src}.svg" alt="{e(title)}" width="{int(width)}" height="{int(height)}">\n'
                f"<figcaption><b>Figure {self.count}. {e(title)}.</b> <span class=\"slice\">Slice: {e(slice_text)}."
                f"</span> {e(caption)} <span class=\"files\">{pdf}"
                f"<a href=\"{src}.csv\">data (CSV)</a> · <a href=\"{src}.json\">data and caption (JSON)</a>"
                "</span></figcaption>\n</figure>\n")
