"""The decode append (`Workload.decode_append`): where the timed step writes the new token.

With `decode_append: included` a decode workload's cache has kv_len slots per sequence: slots
0 .. kv_len - 2 hold the history and the timed step writes the new token's K and V (inputs `k_new`,
`v_new`, one token per sequence and KV head) into slot kv_len - 1, then attends the query over all
kv_len slots. Every call writes the same values into the same slot, so the timed calls repeat one
step. Before the first call that slot holds values of its own, drawn like the rest of the cache, so
a kernel that skips the append attends the wrong key (and the cache check, runner/attempt.py, says
so exactly). A paged cache's slot is reached through its page table (workloads/paged.py): page
table[b][(kv_len - 1) // P], position (kv_len - 1) mod P."""
from __future__ import annotations


def appending(w) -> bool:
    """Whether the timed step writes the new token into the cache."""
    return w.decode_append == "included"


def slot(w) -> int:
    """The cache position the new token goes to: the last of the kv_len."""
    return w.kv_len - 1
