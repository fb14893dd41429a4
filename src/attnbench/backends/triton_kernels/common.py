"""What every ladder kernel shares: the interpreter's bf16 matmul detour, launch configs as data, LOG2E."""
from __future__ import annotations

import triton
import triton.language as tl

from . import interpreting

LOG2E = 1.4426950408889634


@triton.jit
def mm(a, b, UPCAST: tl.constexpr):
    """a @ b accumulated in fp32. UPCAST (CPU interpreter and bf16 only): Triton 3.6's interpreter multiplies
    bf16 blocks as their raw 16-bit integers, so the operands go to fp32 first (same products: bf16 is exact in fp32)."""
    if UPCAST:
        return tl.dot(a.to(tl.float32), b.to(tl.float32))
    else:
        return tl.dot(a, b)


@triton.jit
def mma(a, b, acc, UPCAST: tl.constexpr):
    """acc + a @ b in the MMA's own accumulator (wgmma accumulates in place: no separate add of the product)."""
    if UPCAST:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc)
    else:
        return tl.dot(a, b, acc)


@triton.jit
def fold(acc, m_i, l_i, s, v, qk_scale, UPCAST: tl.constexpr):
    """One wholly visible KV block folded into (acc, m, l). `s` holds the raw scores and m stays in the scaled base-2
    domain, so the scale and the max subtraction are one FMA per score (the row max is scaled, not every score), and
    P@V accumulates into the rescaled acc inside the MMA instead of a separate add."""
    m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
    p = tl.math.exp2(s * qk_scale - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = mma(p.to(v.dtype), v, acc * alpha[:, None], UPCAST)
    return acc, m_new, l_i


@triton.jit
def fold_masked(acc, m_i, l_i, s, keep, v, qk_scale, UPCAST: tl.constexpr):
    """fold for a diagonal or tail block: masked scores are -inf, and a row that has seen no key subtracts 0."""
    s = tl.where(keep, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
    m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
    p = tl.math.exp2(s * qk_scale - m_use[:, None])
    alpha = tl.math.exp2(m_i - m_use)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = mma(p.to(v.dtype), v, acc * alpha[:, None], UPCAST)
    return acc, m_new, l_i


@triton.jit
def softmax_step(s, m_i, l_i):
    """One KV block's online-softmax step on base-2 logits `s`: the block's probabilities against the new running
    maximum, the factor that rescales what was accumulated, the new maximum and the new row sum (a row that has
    seen no key yet has nothing to subtract)."""
    m_new = tl.maximum(m_i, tl.max(s, 1))
    m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
    p = tl.math.exp2(s - m_use[:, None])
    alpha = tl.math.exp2(m_i - m_use)
    return p, alpha, m_new, l_i * alpha + tl.sum(p, 1)


def upcast(t) -> bool:
    """The UPCAST flag of mm() for operands of t's dtype."""
    import torch

    return interpreting() and t.dtype == torch.bfloat16


def launch_options(cfg: dict) -> dict:
    """The Triton launch keywords of a config (num_warps, num_stages); the rest are constexprs."""
    return {"num_warps": cfg.get("num_warps", 4), "num_stages": cfg.get("num_stages", 2)}
