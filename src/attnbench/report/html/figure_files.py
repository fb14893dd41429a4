"""Each figure of the site as files: SVG (shown in the page), PDF (for papers: `report --pdf`), its data as CSV and a
JSON with its title, slice, caption and the same data; and the HTML block that shows it."""
from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from ...analysis.frames import json_ready
from .markup import e

log = logging.getLogger(__name__)


def slug(text: str, limit: int = 60) -> str:
    """A file-name-safe form of any text (plugin names included): [a-z0-9-] only."""
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9]+", "-", text.lower())).strip("-")[:limit] or "figure"


class FigureFiles:
    """Writes the figures of one site under root/figures, numbered in the order they are added."""

    def __init__(self, root: Path, stores: list[str], pdf: bool = False):
        self.dir = root / "figures"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.stores = stores
        self.count = 0
        # a PDF is a second full draw of the figure (~40% of a report's time on a large store): on request only
        self.formats = ("svg", "pdf") if pdf else ("svg",)

    def add(self, fig: Figure, data: pd.DataFrame, name: str, title: str, slice_text: str, caption: str,
            depth: int = 0) -> str:
        """Save `fig` and `data` (the frame it was drawn from) and return the <figure> block of a page
        `depth` folders below the site's root."""
        self.count += 1
        base = f"{self.count:02d}-{slug(name)}"
        fig.savefig(self.dir / f"{base}.svg", format="svg", metadata={"Date": None})
        if "pdf" in self.formats:
            fig.savefig(self.dir / f"{base}.pdf", format="pdf", metadata={"CreationDate": None, "ModDate": None})
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
