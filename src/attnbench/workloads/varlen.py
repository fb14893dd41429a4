"""Packed variable-length batches (`Workload.lengths`): each sequence's length, drawn deterministically
from the workload, and the packed geometry the tensors have.

`q_len` is the longest sequence (the bound a padded batch would be sized to): `fixed` gives every
sequence q_len tokens; `uniform` draws each length uniformly from 1..q_len (mean ≈ q_len/2);
`longtail` draws q_len·u³ (u uniform, mean ≈ q_len/4: mostly short sequences, a few long). In both
the last sequence is q_len long, so the longest is exactly q_len. The draw is seeded by (lengths,
batch, q_len) alone, not by the run's --seed nor by the other axes: every run, backend and store sees
the same lengths, and workloads that differ only in dtype, mask or layout pack the same batch.
A packed batch is one tensor of T = Σ lengths tokens: Q (1, Hq, T, D) in BHND terms, sequence b at
tokens cu_seqlens[b] .. cu_seqlens[b+1]-1; queries attend only keys of their own sequence."""
from __future__ import annotations

import hashlib
import random
from functools import lru_cache

LENGTHS = ("fixed", "uniform", "longtail")


def packed(w) -> bool:
    return w.lengths != "fixed"


@lru_cache(maxsize=256)
def _draw(kind: str, batch: int, q_len: int) -> tuple[int, ...]:
    if kind == "fixed":
        return (q_len,) * batch
    rng = random.Random(int(hashlib.sha1(f"lengths:{kind}:{batch}:{q_len}".encode()).hexdigest()[:12], 16))
    if kind == "uniform":
        out = [rng.randint(1, q_len) for _ in range(batch - 1)]
    else:  # longtail
        out = [max(1, min(q_len, int(q_len * rng.random() ** 3))) for _ in range(batch - 1)]
    return (*out, q_len)


def seq_lengths(w) -> tuple[int, ...]:
    """Tokens of each of the B sequences (queries = keys: a packed batch is self-attention)."""
    return _draw(w.lengths, w.batch, w.q_len)


def cu_seqlens(w) -> list[int]:
    """[0, L0, L0+L1, ..., T]: where each sequence starts in the packed tensors."""
    out = [0]
    for n in seq_lengths(w):
        out.append(out[-1] + n)
    return out


def tensor_dims(w) -> tuple[int, int, int]:
    """(batch, Nq, Nkv) of the tensors: the workload's own, or (1, T, T) for a packed batch."""
    if not packed(w):
        return w.batch, w.q_len, w.kv_len
    t = sum(seq_lengths(w))
    return 1, t, t
