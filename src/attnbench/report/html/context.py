"""What every page of the site writes with: the data, the figure files, the table ids and the copied docs."""
from __future__ import annotations

import itertools

from .data import SiteData
from .figure_files import FigureFiles


class Context:
    """One build's shared state: pages render `data` (its computed analysis), add figures to `figs`, number
    their tables through table_id(); `docs` are the doc files copied into the site (pages/methodology)."""

    def __init__(self, data: SiteData, figs: FigureFiles):
        self.data, self.figs, self.ids = data, figs, itertools.count(1)
        self.docs: list[str] = []

    def table_id(self) -> str:
        return f"table-{next(self.ids)}"
