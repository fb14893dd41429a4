"""`attnbench report`: the offline HTML site and publication figures of any set of stores (report/html)."""
from __future__ import annotations

import argparse
from pathlib import Path

from .. import console
from ...analysis.sides import BY_CHOICES
from ..usage import UsageError

NAME = "report"
HELP = "an offline HTML site and publication figures (SVG, PDF with --pdf, data) of stores"
DESCRIPTION = ("Build a static site from one or more stores or exports: each device and\n"
               "build with its ceilings, attempts per status, prefill/training and decode\n"
               "figures, portability across the stores, and the correctness, dispatch and\n"
               "outcome tables. It renders what the analysis computes; nothing is fetched.")
EPILOG = """\
STORE is an attnbench SQLite store or an export of one (.jsonl, .csv,
.parquet, optionally .gz, as `attnbench export` writes them). An export is
read through the checks of `attnbench import` into a temporary store, with
the runs export beside it (NAME.runs.jsonl) when there is one: provenance
and measured ceilings come from it. LABEL=STORE names a store; the default
label is the file's name before its first dot.

The site (DIR/index.html) opens from disk with no network: overview, prefill
and training, decode, portability (two or more stores, or the sides of
--by), correctness, dispatch and outcome tables, methodology. --by
device_name compares the device models of the stores (one store holding
several GPUs: an import of another study, a run over mixed GPUs) on the
portability page as `attnbench analyze --by` does; the other pages stay
per store. Each figure is an SVG in the page
with its data (CSV) and its caption (JSON) beside it in DIR/figures, and
with --pdf a PDF of it too.
DIR must be new, empty, or a site this command wrote before; it is replaced
whole, once the new site is complete."""
FORMATTER = argparse.RawDescriptionHelpFormatter


def add_arguments(h) -> None:
    h.add_argument("stores", nargs="+", metavar="STORE", help="an attnbench store or export, or LABEL=STORE")
    h.add_argument("--out", required=True, metavar="DIR", help="the directory to write the site to")
    h.add_argument("--baseline", metavar="BACKEND",
                   help="the backend speedup heatmaps divide by (default: sdpa-flash where it ran OK, else the "
                        "backend with the most OK rows)")
    h.add_argument("--title", help="the site's title (default: the store labels)")
    h.add_argument("--pdf", action="store_true",
                   help="also write each figure as a PDF (for papers) beside its SVG; a second draw of every figure")
    h.add_argument("--by", default="label", choices=BY_CHOICES, metavar="COLUMN",
                   help="the sides the portability page compares, as analyze --by: " + ", ".join(BY_CHOICES)
                        + " (default: label, one per store)")


def run(args) -> int:
    import logging

    logging.getLogger("fontTools").setLevel(max(logging.WARNING, logging.getLogger().level))  # PDF font subsetting
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UsageError("attnbench report draws with matplotlib: pip install 'attnbench[report]'") from None
    from ...analysis import analyze
    from ...report.html import site
    from ...report.html.data import BY, SiteData, default_baseline
    from ...store import sources
    from ...store.db import StoreError
    from ...store.io import refuse_to_overwrite_a_store

    out = Path(args.out)
    try:
        site.check_out(out)  # before any store is read
        if not out.is_dir():
            refuse_to_overwrite_a_store(None, out, "--out")  # not a store's -wal, -shm or -journal name
        _can_write_in(out.parent)
    except (site.OutError, StoreError) as e:
        raise UsageError(str(e)) from None
    data = sources.load(args.stores)
    df = data.attempts
    if df.empty and data.models.empty:
        raise UsageError("the stores hold no attempts and no model rows")
    baseline = None  # model rows only (`attnbench model` alone): the whole-workload page and the methodology
    if not df.empty:
        backends = sorted(set(df.loc[df["status"] == "OK", "backend"].astype(str)))
        if args.baseline is not None and args.baseline not in backends:
            raise UsageError(f"--baseline {args.baseline}: no OK attempt of that backend in the stores "
                             f"(backends with OK rows: {', '.join(backends) or 'none'})")
        baseline = args.baseline or default_baseline(df)
        if baseline is None:
            raise UsageError("no attempt in the stores ended OK: there is nothing to draw")
    title = args.title or "attnbench report: " + ", ".join(data.runs)
    by_label = analyze.of(data, by=BY)
    # the portability page's sides when --by names another than the store (the other pages stay per store)
    by_analysis = analyze.of(data, by=args.by) if args.by != BY and not df.empty else None
    try:
        counts = site.write(SiteData(data, by_label, baseline, by_analysis), out, title, pdf=args.pdf)
    except OSError as e:  # a full disk: site.write put nothing in place and removed its partial directory
        raise UsageError(f"cannot write the site to {out}: {e.strerror or e}; {out} is as it was") from None
    what = f"speedups are over {baseline}" if baseline else "the stores hold model rows only"
    console.err.print(f"wrote {counts['pages']} pages and {counts['figures']} figures to {out} "
                       f"(open {out / 'index.html'}); {what}", markup=False)
    return 0


def _can_write_in(folder: Path) -> None:
    """A read-only place is refused before the stores are read and the figures drawn, not after."""
    import tempfile

    try:
        tempfile.TemporaryDirectory(dir=folder, prefix=".attnbench-probe-").cleanup()
    except OSError as e:
        raise UsageError(f"cannot write in {folder}: {e.strerror or e}") from None
