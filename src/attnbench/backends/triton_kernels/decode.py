"""Split-KV decoding (flash-decoding): the KV sequence cut into splits run in parallel, each writing a partial O and its LSE, then a reduction kernel merging them.

GQA-aware: one program per (batch, KV head, split) takes the group's query heads as the rows of one matmul, so
K/V are read once per group, not once per query head. The cache is contiguous (B, Hkv, N, D) in either layout, or
paged (num_pages, page_size, Hkv, D) through a page table (B, pages_per_seq). Buffers are allocated once per
attempt, every launch argument is computed once (plan) and nothing synchronises the host, so the two launches
can be captured in a CUDA graph and an eager step costs the host two launches only."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import LOG2E, launch_options, mm, softmax_step, upcast
from .launch import Launch


@triton.jit
def tri_dec_split(Q, K, V, TABLE, PART_O, PART_L, qk_scale,
                  sqb, sqh, sqd, skb, skh, skn, skd, svb, svh, svn, svd, stb, stp,
                  HQ, HKV, GROUP, N_VIS, CHUNK, NSPLIT, PAGE,
                  PAGED: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr,
                  HEAD_D: tl.constexpr, HEAD_DV: tl.constexpr, UPCAST: tl.constexpr):
    split = tl.program_id(0)
    bk = tl.program_id(1)
    b = bk // HKV
    hk = bk % HKV
    offs_h = tl.arange(0, BLOCK_H)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_D)
    offs_dv = tl.arange(0, HEAD_DV)
    heads = hk * GROUP + offs_h
    hmask = offs_h < GROUP
    q = tl.load(Q + b * sqb + heads[:, None] * sqh + offs_d[None, :] * sqd, mask=hmask[:, None], other=0.0)
    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, HEAD_DV], tl.float32)
    lo = split * CHUNK
    hi = tl.minimum(lo + CHUNK, N_VIS)
    for start_n in range(lo, hi, BLOCK_N):
        kv = start_n + offs_n
        live = kv < hi
        if PAGED:  # token kv lives in slot kv % PAGE of page TABLE[b, kv // PAGE]
            page = tl.load(TABLE + b * stb + (kv // PAGE) * stp, mask=live, other=0)
            k_row = page.to(tl.int64) * skb + (kv % PAGE) * skn
            v_row = page.to(tl.int64) * svb + (kv % PAGE) * svn
        else:
            k_row = b * skb + kv.to(tl.int64) * skn
            v_row = b * svb + kv.to(tl.int64) * svn
        kT = tl.load(K + hk * skh + k_row[None, :] + offs_d[:, None] * skd, mask=live[None, :], other=0.0)
        v = tl.load(V + hk * svh + v_row[:, None] + offs_dv[None, :] * svd, mask=live[:, None], other=0.0)
        s = tl.where(live[None, :], mm(q, kT, UPCAST) * qk_scale, float("-inf"))
        p, alpha, m_new, l_i = softmax_step(s, m_i, l_i)
        acc = acc * alpha[:, None] + mm(p.to(v.dtype), v, UPCAST)
        m_i = m_new
    l_safe = tl.where(l_i == 0.0, 1.0, l_i)
    # partial O normalised within the split; its base-2 LSE (-inf: the split saw no key)
    lse2 = tl.where(l_i == 0.0, float("-inf"), m_i + tl.math.log2(l_safe))
    row = (b * HQ + heads) * NSPLIT + split
    tl.store(PART_L + row, lse2, mask=hmask)
    tl.store(PART_O + row[:, None] * HEAD_DV + offs_dv[None, :], acc / l_safe[:, None], mask=hmask[:, None])


@triton.jit
def tri_dec_reduce(PART_O, PART_L, O, sob, soh, sod, HQ, NSPLIT,
                   BLOCK_S: tl.constexpr, HEAD_DV: tl.constexpr):
    """O of one (batch, query head): the splits' partial O weighted by exp2(lse_s - max lse)."""
    bh = tl.program_id(0)
    b = bh // HQ
    h = bh % HQ
    offs_s = tl.arange(0, BLOCK_S)
    offs_dv = tl.arange(0, HEAD_DV)
    smask = offs_s < NSPLIT
    lse = tl.load(PART_L + bh * NSPLIT + offs_s, mask=smask, other=float("-inf"))
    m = tl.max(lse, 0)
    m = tl.where(m == float("-inf"), 0.0, m)
    w = tl.math.exp2(lse - m)
    parts = tl.load(PART_O + (bh * NSPLIT + offs_s)[:, None] * HEAD_DV + offs_dv[None, :], mask=smask[:, None],
                    other=0.0)
    total = tl.sum(w, 0)
    o = tl.sum(parts * w[:, None], 0) / tl.where(total == 0.0, 1.0, total)
    tl.store(O + b * sob + h * soh + offs_dv * sod, o.to(O.dtype.element_ty))


def splits_for(batch: int, kv_heads: int, n_vis: int, block_n: int, sms: int, per_sm: int = 2,
               fill: str = "over") -> int:
    """Splits per (batch, KV head), none shorter than one KV block. fill "over" (v1): at least `per_sm`
    programs per SM (B8 Hkv8 on 132 SMs: 5 splits, 320 programs, 56 SMs with 3 where the rest have 2);
    "under": at most that many (4 splits, 256 programs: no SM with more than 2, the bytes per SM within 3 %)."""
    pairs = max(1, batch * kv_heads)
    want = -(-per_sm * sms // pairs) if fill == "over" else per_sm * sms // pairs
    return max(1, min(want, -(-n_vis // block_n)))


def buffers(batch: int, q_heads: int, nsplit: int, dv: int, device) -> tuple:
    part_o = torch.empty(batch * q_heads * nsplit, dv, device=device, dtype=torch.float32)
    return part_o, torch.empty(batch * q_heads * nsplit, device=device, dtype=torch.float32)


def plan(q, k, v, o, table, page: int, n_vis: int, scale: float, nsplit: int, bufs, cfg: dict,
         fast: bool = False) -> tuple[Launch, Launch]:
    """The split and the reduction launches, every argument computed here once. q (B, Hq, 1, D) and o (B, Hq, 1,
    Dv) views; k, v (B, Hkv, N, D) views, or pages (P, page, Hkv, D) with `table` (B, pages_per_seq) when paged.
    `fast`: launched past the JIT after their first call (launch.Launch)."""
    B, HQ, _, D = q.shape
    paged = table is not None
    HKV = k.shape[2] if paged else k.shape[1]
    DV = v.shape[3]
    group = HQ // HKV
    bn = cfg["BLOCK_N"]
    chunk = -(-(-(-n_vis // nsplit)) // bn) * bn
    part_o, part_l = bufs
    if paged:  # pages as (page, slot, head, d): the "batch" stride steps pages, the "row" stride slots
        ks = (k.stride(0), k.stride(2), k.stride(1), k.stride(3))
        vs = (v.stride(0), v.stride(2), v.stride(1), v.stride(3))
        ts = table.stride()
    else:
        ks, vs, ts = k.stride(), v.stride(), (0, 0)
    qs = (q.stride(0), q.stride(1), q.stride(3))
    split = Launch(tri_dec_split, (nsplit, B * HKV),
                   (q, k, v, table if paged else q, part_o, part_l, scale * LOG2E, *qs, *ks, *vs, *ts, HQ, HKV, group,
                    n_vis, chunk, nsplit, page),
                   dict(PAGED=paged, BLOCK_H=max(16, triton.next_power_of_2(group)), BLOCK_N=bn, HEAD_D=D, HEAD_DV=DV,
                        UPCAST=upcast(q), **launch_options(cfg)), fast)
    reduce = Launch(tri_dec_reduce, (B * HQ,), (part_o, part_l, o, o.stride(0), o.stride(1), o.stride(3), HQ, nsplit),
                    dict(BLOCK_S=max(2, triton.next_power_of_2(nsplit)), HEAD_DV=DV, num_warps=4), fast)
    return split, reduce
