"""The one statistics definition of every report: a backend's time, its spread, and when a lead is separated.

Per device × workload × backend (a *line*), over OK rows:

- a repeat's time is the median of its raw samples (`median_us`, which record.finish derives);
- the line's time is the median of its repeat medians (process repeats are the unit: a backend's
  time moves more between worker processes than within one);
- its spread is p5 / p95 / p99 of each repeat's raw samples, the extreme over repeats (smallest p5,
  largest p95 and p99): the tail of the worst repeat, not a tail averaged away.

A lead of the winner over the runner-up is *separated* when ratio = runner-up ÷ winner ≥ 1.10 and
the 2.5th percentile of a bootstrap of that ratio is above 1 (`separate`). The bootstrap depends on
what was measured:

- `paired-repeats` (≥ 3 process repeats shared by both backends): draw repeats with replacement,
  the same draws for both backends (they ran in the same processes, so drift is shared), 2000
  draws with a fixed seed; each draw's ratio is median(runner-up) ÷ median(winner) over the drawn
  repeat medians.
- `pooled-samples` (fewer shared repeats, raw samples present): the raw samples of all repeats of
  each backend pooled and resampled independently. Weaker: it sees only the within-process spread
  and reads a lead that one process happened to give as certain.
- `none`: one sample per repeat (an imported median) and fewer than 3 shared repeats; separation
  cannot be established and the lead is never separated.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd

from ..store import samples

SEPARATION_RATIO = 1.10  # a winner must be at least 10% ahead of the runner-up ...
N_BOOT = 2000  # ... and the 95% bootstrap lower bound of that ratio must exceed 1
MIN_PAIRED = 3  # fewer shared process repeats than this cannot be resampled as repeats
# A separated lead is still not called clear when either line's numbers are too noisy to carry it
# (noise_of): a repeat's median known only to worse than +-5% (95% half-width; the stopping rule's
# target is 1%), a p95 more than 3x the median (a tail that large is another process's work or the
# host's, not the kernel's spread), or repeat medians spread by more than a CV of 10% (on the H200,
# device-bound rows agree within 1%; host-bound eager rows spread 20-50% between worker processes).
NOISY_REL_ERR = 0.05
NOISY_TAIL = 3.0
NOISY_REPEAT_CV = 0.10
SEED = 0
QUANTILES = (0.05, 0.95, 0.99)

PAIRED = "paired-repeats"
REPEATS = "repeats"  # two independent sweeps (compare): each side's repeats resampled on their own
POOLED = "pooled-samples"
NONE = "none"
METHOD_NOTE = {
    PAIRED: "bootstrap of process repeats, paired across the two backends",
    REPEATS: "bootstrap of each side's process repeats",
    POOLED: "fewer than 3 shared repeats: bootstrap of pooled raw samples (weaker: blind to the "
            "spread between processes)",
    NONE: "one sample per repeat and fewer than 3 repeats: separation cannot be established",
}
# a process repeat of one sweep: the rows of two backends with equal values here ran in the same
# set of worker processes
UNIT_COLS = ("tag", "repeat")


@dataclass(frozen=True)
class Separation:
    ratio: float  # runner-up time ÷ winner time (≥ 1)
    lower: float | None  # 2.5th percentile of the bootstrap of that ratio; None without a bootstrap
    method: str  # PAIRED, POOLED or NONE
    separated: bool


class Pooled:
    """A line's raw samples, every repeat's pooled, held as its rows' arrays: a bootstrap of pooled samples
    (fewer than 3 shared repeats) reads them, most lines never do, so they are joined only when read."""

    __slots__ = ("parts", "size")

    def __init__(self, parts):
        self.parts = tuple(parts)
        self.size = int(sum(len(p) for p in self.parts))

    def __len__(self) -> int:
        return self.size

    def __array__(self, dtype=None, copy=None):
        a = np.concatenate(self.parts) if self.parts else np.empty(0)
        return a if dtype is None else a.astype(dtype, copy=False)

    def __iter__(self):
        return iter(np.asarray(self).tolist())


@dataclass(frozen=True)
class Evidence:
    """What a line holds for a bootstrap: its time, its repeat medians by unit, its pooled raw samples."""

    time: float
    units: dict  # "tag#repeat" -> median of that process repeat's repeat medians
    samples: np.ndarray | Pooled  # raw samples of all repeats (size and values)
    repeats: int


def json_list(v) -> list:
    """A JSON-list cell (raw samples, kernel names) as a list: stored JSON text, a list after an import,
    or nothing: NULL reads as None, or as NaN once pandas has aligned the column with rows that hold
    lists (a store resumed from a slimmed one mixes both)."""
    if isinstance(v, str):
        return json.loads(v)
    if isinstance(v, np.ndarray):  # samples as store/sources.py reads them
        return v.tolist()
    return [] if v is None or isinstance(v, float) else list(v)


def json_dict(v) -> dict:
    """A JSON-object cell (a row's phases) as a dict: stored JSON text, a dict after an import, or
    nothing (None, or NaN in a frame) as an empty dict."""
    if isinstance(v, str):
        return json.loads(v)
    return v if isinstance(v, dict) else {}


def sample_arrays(col) -> list[np.ndarray]:
    """Each cell of a samples column as a float64 array (empty where it holds none): the arrays
    store/sources.py reads as they are, JSON text or lists (frames built by hand, imports) parsed."""
    out = []
    for v in col:
        if isinstance(v, np.ndarray):
            out.append(v)
        else:
            out.append(np.asarray(json_list(v), dtype=float).reshape(-1))
    return out


def row_quantiles(arrays: list[np.ndarray], qs=QUANTILES) -> np.ndarray:
    """segment_quantiles of each array on its own (one row per array, one column per q; NaN for an
    empty one): the same interpolation, one sort per row instead of a sort of every value at once. The
    store computes each row's at insert with this same function (store/samples.py)."""
    return samples.row_quantiles(arrays, qs)


def flat_samples(col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Every raw sample of a column of JSON lists (stored text, or lists after an import; a missing
    cell holds none), flattened in row order, and the number each row holds."""
    texts = [s.strip()[1:-1] if isinstance(s, str) else ",".join(map(repr, json_list(s))) for s in col]
    counts = np.fromiter((0 if not t.strip() else t.count(",") + 1 for t in texts), dtype=np.int64,
                         count=len(texts))
    joined = ",".join(t for t in texts if t.strip())
    # one parse of the joined text: parsing 75,000 lists one by one costs as long as the rest of analyze
    values = np.fromstring(joined, sep=",") if joined else np.empty(0)
    if values.size != counts.sum():  # a value fromstring cannot read (NaN spelled by JSON)
        values = np.fromiter((float(x) for s in col for x in json_list(s)), dtype=float)
    return values, counts


def segment_quantiles(values: np.ndarray, counts: np.ndarray, qs=QUANTILES) -> np.ndarray:
    """Quantiles (linear interpolation, as numpy.percentile) of consecutive segments of `values`
    holding `counts` values each: one row per segment, one column per q; NaN for an empty segment."""
    n = len(counts)
    out = np.full((n, len(qs)), np.nan)
    if not n or not values.size:
        return out
    seg = np.repeat(np.arange(n), counts)
    s = values[np.lexsort((values, seg))]
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    has = counts > 0
    for j, q in enumerate(qs):
        pos = q * (counts[has] - 1)
        lo = np.floor(pos).astype(np.int64)
        hi = np.minimum(lo + 1, counts[has] - 1)
        a, b = s[starts[has] + lo], s[starts[has] + hi]
        out[has, j] = a + (pos - lo) * (b - a)
    return out


@lru_cache(maxsize=64)
def _draws(k: int, seed: int, n_boot: int = N_BOOT) -> np.ndarray:
    # the same draws for every line with k repeats: each bootstrap is seeded, so a report is reproducible
    return np.random.default_rng(seed).integers(0, k, (n_boot, k))


def pooled_lower_bound(fast, slow, seed: int = SEED, n_boot: int = N_BOOT) -> float | None:
    """2.5th percentile of the bootstrap of median(slow) ÷ median(fast), each backend's raw samples
    (all repeats pooled) resampled independently; None with fewer than 2 samples on a side."""
    if len(fast) < 2 or len(slow) < 2:
        return None
    rng = np.random.default_rng(seed)
    ma = resampled_medians(np.asarray(fast, dtype=float), n_boot, rng)
    mb = resampled_medians(np.asarray(slow, dtype=float), n_boot, rng)
    return float(np.percentile(mb / ma, 2.5))


def resampled_medians(values: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """Medians of n_boot resamples (with replacement, of the same size) of `values`, drawn exactly but
    without building the resamples: with the values sorted, a resample's median sits at the middle
    order statistic(s) of n uniform draws, and the k-th smallest of n uniforms is Beta(k, n + 1 - k);
    the next one is that plus the rest of the interval times the least of the other n - k. One
    resample of 600 samples per draw cost most of analyze's time on a large store."""
    a = np.sort(values)
    n = a.size
    k = (n + 1) // 2
    u = rng.beta(k, n + 1 - k, n_boot)
    lo = a[np.minimum((u * n).astype(np.int64), n - 1)]
    if n % 2:
        return lo
    u_next = u + (1.0 - u) * rng.beta(1, n - k, n_boot)
    return (lo + a[np.minimum((u_next * n).astype(np.int64), n - 1)]) / 2.0


def paired_lower_bounds(fast: np.ndarray, slow: np.ndarray, seed: int = SEED) -> np.ndarray:
    """Per row of two (lines × k) matrices of repeat medians, paired by column: the 2.5th percentile
    of the bootstrap of median(slow) ÷ median(fast) over the same drawn repeats."""
    idx = _draws(fast.shape[1], seed)
    out = np.empty(len(fast))
    for i in range(0, len(fast), 256):  # (256, 2000, k) at a time keeps memory small
        f = np.median(fast[i:i + 256][:, idx], axis=2)
        s = np.median(slow[i:i + 256][:, idx], axis=2)
        out[i:i + 256] = np.percentile(s / f, 2.5, axis=1)
    return out


def _method(fast: Evidence, slow: Evidence, shared: int) -> str:
    if shared >= MIN_PAIRED:
        return PAIRED
    # raw samples beyond one per repeat: there is a within-process spread to resample
    if fast.samples.size >= 2 and slow.samples.size >= 2 and (fast.samples.size > fast.repeats
                                                              or slow.samples.size > slow.repeats):
        return POOLED
    return NONE


def separate_many(pairs: list[tuple[Evidence, Evidence]], seed: int = SEED) -> list[Separation]:
    """`separate` for many (winner, runner-up) pairs at once; lines with the same number of shared
    repeats are bootstrapped together."""
    out: list[Separation | None] = [None] * len(pairs)
    by_k: dict[int, list[tuple[int, list, list]]] = {}
    for i, (fast, slow) in enumerate(pairs):
        shared = [u for u in fast.units if u in slow.units]
        method = _method(fast, slow, len(shared))
        ratio = slow.time / fast.time
        if method == PAIRED:
            by_k.setdefault(len(shared), []).append((i, [fast.units[u] for u in shared],
                                                     [slow.units[u] for u in shared]))
        else:
            lower = pooled_lower_bound(fast.samples, slow.samples, seed) if method == POOLED else None
            out[i] = _verdict(ratio, lower, method)
    for k, items in by_k.items():
        lows = paired_lower_bounds(np.array([f for _, f, _ in items]), np.array([s for _, _, s in items]), seed)
        for (i, _, _), lower in zip(items, lows):
            fast, slow = pairs[i]
            out[i] = _verdict(slow.time / fast.time, float(lower), PAIRED)
    return out  # type: ignore[return-value]


def _verdict(ratio: float, lower: float | None, method: str) -> Separation:
    return Separation(float(ratio), lower, method,
                      bool(ratio >= SEPARATION_RATIO and lower is not None and lower > 1.0))


def separate(fast: Evidence, slow: Evidence, seed: int = SEED) -> Separation:
    """Whether the faster line's lead over the slower one is separated (see the module's docstring)."""
    return separate_many([(fast, slow)], seed)[0]


def ratio_interval(base: Evidence, new: Evidence, seed: int = SEED) -> tuple[float | None, float | None, str]:
    """95% bootstrap interval of new ÷ base for two independent measurements of one line (two
    sweeps): repeats resampled on each side when both have ≥ 3, else pooled raw samples, else none."""
    ku, kv = len(base.units), len(new.units)
    if ku >= MIN_PAIRED and kv >= MIN_PAIRED:
        a = np.array(list(base.units.values()))[_draws(ku, seed)]
        b = np.array(list(new.units.values()))[_draws(kv, seed + 1)]
        r = np.median(b, axis=1) / np.median(a, axis=1)
        method = REPEATS
    elif _method(base, new, 0) == POOLED:
        rng = np.random.default_rng(seed)
        r = resampled_medians(new.samples, N_BOOT, rng) / resampled_medians(base.samples, N_BOOT, rng)
        method = POOLED
    else:
        return None, None, NONE
    lo, hi = np.percentile(r, [2.5, 97.5])
    return float(lo), float(hi), method


def noise_of(line) -> str | None:
    """Why a line's time is too noisy to decide a contest, or None (see NOISY_*): a line is a dict or
    pandas row of per_backend with median_us, p95_us, units (repeat medians) and rel_err_max."""
    rel = line.get("rel_err_max")
    if rel is not None and rel == rel and rel > NOISY_REL_ERR:
        return f"{line['backend']}: median known to ±{100 * rel:.0f}% only"
    if line.get("p95_us") and line["median_us"] and line["p95_us"] > NOISY_TAIL * line["median_us"]:
        return f"{line['backend']}: p95 {line['p95_us'] / line['median_us']:.1f}x the median"
    units = [v for v in (line.get("units") or {}).values()]
    if len(units) >= 2:
        cv = float(np.std(units, ddof=1) / np.mean(units)) if np.mean(units) > 0 else 0.0
        if cv > NOISY_REPEAT_CV:
            return f"{line['backend']}: repeats disagree (CV {100 * cv:.0f}%)"
    return None
