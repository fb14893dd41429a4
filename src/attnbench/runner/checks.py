"""What an attempt checks beyond its output: inputs left as drawn (an appending decode's cache with exactly
the new token written), and the timed path on new input values (hard distributions, a recheck after timing).
Each reads the attempt's context (runner/steps.py Attempt)."""
from __future__ import annotations

from ..backends.layout import cache_slot, new_token
from ..measure import correctness, fp8_contract, timing
from ..measure.inputs import DISTRIBUTIONS, fingerprint, refill
from ..workloads.append import appending, slot


def mutated(a, phase: str, stepped: bool = True) -> str | None:
    """Which inputs are not as they must be after `phase`, said as a reason; None if all are. A kernel
    must not write its inputs (the KV cache included): each must fingerprint as drawn (cache.clean),
    except, after a step (`stepped`) of an appending decode, the cache, which must be exactly the drawn
    one with the new token in slot kv_len - 1 (append_fault)."""
    w, cache, inputs = a.w, a.cache, a.inputs
    now = fingerprint(inputs)
    want = cache.after if stepped else cache.clean
    changed = [n for n in want if now.get(n) != want[n]]
    if stepped and appending(w):
        why = append_fault(w, inputs, cache.clean, now, changed)
        if why:
            return f"the KV cache after {phase}: {why}"
        changed = [n for n in changed if n not in ("k", "v")]
    if not changed:
        return None
    kv = " (the KV cache: decode must leave it as it was)" if w.mode == "decode" and set(changed) & {"k", "v"} else ""
    return f"input {', '.join(changed)} changed during {phase}{kv}: a kernel must not write its inputs"


def append_fault(w, inputs, clean: dict, now: dict, changed: list[str]) -> str | None:
    """What is wrong with an appending decode's K or V after its step, or None: slot kv_len - 1 must
    hold the new token's values bit for bit, and every other entry its drawn value (the cache's
    fingerprint then is the one taken with the new token in the slot, WorkloadCache.after)."""
    n = slot(w)
    for name, new in (("k", inputs.k_new), ("v", inputs.v_new)):
        written = same_bits(cache_slot(w, inputs, getattr(inputs, name)), new_token(w, new))
        if written and name not in changed:
            continue
        if written:
            return (f"{name} holds the new token in slot {n}, but other entries of the cache were written too "
                    "(only slot kv_len - 1 may change)")
        if now[name] == clean[name]:
            return (f"the append was skipped: {name} is unchanged, slot {n} (kv_len - 1) still holds its old "
                    "values, not the new token's")
        return (f"{name} changed, but slot {n} (kv_len - 1) does not hold the new token's values bit for bit "
                "(written into the wrong slot, or other values written)")
    return None


def same_bits(a, b) -> bool:
    """Whether two tensors hold the same bits (a float compare would call -0.0 and 0.0 equal)."""
    import torch

    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
    return torch.equal(a.contiguous().view(ints), b.contiguous().view(ints))


def check_on(a, call, seed: int, dist: str, hard: bool = False):
    """`call` on the values refill(seed, dist) writes into the attempt's input tensors, checked against
    their own reference; the call's µs (synchronised, the refill's own work excluded) are appended to
    a.fresh. The caller writes the workload's own values back."""
    refill(a.inputs, a.w, seed, dist)
    out, us = timing.one_call(call, a.device)
    a.fresh.append(us)
    return correctness.check(a.w, out, a.inputs, a.cache.reference(a.w, seed, dist), a.tol, hard=hard,
                             scheme=fp8_contract.scheme_of(a.backend, a.w))  # issue 40: the fp8 contract


def hard_inputs(a) -> tuple[str | None, float | None]:
    """The step on each hard distribution the timed calls do not use (outliers, large logits), against
    its own reference and the dtype's hard-input tolerance; the workload's values are restored after.
    Returns (why it failed or None, the worst error ratio)."""
    worst = None
    try:
        for i, hard in enumerate(d for d in DISTRIBUTIONS if d != "normal" and d != a.dist):
            verdict = check_on(a, a.step, a.seed + 2_000_003 + i, hard, hard=True)
            worst = max(worst or 0.0, verdict.err_ratio if verdict.err_ratio is not None else float("inf"))
            if not verdict.passed:
                return f"on {hard} inputs (measure/inputs.py): {verdict.reason}", worst
    finally:
        refill(a.inputs, a.w, a.seed, a.dist)  # the workload's own values again
    return None, worst


def recheck(a) -> str | None:
    """The timed path once more, exactly as timed, on new input values written into the same
    tensors: output that does not follow its inputs (a cache, a later call gone wrong, a graph that
    replays nothing) is not OK, whatever kernels ran. The inputs are restored afterwards."""
    try:
        verdict = check_on(a, a.timed.replay, a.seed + 1_000_003, a.dist)
    finally:
        refill(a.inputs, a.w, a.seed, a.dist)  # the workload's own values again: the next backend shares them
    if verdict.passed:
        return None
    return f"after timing, on new input values, the timed path's output failed the check: {verdict.reason}"


def fresh_and_same(a, rounds: int = 3, settle_s: float = 0.0, first: int = 0) -> tuple[list[float], list[float]]:
    """µs of the timed path, synchronised, on new values written into the inputs (`fresh`), each
    followed by a call on those same values again (`same`); the workload's values are restored. Each call
    comes `settle_s` after the device is idle, so that neither runs in the wake of the refill's own work (a
    loaded host's thread pools still spinning, a copy still queued) and the two differ by their values only.
    `first`: the first round's index (each round its own values)."""
    import time

    from ..measure.device import sync

    fresh, same = [], []
    try:
        for i in range(first, first + rounds):
            refill(a.inputs, a.w, a.seed + 3_000_017 + i, a.dist)
            for into in (fresh, same):
                if settle_s:
                    sync(a.device)
                    time.sleep(settle_s)
                into.append(timing.one_call(a.timed.replay, a.device)[1])
    finally:
        refill(a.inputs, a.w, a.seed, a.dist)
    return fresh, same
