"""Other harnesses' published attention results, read and mapped to attnbench workloads (`attnbench referee`)."""
from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import pandas as pd

from . import cudnn_frontend, flash_attn, tritonbench
from .published import Published, ReadError, Sheet

FORMATS = ("cudnn-frontend training CSV", "cudnn-frontend inference CSV", "FlashAttention benchmark output",
           "tritonbench flash_attention CSV")
__all__ = ["FORMATS", "Published", "ReadError", "Sheet", "read", "parse_assume"]


def parse_assume(items: list[str] | None) -> dict:
    """--assume KEY=V[,KEY=V] (repeatable) as a dict; ReadError for an item without '='."""
    out = {}
    for item in items or ():
        for part in item.split(","):
            key, sep, value = part.partition("=")
            if not sep or not key.strip() or not value.strip():
                raise ReadError(f"--assume {part!r}: use KEY=VALUE")
            out[key.strip()] = value.strip()
    return out


def read(path: Path, assume: dict | None = None, gpu: str | None = None) -> Sheet:
    """The published rows of a file in any of FORMATS, told apart by their content; `gpu` names the GPU of the
    formats that do not say. ReadError (one line) for a file none of them reads."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ReadError(f"{path} is not text: the referee reads {', '.join(FORMATS)}") from None
    except OSError as e:
        raise ReadError(f"cannot read {path}: {e.strerror or e}") from None
    sheet = _parse(text, path, assume or {})
    if gpu:
        sheet = Sheet(sheet.fmt, [r if r.gpu else dataclasses.replace(r, gpu=gpu) for r in sheet.rows],
                      [n.replace(", GPU not stated (--gpu)", f", GPU {gpu} (--gpu)") for n in sheet.notes])
    return sheet


def _parse(text: str, path: Path, assume: dict) -> Sheet:
    if not text.strip():
        raise ReadError(f"{path} is empty")
    if tritonbench.looks_like(text):
        return tritonbench.read(text, assume)
    if flash_attn.looks_like(text):
        return flash_attn.read(text, assume)
    try:
        frame = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as e:
        raise ReadError(f"{path} is none of {', '.join(FORMATS)} ({str(e).splitlines()[0]})") from None
    if assume:
        raise ReadError(f"--assume: a cudnn-frontend CSV says everything itself ({', '.join(sorted(assume))} given)")
    if cudnn_frontend.is_training(frame.columns):
        return cudnn_frontend.training(frame)
    if cudnn_frontend.is_per_pass(frame.columns):
        return cudnn_frontend.per_pass(frame)
    if cudnn_frontend.is_legacy(frame.columns):
        return cudnn_frontend.legacy(frame, Path(path).name)
    if cudnn_frontend.is_inference(frame.columns):
        return cudnn_frontend.inference(frame)
    raise ReadError(f"{path} is none of {', '.join(FORMATS)} (its columns: {', '.join(map(str, frame.columns[:6]))}"
                    f"{', ...' if len(frame.columns) > 6 else ''})")
