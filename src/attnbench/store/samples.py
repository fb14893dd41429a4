"""Raw samples read as numbers: each row's JSON list of a store's samples_us column as a float64 array."""
from __future__ import annotations

import io
import json

import numpy as np

CHUNK_ROWS = 2048  # rows parsed at once: ~50 MB of text for H200 rows of ~1,300 samples, bounded memory


def parse_lists(texts) -> list[np.ndarray | None]:
    """Each JSON-list text as a float64 array (None for NULL), exactly the numbers json.loads reads.
    The lists of many rows are parsed as one column by pyarrow's CSV reader, whose decimal-to-double
    conversion is correctly rounded as Python's float() is: per-row json.loads or numpy's text parser
    cost ~2 s per million samples, a store of real rows holds tens of millions. Text that reader cannot
    take (NaN or Infinity as JSON writes them, odd spacing) is read by json.loads, row by row."""
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
    return np.asarray(v, dtype=float).reshape(-1)


def _fast(chunk: list) -> list[np.ndarray | None]:
    import pyarrow as pa
    import pyarrow.csv as pcsv

    inner, counts = [], np.zeros(len(chunk), dtype=np.int64)
    for i, t in enumerate(chunk):
        if t is None:
            counts[i] = -1
            continue
        if not isinstance(t, str):
            raise TypeError("not text")
        s = t.strip()
        if len(s) < 2 or s[0] != "[" or s[-1] != "]":
            raise ValueError("not a JSON list")
        body = s[1:-1]
        if body.strip():
            inner.append(body)
            counts[i] = body.count(",") + 1
    n = int(counts[counts > 0].sum())
    values = np.empty(0)
    if n:
        text = "\n".join(inner).replace(",", "\n").encode()
        opts = pcsv.ConvertOptions(column_types={"v": pa.float64()}, null_values=[], strings_can_be_null=False)
        # ArrowInvalid (a ValueError) on anything that is not a plain decimal number: the exact path reads it
        col = pcsv.read_csv(io.BytesIO(text), read_options=pcsv.ReadOptions(column_names=["v"]),
                            parse_options=pcsv.ParseOptions(ignore_empty_lines=False),
                            convert_options=opts).column("v")
        if len(col) != n or col.null_count:
            raise ValueError("count mismatch")
        values = col.to_numpy()
    out: list[np.ndarray | None] = []
    start = 0
    for c in counts:
        if c < 0:
            out.append(None)
        else:
            out.append(values[start:start + c])
            start += c
    return out
