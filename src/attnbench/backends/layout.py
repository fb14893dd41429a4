"""Layout views, the masking rule and the decode append's slot, shared by every backend and by the
correctness check."""
from __future__ import annotations

from contextlib import contextmanager

from ..workloads.append import appending, slot


def to_bhnd(t, layout: str):
    """View a (B, N, H, D) tensor as (B, H, N, D); BHND tensors pass through."""
    return t.transpose(1, 2) if layout == "BNHD" else t


def from_bhnd(t, layout: str):
    return t.transpose(1, 2) if layout == "BNHD" else t


def causal_offset(q_len: int, kv_len: int, align: str) -> int:
    """Query i may see key j iff j <= i + offset."""
    return kv_len - q_len if align == "bottom_right" else 0


def keep_mask(q_len: int, kv_len: int, align: str, device, window: int | None = None):
    """(Nq, Nkv) boolean mask, True where a (query, key) pair is attended; with `window`, query i
    also sees only the `window` newest keys up to its own position (a sliding window)."""
    import torch

    i = torch.arange(q_len, device=device)[:, None]
    j = torch.arange(kv_len, device=device)[None, :]
    off = causal_offset(q_len, kv_len, align)
    keep = j <= i + off
    return keep & (j > i + off - window) if window else keep


def sdpa_mask_args(q_len: int, kv_len: int, causal: bool, align: str) -> dict:
    """How SDPA expresses the causal rule: is_causal (top-left), a lower-right CausalBias, or nothing."""
    if not causal:
        return {}
    if align == "top_left" or q_len == kv_len:
        return {"is_causal": True}
    if q_len == 1:
        return {}  # bottom-right at one query token sees every key
    from torch.nn.attention.bias import causal_lower_right

    return {"attn_mask": causal_lower_right(q_len, kv_len)}


def dense_kv(w, inputs):
    """K and V as the workload's contiguous (B, Hkv, Nkv, D) tensors in its layout: for a paged cache
    (workloads/paged.py) each sequence's pages gathered through `inputs.page_table` (a copy) and cut
    to kv_len tokens (the last page's slack dropped); otherwise inputs.k and inputs.v as they are."""
    if not w.page_size:
        return inputs.k, inputs.v
    table = inputs.page_table.long()
    out = []
    for t in (inputs.k, inputs.v):
        g = t.detach()[table]  # (B, pages_per_seq, page_size, Hkv, D)
        g = g.reshape(g.shape[0], -1, g.shape[3], g.shape[4])[:, :w.kv_len]  # (B, Nkv, Hkv, D)
        out.append(g if w.layout == "BNHD" else g.transpose(1, 2))
    return tuple(out)


def new_token(w, t):
    """A new-token input (Inputs.k_new or v_new: one token in the workload's layout) as (B, Hkv, D)."""
    return to_bhnd(t, w.layout)[:, :, 0]


def _slot_page(w, inputs):
    """(physical page of every sequence's new-token slot, the slot's position in it) of a paged cache."""
    n = slot(w)
    return inputs.page_table[:, n // w.page_size].long(), n % w.page_size


def cache_slot(w, inputs, t):
    """The new token's slot (workloads/append.py) of cache tensor t (inputs.k or inputs.v) as
    (B, Hkv, D): a view of a contiguous cache, a copy of a paged one (gathered through its table)."""
    if w.page_size:
        pages, at = _slot_page(w, inputs)
        return t.detach()[pages, at]
    return to_bhnd(t.detach(), w.layout)[:, :, slot(w)]


def write_slot(w, inputs, t, values) -> None:
    """Write (B, Hkv, D) `values` into the new token's slot of cache tensor t, in place (a paged cache
    through its page table)."""
    import torch

    with torch.no_grad():
        if w.page_size:
            pages, at = _slot_page(w, inputs)
            t[pages, at] = values
        else:
            to_bhnd(t, w.layout)[:, :, slot(w)].copy_(values)


def append_token(w, inputs):
    """The append of an appending decode (decode_append included) as torch ops, for backends whose
    step writes the cache before it attends: K and V of the new token into slot kv_len - 1."""
    def write():
        write_slot(w, inputs, inputs.k, new_token(w, inputs.k_new))
        write_slot(w, inputs, inputs.v, new_token(w, inputs.v_new))

    return write


def append_then(w, inputs, attend):
    """The step of a backend whose append is torch ops before its attention: `attend` itself, or for
    an appending decode (decode_append included) a step that first writes the new token's K/V into
    slot kv_len - 1 (a slice copy; through the table if paged), then attends."""
    if not appending(w):
        return attend
    write = append_token(w, inputs)

    def step():
        write()
        return attend()

    return step


@contextmanager
def appended(w, inputs):
    """Inside: the cache as an appending decode's step attends it, the new token in slot kv_len - 1
    (what the float64 reference is computed on, whatever the slot held); after: the slot's contents
    put back. Nothing happens for other workloads."""
    if not appending(w):
        yield
        return
    saved = [cache_slot(w, inputs, t).clone() for t in (inputs.k, inputs.v)]
    append_token(w, inputs)()
    try:
        yield
    finally:
        for t, values in zip((inputs.k, inputs.v), saved):
            write_slot(w, inputs, t, values)
