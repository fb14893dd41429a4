"""Build the static site: every page, figure and asset into a fresh directory, which then replaces --out whole."""
from __future__ import annotations

import logging
import os
import shutil
import time
from importlib import resources
from pathlib import Path

import matplotlib

from ... import __version__
from . import pages
from .context import Context
from .data import SiteData
from .figure_files import FigureFiles, drawing_workers
from .figures import STYLE
from .markup import e, page
from .pages import methodology

log = logging.getLogger(__name__)
MARKER = ".attnbench-report"  # a directory holding this file is a site attnbench may replace
ASSETS = ("style.css", "table.js", "favicon.svg")


class OutError(ValueError):
    """--out cannot take a site (a file, a foreign directory, a missing parent)."""


def check_out(out: Path) -> None:
    """Refuse an --out that is a file, a non-empty directory not made by this command, or under a missing
    directory, before anything is read or written."""
    if out.exists() and not out.is_dir():
        raise OutError(f"--out {out} is a file; give a directory")
    if not out.parent.is_dir():
        raise OutError(f"directory of --out does not exist: {out.parent}")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise OutError(f"--out {out} is a directory that holds other files; give a new or empty directory, or "
                       "one an earlier attnbench report wrote")


def _footer(data: SiteData) -> str:
    stores = ", ".join(f"{label} ({p.name})" for label, p in data.paths.items())
    return (f"Built by attnbench {e(__version__)} on {e(time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()))} from "
            f"{e(stores)}. A static site: every asset is in this folder and nothing is fetched from the network.")


def _copy_assets(root: Path) -> None:
    (root / "assets").mkdir()
    src = resources.files(__package__) / "assets"
    for name in ASSETS:
        (root / "assets" / name).write_bytes((src / name).read_bytes())


def build(data: SiteData, root: Path, title: str, pdf: bool = False, workers: int | None = None) -> dict:
    """Write every page of the site (pages.PAGES, those that apply) into the empty directory `root`, each figure's
    PDF too when `pdf`; figures drawn by `workers` other processes (None: drawing_workers()); returns counts."""
    footer = _footer(data)
    figs = FigureFiles(root, [f"{label}={p}" for label, p in data.paths.items()], pdf,
                       workers=drawing_workers() if workers is None else workers, style=STYLE)
    ctx = Context(data, figs)
    _copy_assets(root)
    done = False
    try:
        with matplotlib.rc_context(STYLE):
            nav = pages.nav(data)
            links = pages.links(nav)
            ctx.docs = methodology.copy_docs(root, title, footer, links)
            for p, file in nav:
                t0 = time.perf_counter()
                html = page(file, p.TITLE, p.body(ctx), title, footer, pages=links)
                (root / file).write_text(html, encoding="utf-8")
                log.info("%s: %.1f s", file, time.perf_counter() - t0)
        done = True
    finally:
        figs.close(wait=done)  # every figure on disk before the site is put in place
    (root / MARKER).write_text(f"attnbench {__version__}\n")
    return {"pages": len(nav) + len(ctx.docs), "figures": figs.count}


def write(data: SiteData, out: Path, title: str, pdf: bool = False) -> dict:
    """Build the site next to `out` and put it in place at the end: a failure leaves `out` as it was and
    no partial directory behind."""
    check_out(out)
    tmp = out.with_name(f".{out.name}.partial-{os.getpid()}")
    old = out.with_name(f".{out.name}.old-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        counts = build(data, tmp, title, pdf)
        if out.exists():
            out.rename(old)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old.exists() and not out.exists():
            old.rename(out)
        raise
    shutil.rmtree(old, ignore_errors=True)
    return counts
