"""Reproducible random inputs in the workload's layout (never zeros: they hide unwritten output)."""
from __future__ import annotations

import hashlib
import math

from ..backends.base import Inputs
from ..workloads import Workload

TORCH_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def torch_dtype(name: str):
    import torch

    return getattr(torch, TORCH_DTYPES[name])


def input_seed(w: Workload, seed: int) -> int:
    return int(hashlib.sha1(f"{seed}:{w.key()}".encode()).hexdigest()[:8], 16)


def shape(w: Workload, heads: int, n: int, d: int) -> tuple[int, ...]:
    return (w.batch, heads, n, d) if w.layout == "BHND" else (w.batch, n, heads, d)


def make_inputs(w: Workload, device: str, seed: int) -> Inputs:
    """Q, K, V (and dO) drawn from N(0, 1) with a generator seeded by (seed, workload) (refill
    draws them: one way to draw, so a refill with this seed restores these values exactly)."""
    import torch

    dt = torch_dtype(w.dtype)
    grad = w.mode in ("train_fwd", "train_fwd_bwd")

    def empty(*s):
        return torch.empty(*s, device=device, dtype=dt)

    inputs = Inputs(q=empty(*shape(w, w.q_heads, w.q_len, w.head_dim)),
                    k=empty(*shape(w, w.kv_heads, w.kv_len, w.head_dim)),
                    v=empty(*shape(w, w.kv_heads, w.kv_len, w.head_dim_v)),
                    do=empty(*shape(w, w.q_heads, w.q_len, w.head_dim_v)) if w.needs_grad else None,
                    out=empty(*shape(w, w.q_heads, w.q_len, w.head_dim_v)), scale=1.0 / math.sqrt(w.head_dim))
    refill(inputs, w, seed)
    for t in (inputs.q, inputs.k, inputs.v):
        t.requires_grad_(grad)
    return inputs


def refill(inputs: Inputs, w: Workload, seed: int) -> None:
    """Write new values into the same tensors (what a graph captured, what a cache may hold), drawn
    as make_inputs draws them but from `seed`'s own stream; refill(inputs, w, seed) with the seed
    make_inputs had restores its values exactly. The output buffer is poisoned again."""
    import torch

    gen = torch.Generator(device=inputs.q.device).manual_seed(input_seed(w, seed))
    with torch.no_grad():
        for t in (inputs.q, inputs.k, inputs.v, inputs.do):
            if t is not None:
                t.copy_(torch.randn(t.shape, generator=gen, device=t.device, dtype=t.dtype))
        inputs.out.fill_(float("nan"))


def fingerprint(inputs: Inputs) -> dict[str, tuple[float, ...]]:
    """Per input tensor, three float64 reductions (sum, sum of squares, a position-weighted sum):
    any write into it, even a rounding in place, changes them; no copy of the tensor is kept."""
    import torch

    out = {}
    for name in ("q", "k", "v", "do"):
        t = getattr(inputs, name)
        if t is None:
            continue
        flat = t.detach().reshape(-1)
        acc = torch.zeros(3, dtype=torch.float64, device=flat.device)
        start = 0
        for chunk in flat.split(1 << 24):  # bounded temporaries for GiB-sized inputs
            x = chunk.double()
            w = torch.arange(start, start + x.numel(), device=x.device, dtype=torch.float64).remainder_(997).add_(1)
            acc += torch.stack([x.sum(), (x * x).sum(), (x * w).sum()])
            start += x.numel()
        out[name] = tuple(acc.tolist())
    return out
