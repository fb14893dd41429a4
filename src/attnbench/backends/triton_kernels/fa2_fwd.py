"""FlashAttention-2 forward: one program per (query block, batch·head), the KV loop inside, online softmax with deferred normalisation.

Written from the FA2 paper (arXiv 2307.08691, Algorithm 1): scores in base 2 (the scale folded with log2 e so
the exponential is one exp2), the running max m and sum l kept in registers, O rescaled by exp2(m_old - m_new)
per KV block and divided by l once at the end; causal blocks above the diagonal never loaded; the blocks
wholly below it run without a mask; GQA/MQA by indexing the KV head (h // group), K/V never expanded.
LSE (natural log) is written for the backward's recomputation."""
from __future__ import annotations

import triton
import triton.language as tl

from .common import LOG2E, fold, fold_masked, launch_options, mm, upcast


@triton.jit
def _kv_block(acc, m_i, l_i, q, k_ptrs, v_ptrs, start_n, offs_m, offs_n, NKV, CAUSAL_OFF, qk_scale,
              skn, svn, MASKED: tl.constexpr, CAUSAL: tl.constexpr, UPCAST: tl.constexpr):
    """One KV block folded into the running (acc, m, l); MASKED: apply the causal and tail masks."""
    kv_idx = start_n + offs_n
    if MASKED:
        k = tl.load(k_ptrs + start_n * skn, mask=kv_idx[None, :] < NKV, other=0.0)
    else:
        k = tl.load(k_ptrs + start_n * skn)
    s = mm(q, k, UPCAST)  # raw scores: the scale is folded into the exponent's FMA (common.fold)
    if MASKED:
        v = tl.load(v_ptrs + start_n * svn, mask=kv_idx[:, None] < NKV, other=0.0)
        keep = kv_idx[None, :] < NKV
        if CAUSAL:
            keep = keep & (kv_idx[None, :] <= offs_m[:, None] + CAUSAL_OFF)
        return fold_masked(acc, m_i, l_i, s, keep, v, qk_scale, UPCAST)
    else:
        v = tl.load(v_ptrs + start_n * svn)
        return fold(acc, m_i, l_i, s, v, qk_scale, UPCAST)


@triton.jit
def tri_fa2_fwd(Q, K, V, O, LSE, qk_scale,
                sqb, sqh, sqn, sqd, skb, skh, skn, skd, svb, svh, svn, svd, sob, soh, son, sod,
                HQ, GROUP, NQ, NKV, CAUSAL_OFF,
                CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                HEAD_D: tl.constexpr, HEAD_DV: tl.constexpr, UPCAST: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // HQ
    h = bh % HQ
    hk = h // GROUP
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_D)
    offs_dv = tl.arange(0, HEAD_DV)
    q = tl.load(Q + b * sqb + h * sqh + offs_m[:, None] * sqn + offs_d[None, :] * sqd,
                mask=offs_m[:, None] < NQ, other=0.0)
    # K read transposed (D, BLOCK_N) so that q @ k is the score block
    k_ptrs = K + b * skb + hk * skh + offs_n[None, :] * skn + offs_d[:, None] * skd
    v_ptrs = V + b * svb + hk * svh + offs_n[:, None] * svn + offs_dv[None, :] * svd
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DV], tl.float32)
    # KV range this query block sees; [0, full_hi) needs no mask, [full_hi, hi) does
    hi = NKV
    full_hi = (NKV // BLOCK_N) * BLOCK_N
    if CAUSAL:
        hi = tl.minimum(NKV, tl.maximum((pid_m + 1) * BLOCK_M + CAUSAL_OFF, 0))
        full_hi = tl.minimum(full_hi, (tl.maximum(pid_m * BLOCK_M + CAUSAL_OFF + 1, 0) // BLOCK_N) * BLOCK_N)
    for start_n in range(0, full_hi, BLOCK_N):
        acc, m_i, l_i = _kv_block(acc, m_i, l_i, q, k_ptrs, v_ptrs, start_n, offs_m, offs_n, NKV, CAUSAL_OFF,
                                  qk_scale, skn, svn, False, CAUSAL, UPCAST)
    for start_n in range(full_hi, hi, BLOCK_N):
        acc, m_i, l_i = _kv_block(acc, m_i, l_i, q, k_ptrs, v_ptrs, start_n, offs_m, offs_n, NKV, CAUSAL_OFF,
                                  qk_scale, skn, svn, True, CAUSAL, UPCAST)
    # deferred normalisation: one division per row, after the loop
    l_safe = tl.where(l_i == 0.0, 1.0, l_i)
    acc = acc / l_safe[:, None]
    lse = tl.where(l_i == 0.0, float("inf"), (m_i + tl.math.log2(l_safe)) / 1.4426950408889634)
    tl.store(LSE + bh * NQ + offs_m, lse, mask=offs_m < NQ)
    tl.store(O + b * sob + h * soh + offs_m[:, None] * son + offs_dv[None, :] * sod, acc.to(O.dtype.element_ty),
             mask=offs_m[:, None] < NQ)


def forward(q, k, v, o, lse, scale: float, causal: bool, causal_off: int, cfg: dict) -> None:
    """Launch on (B, H, N, D) views (any strides); `o` (B, Hq, Nq, Dv) and `lse` (B*Hq, Nq) fp32 are written."""
    B, HQ, NQ, D = q.shape
    HKV, NKV, DV = k.shape[1], k.shape[2], v.shape[3]
    grid = (triton.cdiv(NQ, cfg["BLOCK_M"]), B * HQ)
    tri_fa2_fwd[grid](q, k, v, o, lse, scale * LOG2E, *q.stride(), *k.stride(), *v.stride(), *o.stride(),
                      HQ, HQ // HKV, NQ, NKV, causal_off, CAUSAL=causal, BLOCK_M=cfg["BLOCK_M"],
                      BLOCK_N=cfg["BLOCK_N"], HEAD_D=D, HEAD_DV=DV, UPCAST=upcast(q), **launch_options(cfg))
