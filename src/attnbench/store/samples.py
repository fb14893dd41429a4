"""Raw samples read as numbers: each row's JSON list of a store's samples_us column as a float64 array."""
from __future__ import annotations

import io
import json

import numpy as np

CHUNK_ROWS = 512  # rows parsed at once: ~12 MB of text for H200 rows of ~1,300 samples, a few copies of it live


def parse_lists(texts) -> list[np.ndarray | None]:
    """Each JSON-list text (str or UTF-8 bytes) as a float64 array (None for NULL), exactly the numbers
    json.loads reads. The lists of many rows are parsed as one column by pyarrow's CSV reader, whose
    decimal-to-double conversion is correctly rounded as Python's float() is: per-row json.loads or
    numpy's text parser cost ~2 s per million samples, a store of real rows holds tens of millions.
    Text that reader cannot take (NaN or Infinity as JSON writes them, odd spacing) is read by
    json.loads, row by row."""
    texts = list(texts)
    out: list[np.ndarray | None] = [None] * len(texts)
    for lo in range(0, len(texts), CHUNK_ROWS):
        chunk = texts[lo:lo + CHUNK_ROWS]
        try:
            parsed = _fast(chunk)
        except (ValueError, TypeError):
            parsed = [_exact(t) for t in chunk]
        out[lo:lo + len(chunk)] = parsed
    return out


def _exact(text) -> np.ndarray | None:
    if text is None or (isinstance(text, float) and text != text):
        return None
    v = json.loads(text) if isinstance(text, (str, bytes)) else text
    a = np.asarray(v, dtype=float)
    if a.ndim != 1:
        raise ValueError(f"raw samples are a list of numbers, not {str(text)[:40]!r}")
    return a


def _fast(chunk: list) -> list[np.ndarray | None]:
    import pyarrow as pa
    import pyarrow.csv as pcsv

    rows = [t.encode() if isinstance(t, str) else t for t in chunk]
    present = [r for r in rows if r is not None]
    if any(not isinstance(r, bytes) or r[:1] != b"[" or r[-1:] != b"]" for r in present):
        raise ValueError("not a JSON list")
    # one line per list, its values one per line after it: "[a, b]\n[c]" -> "a\n b\n\nc" (a blank line ends a
    # list, so an empty one is a blank line too); a bracket anywhere else (a nested list) is refused below
    text = b"\n".join(present)
    buf = np.frombuffer(text, dtype=np.uint8)
    ends = np.append(np.flatnonzero(buf == ord("\n")), buf.size)  # one per present row
    commas = np.searchsorted(np.flatnonzero(buf == ord(",")), ends)  # commas before each row's end
    counts_present = np.diff(commas, prepend=0) + 1
    empty = np.array([len(r) == 2 for r in present], dtype=bool)  # "[]"
    counts_present[empty] = 0
    n = int(counts_present.sum())
    values = np.empty(0)
    if n:
        body = text.translate(None, b"[]")
        if len(text) - len(body) != 2 * len(present):  # a bracket inside a list: nested, not samples
            raise ValueError("not a flat JSON list")
        body = body.replace(b",", b"\n")
        opts = pcsv.ConvertOptions(column_types={"v": pa.float64()}, null_values=[], strings_can_be_null=False)
        # ArrowInvalid (a ValueError) on anything that is not a plain decimal number: the exact path reads it
        col = pcsv.read_csv(io.BytesIO(body), read_options=pcsv.ReadOptions(column_names=["v"]),
                            convert_options=opts).column("v")  # blank lines (empty lists) skipped
        if len(col) != n or col.null_count:
            raise ValueError("count mismatch")
        values = col.to_numpy()
    out: list[np.ndarray | None] = []
    it = iter(counts_present.tolist())
    start = 0
    for r in rows:
        if r is None:
            out.append(None)
            continue
        c = next(it)
        out.append(values[start:start + c])
        start += c
    return out
