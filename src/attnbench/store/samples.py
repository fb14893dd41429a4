"""Raw samples as numbers: the JSON lists of samples_us parsed, and the samples table (schema 11) that holds each
row's as float64 bytes with the per-row figures analysis reads, written once at insert."""
from __future__ import annotations

import io
import json

import numpy as np

SUMMARY_QUANTILES = (0.05, 0.5, 0.95, 0.99)  # what analysis.frames.per_backend reads of each row
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


# One row per attempt row holding samples, keyed by its attempt_key: the samples as float64 bytes (numpy tobytes,
# little-endian), their count and the quantiles of SUMMARY_QUANTILES, computed at insert so a reader needs neither
# the JSON text (~18 bytes a sample) nor a sort per row. samples_us stays the record (exports read it).
SAMPLES_DDL = ("CREATE TABLE IF NOT EXISTS samples (attempt_key TEXT PRIMARY KEY, n INTEGER NOT NULL, q05 REAL, "
               "q50 REAL, q95 REAL, q99 REAL, data BLOB NOT NULL)")
SUMMARY = ("n", "q05", "q50", "q95", "q99")
# their names in the attempts frame store/sources.py reads (NaN for a row read from its JSON text)
FRAME_COLUMNS = ("samples_n", "samples_p5", "samples_p50", "samples_p95", "samples_p99")


def row_quantiles(arrays: list[np.ndarray], qs=SUMMARY_QUANTILES) -> np.ndarray:
    """Quantiles (linear interpolation, as numpy.percentile) of each array on its own: one row per array, one
    column per q; NaN for an empty one. One definition for insert and read: the same arithmetic, the same bits."""
    n = len(arrays)
    counts = np.fromiter((a.size for a in arrays), dtype=np.int64, count=n)
    out = np.full((n, len(qs)), np.nan)
    has = counts > 0
    if not has.any():
        return out
    c = counts[has]
    pos = np.array([q * (c - 1) for q in qs]).T  # (rows, q)
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, (c - 1)[:, None])
    a, b = np.empty(lo.shape), np.empty(lo.shape)
    for i, arr in enumerate(a_ for a_, h in zip(arrays, has) if h):
        s = np.sort(arr)
        a[i], b[i] = s[lo[i]], s[hi[i]]
    out[has] = a + (pos - lo) * (b - a)
    return out


def as_array(value) -> np.ndarray | None:
    """A row's samples_us (a list, JSON text, or None) as a 1-D float64 array; None when it holds none or is
    not a flat list of numbers (such a row gets no samples row: readers parse its text as before)."""
    if value is None:
        return None
    try:
        a = np.asarray(json.loads(value) if isinstance(value, (str, bytes)) else value, dtype=np.float64)
    except (ValueError, TypeError):
        return None
    return a if a.ndim == 1 else None


def summary_rows(keys, arrays) -> list[tuple]:
    """The samples-table rows of (attempt_key, array) pairs (arrays None are skipped)."""
    pairs = [(k, a) for k, a in zip(keys, arrays) if a is not None]
    q = row_quantiles([a for _, a in pairs])
    return [(k, int(a.size), *(None if v != v else float(v) for v in q[i]), a.astype("<f8", copy=False).tobytes())
            for i, (k, a) in enumerate(pairs)]


def write(con, keys, arrays) -> None:
    """Add the samples rows of these attempt keys (inside the caller's transaction); a key that has one keeps it."""
    con.executemany(f"INSERT OR IGNORE INTO samples (attempt_key, {', '.join(SUMMARY)}, data) VALUES (?,?,?,?,?,?,?)",
                    summary_rows(keys, arrays))


def fill(con) -> int:
    """Fill the samples table from samples_us for every row that lacks its samples row (the migration of a
    store written before schema 11); returns how many were added."""
    cur = con.execute("SELECT a.attempt_key, a.samples_us FROM attempts a WHERE a.samples_us IS NOT NULL AND "
                      "NOT EXISTS (SELECT 1 FROM samples s WHERE s.attempt_key = a.attempt_key) ORDER BY a.rowid")
    added = 0
    while rows := cur.fetchmany(CHUNK_ROWS):
        try:
            arrays = parse_lists(r[1] for r in rows)
        except ValueError:  # one row the chunk reader refuses (a nested list): row by row, such rows left out
            arrays = [as_array(r[1]) for r in rows]
        write(con, [r[0] for r in rows], arrays)
        added += len(rows)
    return added


def from_bytes(data: bytes) -> np.ndarray:
    """A samples row's data as its float64 array (read-only: a view of the bytes)."""
    return np.frombuffer(data, dtype="<f8")


class Stored:
    """One row's samples left in its store until read: its count is known (the samples table's n), the values are
    fetched by attempt key when an array is asked for (a pooled bootstrap, a sum), most never are."""

    __slots__ = ("reader", "key", "size")

    def __init__(self, reader: "Reader", key: str, size: int):
        self.reader, self.key, self.size = reader, key, size

    def __len__(self) -> int:
        return self.size

    def __array__(self, dtype=None, copy=None):
        a = self.reader.get(self.key)
        return a if dtype is None else a.astype(dtype, copy=False)

    def __iter__(self):
        return iter(np.asarray(self).tolist())

    def __getitem__(self, i):
        return np.asarray(self)[i]

    def tolist(self) -> list:
        return np.asarray(self).tolist()


class Reader:
    """Reads samples rows of one store file by attempt key, opening it read-only on the first read."""

    def __init__(self, path, open_readonly):
        self.path, self._open, self._con = path, open_readonly, None

    def get(self, key: str) -> np.ndarray:
        if self._con is None:
            self._con = self._open(self.path)
        row = self._con.execute("SELECT data FROM samples WHERE attempt_key = ?", (key,)).fetchone()
        if row is None:
            raise ValueError(f"{self.path}: the samples of attempt {key} are gone (the store changed while read)")
        return from_bytes(row[0])
