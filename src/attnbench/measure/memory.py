"""Peak device memory of one call above what was allocated before it (inputs excluded)."""
from __future__ import annotations

from typing import Any, Callable


def peak_bytes(step: Callable[[], Any], device: str) -> int | None:
    """CUDA: max_memory_allocated during one call minus memory_allocated before it. The call's
    outputs count (they are part of its footprint). CPU: None (no allocator statistics)."""
    if not device.startswith("cuda"):
        return None
    import torch

    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    out = step()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated(device) - base
    del out
    return int(peak)


def poison_allocator(nbytes: int, device: str) -> None:
    """Fill then free a NaN block so that the allocator hands NaN-filled memory to the next output
    allocation of that size: elements a kernel never writes then fail the NaN check. CUDA: the
    caching allocator reuses the block. CPU: best effort, the C allocator may hand back another
    freed block (the recheck on new input values after timing catches what this misses)."""
    if nbytes <= 0:
        return
    import torch

    t = torch.full((nbytes // 2 + 1,), float("nan"), dtype=torch.float16, device=device)
    del t
