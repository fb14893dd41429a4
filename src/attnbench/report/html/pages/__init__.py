"""The site's pages, in nav order. A page is one module here with FILE, TITLE, applies(data) -> bool (whether
the stores give it anything to show) and body(ctx) -> HTML; adding one is a new module plus one entry in
PAGES. The first page that applies is the site's index.html."""
from __future__ import annotations

from . import decode, ladder, mechanism, methodology, model, overview, portability, prefill, tables

PAGES = (overview, prefill, decode, portability, tables, mechanism, ladder, model, methodology)
INDEX = "index.html"


def nav(data) -> list[tuple[object, str]]:
    """(page, file) of every page that applies to `data`, in order; the first one written as INDEX (the
    whole-workload page when the stores hold model rows only)."""
    shown = [p for p in PAGES if p.applies(data)]
    return [(p, INDEX if i == 0 else p.FILE) for i, p in enumerate(shown)]


def links(nav_pages: list[tuple[object, str]]) -> tuple[tuple[str, str], ...]:
    """(file, title) of each page, for the nav bar of every page."""
    return tuple((file, p.TITLE) for p, file in nav_pages)
