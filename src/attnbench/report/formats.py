"""show's results as data: CSV, Markdown or JSON of the same frame the table renders."""
from __future__ import annotations

import json

import pandas as pd

FORMATS = ("table", "csv", "md", "json")


def as_text(frame: pd.DataFrame, fmt: str) -> str:
    """The frame in one of FORMATS but "table" (the rich rendering is terminal.py's)."""
    frame = frame.drop(columns=[c for c in ("samples",) if c in frame.columns])
    if fmt == "csv":
        return frame.to_csv(index=False)
    if fmt == "json":
        return json.dumps(json.loads(frame.to_json(orient="records")), indent=1) + "\n"
    if fmt == "md":
        cols = list(frame.columns)
        lines = ["| " + " | ".join(cols) + " |", "| " + " | ".join("---" for _ in cols) + " |"]
        for row in frame.itertuples(index=False):
            lines.append("| " + " | ".join(_md(v) for v in row) + " |")
        return "\n".join(lines) + "\n"
    raise ValueError(f"unknown format {fmt!r}")


def _md(v) -> str:
    if v is None or (isinstance(v, float) and pd.isna(v)):
        return ""
    text = f"{v:.4g}" if isinstance(v, float) else str(v)
    return text.replace("|", "\\|").replace("\n", " ")
