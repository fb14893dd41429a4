"""Launch configs per kernel, architecture and shape class, chosen once per worker on the first call (cold start, never timed) and said on the row.

On CUDA every candidate that compiles is timed a few times on the attempt's own inputs and the fastest kept;
on the CPU interpreter the first candidate is taken as it is (the interpreter's time means nothing).
ATTNBENCH_TRITON_TUNE=first takes the first candidate on CUDA too (a recipe short of time)."""
from __future__ import annotations

import logging
import os
import time

log = logging.getLogger(__name__)

_CHOSEN: dict[tuple, dict] = {}


def shape_class(n: int) -> int:
    """Sequence lengths in powers-of-two buckets from 1k (one config serves a bucket)."""
    b = 1024
    while b < n and b < (1 << 20):
        b *= 2
    return b


def arch(device) -> str:
    import torch

    if device.type != "cuda":
        return "interpreter"
    major, minor = torch.cuda.get_device_capability(device)
    return f"sm{major}{minor}"


def choose(kernel: str, key: tuple, candidates: list[dict], run, device) -> dict:
    """The config for `kernel` at `key` (the architecture and shape class are added here): the first
    candidate on the interpreter, else the fastest of those that compile, timed with `run(cfg)`.
    The returned dict is the config plus how it was chosen (recorded as the row's kernel_config)."""
    full = (kernel, arch(device), *key)
    if full in _CHOSEN:  # chosen by an earlier attempt of this worker: this first call only runs it
        cfg = {k: v for k, v in _CHOSEN[full].items() if k not in ("tuned_over", "tune_s", "tuned_ms")}
        run(cfg)
        return {**_CHOSEN[full], "cached": True}
    if device.type != "cuda":
        run(candidates[0])
        _CHOSEN[full] = {**candidates[0], "tuned_over": 1}
        return dict(_CHOSEN[full])
    if len(candidates) == 1 or os.environ.get("ATTNBENCH_TRITON_TUNE") == "first":
        candidates = candidates[:1]
    import torch

    t0 = time.perf_counter()
    timed, refused = [], []
    for cfg in candidates:
        try:
            run(cfg)  # compile
            torch.cuda.synchronize(device)
        except Exception as e:  # a config the compiler refuses (shared memory, registers): not a candidate
            log.debug("%s: config %s refused: %s", kernel, cfg, e)
            refused.append(f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:300] if str(e).strip() else ''}")
            continue
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(3):
            run(cfg)
        end.record()
        end.synchronize()
        timed.append((start.elapsed_time(end) / 3, cfg))
    if not timed:
        raise RuntimeError(f"{kernel}: no launch config compiled on {arch(device)} ({len(candidates)} tried; "
                           f"the last refusal: {refused[-1] if refused else '?'})")
    ms, best = min(timed, key=lambda t: t[0])
    _CHOSEN[full] = {**best, "tuned_over": len(timed), "tune_s": round(time.perf_counter() - t0, 3),
                     "tuned_ms": round(ms, 4)}
    run(best)  # the output of the call is the chosen config's
    return dict(_CHOSEN[full])
