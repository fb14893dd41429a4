"""FlashAttention-1's loop order: one program per batch·head, KV blocks outer, query blocks inner; O, m and l read from and written back to HBM for every KV block.

Written from the FA1 paper (arXiv 2205.14135, Algorithm 1): for each K_j, V_j held on chip, every query block Q_i
is loaded with its O_i, m_i, l_i, the block's scores folded in, and O_i written back normalised
(O_i <- (l_i e^{m_i - m_new} O_i + e^{m~ - m_new} P~ V_j) / l_new). O is kept in an fp32 scratch between KV blocks
and cast to the output once at the end. The parallelism is batch x heads only, which is what FA2 changed;
the extra HBM traffic (O, m, l once per KV block) is what the FA1 -> FA2 step shows in DRAM bytes."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import LOG2E, launch_options, mm, upcast


@triton.jit
def tri_fa1_fwd(Q, K, V, O, ACC, M, L, qk_scale,
                sqb, sqh, sqn, sqd, skb, skh, skn, skd, svb, svh, svn, svd, sob, soh, son, sod,
                HQ, GROUP, NQ, NKV, CAUSAL_OFF,
                CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                HEAD_D: tl.constexpr, HEAD_DV: tl.constexpr, UPCAST: tl.constexpr):
    bh = tl.program_id(0)
    b = bh // HQ
    h = bh % HQ
    hk = h // GROUP
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_D)
    offs_dv = tl.arange(0, HEAD_DV)
    acc_base = ACC + bh * NQ * HEAD_DV
    for start_n in range(0, NKV, BLOCK_N):
        kv = start_n + offs_n
        kT = tl.load(K + b * skb + hk * skh + kv[None, :] * skn + offs_d[:, None] * skd, mask=kv[None, :] < NKV,
                     other=0.0)
        v = tl.load(V + b * svb + hk * svh + kv[:, None] * svn + offs_dv[None, :] * svd, mask=kv[:, None] < NKV,
                    other=0.0)
        lo = 0
        if CAUSAL:  # query rows that see key start_n: i >= start_n - off (all rows on the first block: it initialises)
            lo = (tl.maximum(start_n - CAUSAL_OFF, 0) // BLOCK_M) * BLOCK_M * tl.minimum(start_n, 1)
        for start_m in range(lo, NQ, BLOCK_M):
            rows = start_m + offs_m
            q = tl.load(Q + b * sqb + h * sqh + rows[:, None] * sqn + offs_d[None, :] * sqd,
                        mask=rows[:, None] < NQ, other=0.0)
            s = mm(q, kT, UPCAST) * qk_scale
            keep = kv[None, :] < NKV
            if CAUSAL:
                keep = keep & (kv[None, :] <= rows[:, None] + CAUSAL_OFF)
            s = tl.where(keep, s, float("-inf"))
            # the block's own max and sum (m~, l~), then merged with what HBM holds for these rows
            m_blk = tl.max(s, 1)
            m_blk_use = tl.where(m_blk == float("-inf"), 0.0, m_blk)
            p = tl.math.exp2(s - m_blk_use[:, None])
            l_blk = tl.sum(p, 1)
            seen = start_n > 0  # HBM holds this row's O, m, l from earlier KV blocks
            m_old = tl.load(M + bh * NQ + rows, mask=(rows < NQ) & seen, other=float("-inf"))
            l_old = tl.load(L + bh * NQ + rows, mask=(rows < NQ) & seen, other=0.0)
            o_old = tl.load(acc_base + rows[:, None] * HEAD_DV + offs_dv[None, :],
                            mask=(rows[:, None] < NQ) & seen, other=0.0)
            m_new = tl.maximum(m_old, m_blk)
            m_new_use = tl.where(m_new == float("-inf"), 0.0, m_new)
            a_old = tl.math.exp2(m_old - m_new_use) * l_old
            a_blk = tl.math.exp2(m_blk_use - m_new_use)
            l_new = a_old + a_blk * l_blk
            l_div = tl.where(l_new == 0.0, 1.0, l_new)
            o_new = (o_old * a_old[:, None] + mm(p.to(v.dtype), v, UPCAST) * a_blk[:, None]) / l_div[:, None]
            tl.store(M + bh * NQ + rows, m_new, mask=rows < NQ)
            tl.store(L + bh * NQ + rows, l_new, mask=rows < NQ)
            tl.store(acc_base + rows[:, None] * HEAD_DV + offs_dv[None, :], o_new, mask=rows[:, None] < NQ)
        tl.debug_barrier()  # the next KV block reads what every thread of the program wrote
    for start_m in range(0, NQ, BLOCK_M):
        rows = start_m + offs_m
        o = tl.load(acc_base + rows[:, None] * HEAD_DV + offs_dv[None, :], mask=rows[:, None] < NQ, other=0.0)
        tl.store(O + b * sob + h * soh + rows[:, None] * son + offs_dv[None, :] * sod, o.to(O.dtype.element_ty),
                 mask=rows[:, None] < NQ)


def scratch(q, v) -> tuple:
    """The fp32 O, m and l the kernel keeps in HBM between KV blocks (allocated once per attempt)."""
    B, HQ, NQ, _ = q.shape
    acc = torch.empty(B * HQ, NQ, v.shape[3], device=q.device, dtype=torch.float32)
    m = torch.empty(B * HQ, NQ, device=q.device, dtype=torch.float32)
    return acc, m, torch.empty_like(m)


def forward(q, k, v, o, bufs, scale: float, causal: bool, causal_off: int, cfg: dict) -> None:
    B, HQ, NQ, D = q.shape
    HKV, NKV, DV = k.shape[1], k.shape[2], v.shape[3]
    acc, m, l = bufs
    tri_fa1_fwd[(B * HQ,)](q, k, v, o, acc, m, l, scale * LOG2E, *q.stride(), *k.stride(), *v.stride(), *o.stride(),
                           HQ, HQ // HKV, NQ, NKV, causal_off, CAUSAL=causal, BLOCK_M=cfg["BLOCK_M"],
                           BLOCK_N=cfg["BLOCK_N"], HEAD_D=D, HEAD_DV=DV, UPCAST=upcast(q), **launch_options(cfg))
