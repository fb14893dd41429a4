"""The prefill-and-training page: per slice, time and throughput against length, and speedups (performance.py)."""
from __future__ import annotations

from ..context import Context
from ..performance import page_body

FILE, TITLE = "prefill.html", "Prefill and training"


def applies(data) -> bool:
    return not data.df.empty


def body(ctx: Context) -> str:
    return page_body(ctx, decode=False)
