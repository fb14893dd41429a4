"""HTML building blocks of the report site: escaping, the page frame, and sortable, filterable tables."""
from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import Callable

# what a status (or the report's own reason for a blank cell) means, in a few words
MEANING = {"OK": "correct, ran a declared kernel family, timed", "UNSUPPORTED": "the backend declined the workload",
           "OOM_PREDICTED": "predicted not to fit in device memory; not run", "OOM": "ran out of memory",
           "INCORRECT": "failed the float64 check", "DISPATCH_MISMATCH": "ran another kernel than it declares",
           "IMPLAUSIBLE": "timed, but the time cannot be true", "TIMEOUT": "no result in time",
           "CRASH": "the worker died or the CUDA context broke", "ERROR": "raised an error",
           "NOT MEASURED": "not in the grid this store ran", "NO BASELINE": "the baseline has no OK row here",
           "NO OK CONTESTANT": "no contestant ran OK here"}
REASON_CHARS = 240  # a reason longer than this is cut in the cell; the whole text is in its title


def e(value) -> str:
    """Any value as escaped HTML text (quotes included: safe in attributes too); None as ''."""
    return "" if value is None else html.escape(str(value), quote=True)


def missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def num(v, fmt: str = ".3g", empty: str = "") -> str:
    return empty if missing(v) else format(v, fmt)


def us(v) -> str:
    """Microseconds in a table cell: 6.80, 35.8, 269.0, 12,345."""
    return "" if missing(v) else (f"{v:,.0f}" if v >= 1000 else f"{v:.1f}" if v >= 100 else f"{v:.2f}")


def pct(v, digits: int = 0) -> str:
    return "" if missing(v) else f"{100 * v:.{digits}f}%"


def page(file: str, title: str, body: str, site_title: str, footer: str, depth: int = 0, pages=()) -> str:
    """A whole page: nav to every page of the site (`pages`: (file, title) each, relative links; pages.nav),
    the body, a footer; local assets only."""
    up = "../" * depth
    current = ' aria-current="page"'
    nav = "".join(f'<a href="{up}{f}"{current if f == file else ""}>{e(t)}</a>' for f, t in pages)
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{e(title)} · {e(site_title)}</title>\n"
            f"<link rel=\"icon\" href=\"{up}assets/favicon.svg\" type=\"image/svg+xml\">\n"
            f"<link rel=\"stylesheet\" href=\"{up}assets/style.css\">\n"
            f"<script src=\"{up}assets/table.js\" defer></script>\n</head>\n<body>\n"
            f"<header><div class=\"site\">{e(site_title)}</div><nav>{nav}</nav></header>\n"
            f"<main>\n<h1>{e(title)}</h1>\n{body}\n</main>\n<footer>{footer}</footer>\n</body>\n</html>\n")


def para(text: str) -> str:
    """A paragraph of plain text (escaped)."""
    return f"<p>{e(text)}</p>\n"


def note(text: str, cls: str = "note") -> str:
    return f'<p class="{cls}">{e(text)}</p>\n'


def cards(items: list[tuple[str, str, str]]) -> str:
    """Headline numbers: (value, label, detail) each."""
    out = "".join(f'<div class="card"><div class="value">{e(v)}</div><div class="label">{e(lab)}</div>'
                  f'<div class="detail">{e(d)}</div></div>' for v, lab, d in items)
    return f'<div class="cards">{out}</div>\n'


@dataclass(frozen=True)
class Col:
    """One table column: the row key it reads, its header, how a value is written, numeric or not."""

    key: str
    header: str
    fmt: Callable | None = None  # value -> text; None: str(value)
    numeric: bool = False
    title: str = ""  # the header's tooltip
    wrap: bool = False  # long text that may wrap (cells stay on one line otherwise)
    cut: int = 0  # text longer than this is cut in the cell, whole in its tooltip (0: never cut)


@dataclass(frozen=True)
class Blank:
    """A cell with no value (e.g. no OK row): rendered empty, its status as a class and the why on hover."""

    status: str
    why: str = ""


def _cell(col: Col, v) -> str:
    if isinstance(v, Blank):
        cls = "blank " + " ".join("st-" + s.lower().replace("_", "-") for s in v.status.split("/") if s)
        return f'<td class="{e(cls)}" data-status="{e(v.status)}" title="{e(v.why or v.status)}"></td>'
    if missing(v):
        return "<td></td>"
    text = col.fmt(v) if col.fmt else str(v)
    if col.numeric:
        return f'<td class="num" data-v="{e(v)}">{e(text)}</td>'
    cls = ' class="wrap"' if col.wrap else ""
    if col.cut and isinstance(v, str) and len(v) > col.cut:
        return f'<td{cls} title="{e(v)}">{e(v[:col.cut])}…</td>'
    return f"<td{cls}>{e(text)}</td>"


def _header(c: Col) -> str:
    attrs = ' scope="col"' + (' class="num"' if c.numeric else "") + (f' title="{e(c.title)}"' if c.title else "")
    return f"<th{attrs}>{e(c.header)}</th>"


def table(table_id: str, cols: list[Col], rows: list[dict], caption: str, legend: str = "") -> str:
    """A table that sorts on a header click and filters on typed text (assets/table.js); `caption` says
    what slice it shows, `legend` what its blank cells mean."""
    head = "".join(_header(c) for c in cols)
    body = "\n".join("<tr>" + "".join(_cell(c, r.get(c.key)) for c in cols) + "</tr>" for r in rows)
    legend_html = f'<p class="legend">{legend}</p>' if legend else ""
    empty = "" if rows else '<p class="note">No rows.</p>'
    return (f'<div class="table-block">\n<label class="filter">Filter rows <input type="search" '
            f'data-filter-for="{e(table_id)}" placeholder="text in any cell"></label>\n'
            f'<table id="{e(table_id)}" class="sortable">\n<caption>{e(caption)}</caption>\n'
            f"<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>\n{legend_html}{empty}</div>\n")


def blank_legend(statuses: list[str]) -> str:
    """The legend of a table's blank cells: what each status seen there means (HTML, escaped)."""
    parts = [f'<span class="swatch blank st-{e(s.lower().replace("_", "-").replace(" ", "-"))}"></span>'
             f"{e(s)}: {e(MEANING.get(s, 'no OK row'))}" for s in statuses]
    return ("Blank cell: no OK row, never a hidden one (hover for the status and reason). " + "; ".join(parts)
            if parts else "")
