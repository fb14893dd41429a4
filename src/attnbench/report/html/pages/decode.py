"""The decode page: per slice, step time and KV bandwidth against the cache length (performance.py)."""
from __future__ import annotations

from ..context import Context
from ..performance import page_body

FILE, TITLE = "decode.html", "Decode"


def applies(data) -> bool:
    return not data.df.empty


def body(ctx: Context) -> str:
    return page_body(ctx, decode=True)
