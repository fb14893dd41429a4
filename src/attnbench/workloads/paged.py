"""Paged KV caches for decode (`Workload.page_size`): the page geometry and the page table, derived
from the workload alone.

A paged decode workload keeps each sequence's kv_len cached tokens in pages of `page_size` tokens:
sequence b's logical page i (tokens i·P .. i·P + P - 1) sits in physical page table[b][i] of one
pool of B·ceil(kv_len / P) pages, K and V each (num_pages, page_size, Hkv, D), the token-major (NHD)
page layout FlashAttention's block_table and FlashInfer's NHD paged cache take. page_size need not
divide kv_len: the last page of every sequence then holds kv_len mod P tokens and the rest of it is
slack that the inputs fill with random values too, so a kernel that reads past the cache length
fails the check. Every physical page is used exactly once, and the table is one cyclic permutation
of the pages (Sattolo's shuffle, seeded by (B, kv_len, page_size) alone): with more than one page no
logical page sits where a contiguous cache would keep it, so a kernel that ignores the table reads
the wrong pages."""
from __future__ import annotations

import hashlib
import random
from functools import lru_cache


def paged(w) -> bool:
    return bool(w.page_size)


def pages_per_seq(w) -> int:
    return -(-w.kv_len // w.page_size)


def num_pages(w) -> int:
    return w.batch * pages_per_seq(w)


def last_page_len(w) -> int:
    """Tokens in each sequence's last page: page_size, or kv_len mod page_size when it does not divide."""
    return w.kv_len - (pages_per_seq(w) - 1) * w.page_size


@lru_cache(maxsize=256)
def _table(batch: int, kv_len: int, page_size: int) -> tuple[tuple[int, ...], ...]:
    per = -(-kv_len // page_size)
    n = batch * per
    rng = random.Random(int(hashlib.sha1(f"pages:{batch}:{kv_len}:{page_size}".encode()).hexdigest()[:12], 16))
    perm = list(range(n))
    for i in range(n - 1, 0, -1):  # Sattolo: one cycle through every page, so perm[i] != i for n > 1
        j = rng.randrange(i)
        perm[i], perm[j] = perm[j], perm[i]
    return tuple(tuple(perm[b * per:(b + 1) * per]) for b in range(batch))


def page_table(w) -> tuple[tuple[int, ...], ...]:
    """(B, pages_per_seq): the physical page of each sequence's logical pages."""
    return _table(w.batch, w.kv_len, w.page_size)
