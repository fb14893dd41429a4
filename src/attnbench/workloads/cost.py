"""FLOP and HBM-byte models of a Workload.

Conventions:
- A forward pass costs 2·B·Hq·P·(D + Dv) FLOPs, where P is the number of (query, key) pairs that
  are computed: Nq·Nkv without a mask, and the exact count of unmasked pairs with a causal mask
  (so non-square causal shapes and both alignments are counted exactly, not halved), and of a
  sliding window (only the W keys each query attends). QK^T
  contributes 2·D per pair and PV 2·Dv per pair; softmax is not counted.
- A packed variable-length batch (workloads/varlen.py) counts each sequence's own pairs and bytes:
  P and the byte terms are summed over the sequences, never taken at the longest length.
- A paged KV cache (workloads/paged.py) adds its page table, B·ceil(Nkv/P) int32 entries, to the bytes
  read; the K/V bytes are the Nkv cached tokens as before (a partly filled last page's slack is not
  counted), and FLOPs are unchanged.
- An appending decode (workloads/append.py) adds the new token's K and V written into the cache,
  B·Hkv·(D + Dv)·s; the K/V read stays the Nkv tokens it attends (the new one among them).
- GQA/MQA count query heads: sharing K/V does not reduce arithmetic.
- Backward = 2.5 × forward, so train_fwd_bwd = 3.5 × forward.
- Bytes are the fewest HBM bytes a fused kernel must move: Q, K, V read once and O written once
  (s = bytes per element); with a sliding window only the keys some query attends are read (for
  decode the W newest). For decode this is 2·B·Hkv·N·D·s for K and V (with Dv for V) plus Q
  and O; it is a model, not a profiler reading. Backward bytes are not modelled (None).
"""
from __future__ import annotations

from collections import Counter

from . import DTYPE_BYTES, Workload
from .append import appending
from .paged import num_pages, pages_per_seq
from .varlen import packed, seq_lengths, tensor_dims

BWD_FACTOR = 2.5


def unmasked_pairs(q_len: int, kv_len: int, causal: bool, align: str, window: int = 0) -> int:
    """Exact number of (query, key) pairs a causal mask (and a sliding window of `window` keys, with
    causal) leaves, per (batch, head)."""
    if not causal:
        return q_len * kv_len
    offset = kv_len - q_len if align == "bottom_right" else 0
    pairs = _below(q_len, kv_len, offset)
    # the window drops the keys j <= i + offset - window: a causal mask shifted by the window
    return pairs - _below(q_len, kv_len, offset - window) if window else pairs


def _below(q_len: int, kv_len: int, offset: int) -> int:
    """Pairs (i, j), 0 <= i < q_len, 0 <= j < kv_len, with j <= i + offset."""
    # query i sees keys 0 .. i+offset (clipped to [0, kv_len]); closed form over three ranges.
    total = 0
    # rows where i+offset+1 <= 0 contribute 0; rows where it is >= kv_len contribute kv_len.
    lo = max(0, -offset)  # first row that sees at least one key
    hi = min(q_len, kv_len - offset)  # first row that sees all keys
    if hi > lo:
        # sum_{i=lo}^{hi-1} (i + offset + 1)
        n = hi - lo
        first = lo + offset + 1
        total += n * first + n * (n - 1) // 2
    full_rows = q_len - max(hi, lo)
    if full_rows > 0:
        total += full_rows * kv_len
    return total


def sequences(w: Workload) -> list[tuple[int, int, int]]:
    """(how many, Nq, Nkv) of the workload's sequences: B of one shape, or a packed batch's lengths."""
    if not packed(w):
        return [(w.batch, w.q_len, w.kv_len)]
    return [(n, length, length) for length, n in sorted(Counter(seq_lengths(w)).items())]


def _kv_read(w: Workload, q_len: int, kv_len: int) -> int:
    if not (w.causal and w.window):
        return kv_len
    offset = kv_len - q_len if w.causal_align == "bottom_right" else 0
    first = max(0, offset - w.window + 1)  # oldest key of query 0's window
    last = min(kv_len - 1, q_len - 1 + offset)  # newest key of the last query
    return max(0, last - first + 1)


def kv_read_len(w: Workload) -> int:
    """Keys (and values) of one Nq x Nkv sequence that a fused kernel must read: Nkv, or with a sliding
    window the keys that at least one query attends (one contiguous range: the windows slide by one key)."""
    return _kv_read(w, w.q_len, w.kv_len)


def forward_flops(w: Workload) -> int:
    window = w.window if w.causal else 0
    pairs = sum(n * unmasked_pairs(q, kv, w.causal, w.causal_align, window) for n, q, kv in sequences(w))
    return 2 * w.q_heads * pairs * (w.head_dim + w.head_dim_v)


def flops(w: Workload) -> float:
    """FLOPs of the timed step of this workload's mode."""
    f = forward_flops(w)
    return f * (1 + BWD_FACTOR) if w.mode == "train_fwd_bwd" else float(f)


def io_bytes(w: Workload) -> int | None:
    """Minimum HBM bytes of the forward step (None for fwd+bwd, which is not modelled)."""
    if w.mode == "train_fwd_bwd":
        return None
    s = DTYPE_BYTES[w.dtype]
    total = 0
    for n, q_len, kv_len in sequences(w):
        q = w.q_heads * q_len * w.head_dim
        o = w.q_heads * q_len * w.head_dim_v
        kv = w.kv_heads * _kv_read(w, q_len, kv_len) * (w.head_dim + w.head_dim_v)
        total += n * (q + kv + o)
    return total * s + page_table_bytes(w) + append_bytes(w)


def append_bytes(w: Workload) -> int:
    """The new token's K and V an appending decode writes into its cache; 0 for other workloads."""
    return w.batch * w.kv_heads * (w.head_dim + w.head_dim_v) * DTYPE_BYTES[w.dtype] if appending(w) else 0


def page_table_bytes(w: Workload) -> int:
    """The page table of a paged KV cache, int32 (B, pages_per_seq); 0 for a contiguous cache."""
    return 4 * w.batch * pages_per_seq(w) if w.page_size else 0


def decode_kv_bytes(w: Workload) -> int:
    """K and V cache read once: 2·B·Hkv·N·D·s when D == Dv (N: the W newest keys under a window)."""
    s = DTYPE_BYTES[w.dtype]
    return w.batch * w.kv_heads * kv_read_len(w) * (w.head_dim + w.head_dim_v) * s


def bound(w: Workload) -> str:
    """Which throughput a row is judged by: 'bytes' for decode, 'flops' otherwise."""
    return "bytes" if w.mode == "decode" else "flops"


def input_bytes(w: Workload) -> int:
    s = DTYPE_BYTES[w.dtype]
    b, nq, nkv = tensor_dims(w)  # a packed batch: (1, T, T)
    q = b * w.q_heads * nq * w.head_dim
    # a paged cache: every page whole, a partly filled last page's slack included
    slots = num_pages(w) * w.page_size if w.page_size else b * nkv
    kv = slots * w.kv_heads * (w.head_dim + w.head_dim_v)
    o = b * w.q_heads * nq * w.head_dim_v
    n = q + kv + o  # output buffer is allocated with the inputs
    if w.needs_grad:
        n *= 2  # gradients of Q, K, V and the given dO
    return n * s + page_table_bytes(w) + append_bytes(w)  # an appending decode's new-token inputs: its size


def score_matrix_bytes(w: Workload, elem_bytes: int = 4) -> int:
    """Bytes of one materialised (B, Hq, Nq, Nkv) score matrix (a bound for a packed batch, whose
    reference computes each sequence's own)."""
    return w.batch * w.q_heads * w.q_len * w.kv_len * elem_bytes
