"""FlashAttention-2 backward: P recomputed from the forward's LSE, a dK/dV pass (one program per KV block) and a dQ pass (one per query block).

Written from the FA2 paper (Algorithm 2) with its two-kernel split: no program writes another's output, so both
passes are deterministic. GQA: the deterministic form gives one program per (KV block, KV head) looping over the
group's query heads in a fixed order; the atomic form (deterministic=False, GQA only) gives one program per query
head and adds its dK/dV into fp32 buffers with atomics (more programs, order of the additions not fixed)."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import LOG2E, launch_options, mm, upcast


@triton.jit
def tri_fa2_bwd_pre(O, DO, DELTA, sob, soh, son, sod, sdb, sdh, sdn, sdd, HQ, NQ,
                    BLOCK_M: tl.constexpr, HEAD_DV: tl.constexpr):
    """delta = rowsum(O * dO), the softmax backward's per-row term."""
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // HQ
    h = bh % HQ
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DV)
    rows = offs_m[:, None] < NQ
    o = tl.load(O + b * sob + h * soh + offs_m[:, None] * son + offs_d[None, :] * sod, mask=rows, other=0.0)
    do = tl.load(DO + b * sdb + h * sdh + offs_m[:, None] * sdn + offs_d[None, :] * sdd, mask=rows, other=0.0)
    tl.store(DELTA + bh * NQ + offs_m, tl.sum(o.to(tl.float32) * do.to(tl.float32), 1), mask=offs_m < NQ)


@triton.jit
def _q_block(dk, dv, k, v, qT_ptrs, doT_ptrs, LSE_h, DELTA_h, start_m, offs_m, offs_n, NQ, CAUSAL_OFF, qk_scale,
             sqn, sdn, MASKED: tl.constexpr, CAUSAL: tl.constexpr, UPCAST: tl.constexpr):
    """One query block's share of dK and dV for this KV block, all transposed (KV rows first)."""
    q_idx = start_m + offs_m
    if MASKED:
        qT = tl.load(qT_ptrs + start_m * sqn, mask=q_idx[None, :] < NQ, other=0.0)
        doT = tl.load(doT_ptrs + start_m * sdn, mask=q_idx[None, :] < NQ, other=0.0)
        lse = tl.load(LSE_h + q_idx, mask=q_idx < NQ, other=float("inf"))
        delta = tl.load(DELTA_h + q_idx, mask=q_idx < NQ, other=0.0)
    else:
        qT = tl.load(qT_ptrs + start_m * sqn)
        doT = tl.load(doT_ptrs + start_m * sdn)
        lse = tl.load(LSE_h + q_idx)
        delta = tl.load(DELTA_h + q_idx)
    pT = tl.math.exp2(mm(k, qT, UPCAST) * qk_scale - lse[None, :] * 1.4426950408889634)
    if MASKED:
        if CAUSAL:
            pT = tl.where(offs_n[:, None] <= q_idx[None, :] + CAUSAL_OFF, pT, 0.0)
    dv += mm(pT.to(doT.dtype), tl.trans(doT), UPCAST)
    dpT = mm(v, doT, UPCAST)
    dsT = pT * (dpT - delta[None, :])
    dk += mm(dsT.to(qT.dtype), tl.trans(qT), UPCAST)
    return dk, dv


@triton.jit
def tri_fa2_bwd_dkdv(Q, K, V, DO, LSE, DELTA, DK, DV, sm_scale, qk_scale,
                     sqb, sqh, sqn, sqd, skb, skh, skn, skd, svb, svh, svn, svd, sdb, sdh, sdn, sdd,
                     skgb, skgh, skgn, skgd, svgb, svgh, svgn, svgd,
                     HQ, GROUP, NQ, NKV, CAUSAL_OFF,
                     CAUSAL: tl.constexpr, ATOMIC: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     HEAD_D: tl.constexpr, HEAD_DV: tl.constexpr, UPCAST: tl.constexpr):
    pid_n = tl.program_id(0)
    bh = tl.program_id(1)  # (b, query head) when ATOMIC, else (b, KV head)
    HKV = HQ // GROUP
    if ATOMIC:
        b = bh // HQ
        h0 = bh % HQ
        hk = h0 // GROUP
        n_heads = 1
    else:
        b = bh // HKV
        hk = bh % HKV
        h0 = hk * GROUP
        n_heads = GROUP
    start_n = pid_n * BLOCK_N
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_m = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_D)
    offs_dv = tl.arange(0, HEAD_DV)
    kv_rows = offs_n[:, None] < NKV
    k = tl.load(K + b * skb + hk * skh + offs_n[:, None] * skn + offs_d[None, :] * skd, mask=kv_rows, other=0.0)
    v = tl.load(V + b * svb + hk * svh + offs_n[:, None] * svn + offs_dv[None, :] * svd, mask=kv_rows, other=0.0)
    dk = tl.zeros([BLOCK_N, HEAD_D], tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DV], tl.float32)
    # query blocks that see this KV block: from the diagonal down (causal); [lo, mid) masked, [mid, full) not,
    # [full, NQ) the masked tail
    full = (NQ // BLOCK_M) * BLOCK_M
    lo = 0
    mid = 0
    if CAUSAL:
        lo = (tl.maximum(start_n - CAUSAL_OFF, 0) // BLOCK_M) * BLOCK_M
        mid = tl.minimum(tl.cdiv(tl.maximum(start_n + BLOCK_N - 1 - CAUSAL_OFF, 0), BLOCK_M) * BLOCK_M, full)
        mid = tl.maximum(mid, lo)
        full = tl.maximum(full, mid)
    for g in range(0, n_heads):
        h = h0 + g
        qT_ptrs = Q + b * sqb + h * sqh + offs_m[None, :] * sqn + offs_d[:, None] * sqd
        doT_ptrs = DO + b * sdb + h * sdh + offs_m[None, :] * sdn + offs_dv[:, None] * sdd
        LSE_h = LSE + (b * HQ + h) * NQ
        DELTA_h = DELTA + (b * HQ + h) * NQ
        for start_m in range(lo, mid, BLOCK_M):
            dk, dv = _q_block(dk, dv, k, v, qT_ptrs, doT_ptrs, LSE_h, DELTA_h, start_m, offs_m, offs_n, NQ,
                              CAUSAL_OFF, qk_scale, sqn, sdn, True, CAUSAL, UPCAST)
        for start_m in range(mid, full, BLOCK_M):
            dk, dv = _q_block(dk, dv, k, v, qT_ptrs, doT_ptrs, LSE_h, DELTA_h, start_m, offs_m, offs_n, NQ,
                              CAUSAL_OFF, qk_scale, sqn, sdn, False, CAUSAL, UPCAST)
        for start_m in range(full, NQ, BLOCK_M):
            dk, dv = _q_block(dk, dv, k, v, qT_ptrs, doT_ptrs, LSE_h, DELTA_h, start_m, offs_m, offs_n, NQ,
                              CAUSAL_OFF, qk_scale, sqn, sdn, True, CAUSAL, UPCAST)
    dk = dk * sm_scale
    dk_ptrs = DK + b * skgb + hk * skgh + offs_n[:, None] * skgn + offs_d[None, :] * skgd
    dv_ptrs = DV + b * svgb + hk * svgh + offs_n[:, None] * svgn + offs_dv[None, :] * svgd
    if ATOMIC:
        tl.atomic_add(dk_ptrs, dk, mask=kv_rows)
        tl.atomic_add(dv_ptrs, dv, mask=kv_rows)
    else:
        tl.store(dk_ptrs, dk.to(DK.dtype.element_ty), mask=kv_rows)
        tl.store(dv_ptrs, dv.to(DV.dtype.element_ty), mask=kv_rows)


@triton.jit
def tri_fa2_bwd_dq(Q, K, V, DO, LSE, DELTA, DQ, sm_scale, qk_scale,
                   sqb, sqh, sqn, sqd, skb, skh, skn, skd, svb, svh, svn, svd, sdb, sdh, sdn, sdd,
                   sgb, sgh, sgn, sgd, HQ, GROUP, NQ, NKV, CAUSAL_OFF,
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
    rows = offs_m < NQ
    q = tl.load(Q + b * sqb + h * sqh + offs_m[:, None] * sqn + offs_d[None, :] * sqd, mask=rows[:, None], other=0.0)
    do = tl.load(DO + b * sdb + h * sdh + offs_m[:, None] * sdn + offs_dv[None, :] * sdd, mask=rows[:, None],
                 other=0.0)
    lse2 = tl.load(LSE + bh * NQ + offs_m, mask=rows, other=float("inf")) * 1.4426950408889634
    delta = tl.load(DELTA + bh * NQ + offs_m, mask=rows, other=0.0)
    kT_ptrs = K + b * skb + hk * skh + offs_n[None, :] * skn + offs_d[:, None] * skd
    vT_ptrs = V + b * svb + hk * svh + offs_n[None, :] * svn + offs_dv[:, None] * svd
    dq = tl.zeros([BLOCK_M, HEAD_D], tl.float32)
    hi = NKV
    if CAUSAL:
        hi = tl.minimum(NKV, tl.maximum((pid_m + 1) * BLOCK_M + CAUSAL_OFF, 0))
    for start_n in range(0, hi, BLOCK_N):
        kv = start_n + offs_n
        kT = tl.load(kT_ptrs + start_n * skn, mask=kv[None, :] < NKV, other=0.0)
        vT = tl.load(vT_ptrs + start_n * svn, mask=kv[None, :] < NKV, other=0.0)
        p = tl.math.exp2(mm(q, kT, UPCAST) * qk_scale - lse2[:, None])
        keep = kv[None, :] < NKV
        if CAUSAL:
            keep = keep & (kv[None, :] <= offs_m[:, None] + CAUSAL_OFF)
        p = tl.where(keep, p, 0.0)
        dp = mm(do, vT, UPCAST)
        ds = p * (dp - delta[:, None])
        dq += mm(ds.to(kT.dtype), tl.trans(kT), UPCAST)
    dq = dq * sm_scale
    tl.store(DQ + b * sgb + h * sgh + offs_m[:, None] * sgn + offs_d[None, :] * sgd, dq.to(DQ.dtype.element_ty),
             mask=rows[:, None])


def backward(q, k, v, o, do, lse, scale: float, causal: bool, causal_off: int, cfg: dict,
             deterministic: bool = True):
    """(dQ, dK, dV) on (B, H, N, D) views for the forward's O and LSE; returned in BHND, q's dtype."""
    B, HQ, NQ, D = q.shape
    HKV, NKV, DV = k.shape[1], k.shape[2], v.shape[3]
    group = HQ // HKV
    bm, bn = cfg["BLOCK_M"], cfg["BLOCK_N"]
    up = upcast(q)
    delta = torch.empty(B * HQ, NQ, device=q.device, dtype=torch.float32)
    tri_fa2_bwd_pre[(triton.cdiv(NQ, bm), B * HQ)](o, do, delta, *o.stride(), *do.stride(), HQ, NQ,
                                                   BLOCK_M=bm, HEAD_DV=DV)
    atomic = not deterministic and group > 1
    buf = torch.float32 if atomic else q.dtype
    dk = (torch.zeros if atomic else torch.empty)(B, HKV, NKV, D, device=q.device, dtype=buf)
    dv = (torch.zeros if atomic else torch.empty)(B, HKV, NKV, DV, device=q.device, dtype=buf)
    dq = torch.empty(B, HQ, NQ, D, device=q.device, dtype=q.dtype)
    strides = (*q.stride(), *k.stride(), *v.stride(), *do.stride())
    tri_fa2_bwd_dkdv[(triton.cdiv(NKV, bn), B * (HQ if atomic else HKV))](
        q, k, v, do, lse, delta, dk, dv, scale, scale * LOG2E, *strides, *dk.stride(), *dv.stride(),
        HQ, group, NQ, NKV, causal_off, CAUSAL=causal, ATOMIC=atomic, BLOCK_M=cfg.get("BWD_M", bm),
        BLOCK_N=bn, HEAD_D=D, HEAD_DV=DV, UPCAST=up, **launch_options(cfg))
    tri_fa2_bwd_dq[(triton.cdiv(NQ, bm), B * HQ)](
        q, k, v, do, lse, delta, dq, scale, scale * LOG2E, *strides, *dq.stride(), HQ, group, NQ, NKV, causal_off,
        CAUSAL=causal, BLOCK_M=bm, BLOCK_N=cfg.get("BWD_N", bn), HEAD_D=D, HEAD_DV=DV, UPCAST=up,
        **launch_options(cfg))
    if atomic:
        dk, dv = dk.to(q.dtype), dv.to(q.dtype)
    return dq, dk, dv
