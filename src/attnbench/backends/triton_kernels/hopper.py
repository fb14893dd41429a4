"""The Hopper rung: FA2's partitioning with what of FA3's schedule Triton can express, each feature a switch so the ablation is one grid.

- TMA: Q, K, V and O move through tensor descriptors (tl.make_tensor_descriptor: 4-D over the tensors' own strides,
  out-of-range rows padded with zeros on load and dropped on store), issued by the TMA unit, not by threads.
- WS: the KV loop asks for warp specialisation (tl.range(..., warp_specialize=True)), the compiler's form of FA3's
  producer/consumer warpgroups; Triton 3.6 applies it on Blackwell only: on sm_90 the PTX is the base's
  (lab/triton_compile_check.py), so there the -ws variant is a control.
- STAGES: the KV loop's software-pipeline depth (K/V blocks in flight), FA3's intra-loop pipelining as far as the
  compiler's schedule goes.
- PERSISTENT: one program per SM looping over (query block, batch·head) tiles, heaviest causal tiles first.
- SPLIT (a tuning candidate of the flagship): the query tile as two halves with their own running max and sum, both
  halves' QK^T issued first, so one half's softmax can run under the other's P@V wgmma.
Every variant: m kept in the scaled base-2 domain (scale and max subtraction one FMA per score, the row max scaled
instead of every score) and P@V accumulated into the rescaled acc by the MMA itself.
What Triton cannot say: FA3's ping-pong between two consumer warpgroups (named barriers ordering one group's softmax
under the other's GEMMs), the intra-warpgroup overlap of softmax with the next WGMMA issued asynchronously by hand,
and register reallocation between producer and consumers (setmaxnreg); the compiler decides all three or none."""
from __future__ import annotations

import triton
import triton.language as tl

from .common import LOG2E, fold, fold_masked, mm, upcast


@triton.jit
def _keep(offs_m, kv, NKV, CAUSAL_OFF, CAUSAL: tl.constexpr):
    keep = kv[None, :] < NKV
    if CAUSAL:
        keep = keep & (kv[None, :] <= offs_m[:, None] + CAUSAL_OFF)
    return keep


@triton.jit
def _finish(acc, m_i, l_i, o_desc, LSE, b, h, m0, NQ, HQ, ROWS: tl.constexpr, HEAD_DV: tl.constexpr):
    """Deferred normalisation, the LSE (natural log, from the base-2 m) and O's store for ROWS query rows from m0."""
    offs_m = m0 + tl.arange(0, ROWS)
    l_safe = tl.where(l_i == 0.0, 1.0, l_i)
    acc = acc / l_safe[:, None]
    lse = tl.where(l_i == 0.0, float("inf"), (m_i + tl.math.log2(l_safe)) / 1.4426950408889634)
    tl.store(LSE + (b * HQ + h) * NQ + offs_m, lse, mask=offs_m < NQ)
    o_desc.store([b, h, m0, 0], acc.to(o_desc.dtype).reshape([1, 1, ROWS, HEAD_DV]))


@triton.jit
def _bounds(pid_m, NKV, CAUSAL_OFF, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """[0, full_hi) the KV blocks wholly visible to the query tile (no mask), [full_hi, hi) the diagonal and tail."""
    hi = NKV
    full_hi = (NKV // BLOCK_N) * BLOCK_N
    if CAUSAL:
        hi = tl.minimum(NKV, tl.maximum((pid_m + 1) * BLOCK_M + CAUSAL_OFF, 0))
        full_hi = tl.minimum(full_hi, (tl.maximum(pid_m * BLOCK_M + CAUSAL_OFF + 1, 0) // BLOCK_N) * BLOCK_N)
    return full_hi, hi


@triton.jit
def _hop_tile(q_desc, k_desc, v_desc, o_desc, LSE, b, h, hk, pid_m, NQ, NKV, CAUSAL_OFF, qk_scale,
              CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_D: tl.constexpr,
              HEAD_DV: tl.constexpr, WS: tl.constexpr, UPCAST: tl.constexpr, HQ):
    m0 = pid_m * BLOCK_M
    offs_m = m0 + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    q = q_desc.load([b, h, m0, 0]).reshape([BLOCK_M, HEAD_D])
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DV], tl.float32)
    full_hi, hi = _bounds(pid_m, NKV, CAUSAL_OFF, CAUSAL, BLOCK_M, BLOCK_N)
    # the blocks wholly visible: no mask, the loop the pipeliner and the warp specialiser work on
    for start_n in tl.range(0, full_hi, BLOCK_N, warp_specialize=WS):
        k = k_desc.load([b, hk, start_n, 0]).reshape([BLOCK_N, HEAD_D])
        v = v_desc.load([b, hk, start_n, 0]).reshape([BLOCK_N, HEAD_DV])
        acc, m_i, l_i = fold(acc, m_i, l_i, mm(q, tl.trans(k), UPCAST), v, qk_scale, UPCAST)
    for start_n in tl.range(full_hi, hi, BLOCK_N):  # the diagonal and the tail: masked
        k = k_desc.load([b, hk, start_n, 0]).reshape([BLOCK_N, HEAD_D])
        v = v_desc.load([b, hk, start_n, 0]).reshape([BLOCK_N, HEAD_DV])
        acc, m_i, l_i = fold_masked(acc, m_i, l_i, mm(q, tl.trans(k), UPCAST),
                                    _keep(offs_m, start_n + offs_n, NKV, CAUSAL_OFF, CAUSAL), v, qk_scale, UPCAST)
    _finish(acc, m_i, l_i, o_desc, LSE, b, h, m0, NQ, HQ, BLOCK_M, HEAD_DV)


@triton.jit
def _hop_tile_split(q_desc, k_desc, v_desc, o_desc, LSE, b, h, hk, pid_m, NQ, NKV, CAUSAL_OFF, qk_scale,
                    CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_D: tl.constexpr,
                    HEAD_DV: tl.constexpr, WS: tl.constexpr, UPCAST: tl.constexpr, HQ):
    """_hop_tile with the query tile as two halves of BLOCK_M/2 rows, each with its own (acc, m, l): both halves'
    QK^T are issued before either softmax, so the compiler may run one half's softmax under the other's MMA (the
    nearest Triton form of FA3's overlap of softmax with the GEMMs; whether it does is the compiler's choice)."""
    HALF: tl.constexpr = BLOCK_M // 2
    m0 = pid_m * BLOCK_M
    offs_a = m0 + tl.arange(0, HALF)
    offs_b = offs_a + HALF
    offs_n = tl.arange(0, BLOCK_N)
    qa = q_desc.load([b, h, m0, 0]).reshape([HALF, HEAD_D])
    qb = q_desc.load([b, h, m0 + HALF, 0]).reshape([HALF, HEAD_D])
    m_a = tl.full([HALF], float("-inf"), tl.float32)
    m_b = tl.full([HALF], float("-inf"), tl.float32)
    l_a = tl.zeros([HALF], tl.float32)
    l_b = tl.zeros([HALF], tl.float32)
    acc_a = tl.zeros([HALF, HEAD_DV], tl.float32)
    acc_b = tl.zeros([HALF, HEAD_DV], tl.float32)
    full_hi, hi = _bounds(pid_m, NKV, CAUSAL_OFF, CAUSAL, BLOCK_M, BLOCK_N)
    for start_n in tl.range(0, full_hi, BLOCK_N, warp_specialize=WS):
        k = k_desc.load([b, hk, start_n, 0]).reshape([BLOCK_N, HEAD_D])
        v = v_desc.load([b, hk, start_n, 0]).reshape([BLOCK_N, HEAD_DV])
        kt = tl.trans(k)
        s_a = mm(qa, kt, UPCAST)
        s_b = mm(qb, kt, UPCAST)
        acc_a, m_a, l_a = fold(acc_a, m_a, l_a, s_a, v, qk_scale, UPCAST)
        acc_b, m_b, l_b = fold(acc_b, m_b, l_b, s_b, v, qk_scale, UPCAST)
    for start_n in tl.range(full_hi, hi, BLOCK_N):
        k = k_desc.load([b, hk, start_n, 0]).reshape([BLOCK_N, HEAD_D])
        v = v_desc.load([b, hk, start_n, 0]).reshape([BLOCK_N, HEAD_DV])
        kt = tl.trans(k)
        s_a = mm(qa, kt, UPCAST)
        s_b = mm(qb, kt, UPCAST)
        kv = start_n + offs_n
        acc_a, m_a, l_a = fold_masked(acc_a, m_a, l_a, s_a, _keep(offs_a, kv, NKV, CAUSAL_OFF, CAUSAL), v,
                                      qk_scale, UPCAST)
        acc_b, m_b, l_b = fold_masked(acc_b, m_b, l_b, s_b, _keep(offs_b, kv, NKV, CAUSAL_OFF, CAUSAL), v,
                                      qk_scale, UPCAST)
    _finish(acc_a, m_a, l_a, o_desc, LSE, b, h, m0, NQ, HQ, HALF, HEAD_DV)
    _finish(acc_b, m_b, l_b, o_desc, LSE, b, h, m0 + HALF, NQ, HQ, HALF, HEAD_DV)


@triton.jit
def _one_tile(q_desc, k_desc, v_desc, o_desc, LSE, b, h, hk, pid_m, NQ, NKV, CAUSAL_OFF, qk_scale,
              CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_D: tl.constexpr,
              HEAD_DV: tl.constexpr, WS: tl.constexpr, SPLIT: tl.constexpr, UPCAST: tl.constexpr, HQ):
    if SPLIT:
        _hop_tile_split(q_desc, k_desc, v_desc, o_desc, LSE, b, h, hk, pid_m, NQ, NKV, CAUSAL_OFF, qk_scale, CAUSAL,
                        BLOCK_M, BLOCK_N, HEAD_D, HEAD_DV, WS, UPCAST, HQ)
    else:
        _hop_tile(q_desc, k_desc, v_desc, o_desc, LSE, b, h, hk, pid_m, NQ, NKV, CAUSAL_OFF, qk_scale, CAUSAL,
                  BLOCK_M, BLOCK_N, HEAD_D, HEAD_DV, WS, UPCAST, HQ)


@triton.jit
def tri_hop_fwd(Q, K, V, O, LSE, qk_scale,
                sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, sob, soh, son,
                B, HQ, HKV, NQ, NKV, CAUSAL_OFF,
                CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_D: tl.constexpr,
                HEAD_DV: tl.constexpr, WS: tl.constexpr, PERSISTENT: tl.constexpr, UPCAST: tl.constexpr,
                SPLIT: tl.constexpr = False):
    ROWS: tl.constexpr = BLOCK_M // 2 if SPLIT else BLOCK_M  # the rows one descriptor moves: a half tile when split
    q_desc = tl.make_tensor_descriptor(Q, shape=[B, HQ, NQ, HEAD_D], strides=[sqb, sqh, sqn, 1],
                                       block_shape=[1, 1, ROWS, HEAD_D])
    k_desc = tl.make_tensor_descriptor(K, shape=[B, HKV, NKV, HEAD_D], strides=[skb, skh, skn, 1],
                                       block_shape=[1, 1, BLOCK_N, HEAD_D])
    v_desc = tl.make_tensor_descriptor(V, shape=[B, HKV, NKV, HEAD_DV], strides=[svb, svh, svn, 1],
                                       block_shape=[1, 1, BLOCK_N, HEAD_DV])
    o_desc = tl.make_tensor_descriptor(O, shape=[B, HQ, NQ, HEAD_DV], strides=[sob, soh, son, 1],
                                       block_shape=[1, 1, ROWS, HEAD_DV])
    group = HQ // HKV
    n_m = tl.cdiv(NQ, BLOCK_M)
    if PERSISTENT:
        total = n_m * B * HQ
        for tile in tl.range(tl.program_id(0), total, tl.num_programs(0)):
            # heaviest query blocks first (a causal row block's work grows with its index), heads inner
            pid_m = n_m - 1 - tile // (B * HQ)
            bh = tile % (B * HQ)
            _one_tile(q_desc, k_desc, v_desc, o_desc, LSE, bh // HQ, bh % HQ, (bh % HQ) // group, pid_m, NQ, NKV,
                      CAUSAL_OFF, qk_scale, CAUSAL, BLOCK_M, BLOCK_N, HEAD_D, HEAD_DV, WS, SPLIT, UPCAST, HQ)
    else:
        pid_m = tl.num_programs(0) - 1 - tl.program_id(0)  # heaviest first here too
        bh = tl.program_id(1)
        _one_tile(q_desc, k_desc, v_desc, o_desc, LSE, bh // HQ, bh % HQ, (bh % HQ) // group, pid_m, NQ, NKV,
                  CAUSAL_OFF, qk_scale, CAUSAL, BLOCK_M, BLOCK_N, HEAD_D, HEAD_DV, WS, SPLIT, UPCAST, HQ)


_ALLOCATOR_SET = False


def _allocator() -> None:
    """Device-side tensor descriptors need global scratch: Triton asks the allocator set here for it."""
    global _ALLOCATOR_SET
    if _ALLOCATOR_SET:
        return
    import torch

    def alloc(size: int, alignment: int, stream):
        return torch.empty(size, device="cuda" if torch.cuda.is_available() else "cpu", dtype=torch.int8)

    triton.set_allocator(alloc)
    _ALLOCATOR_SET = True


def forward(q, k, v, o, lse, scale: float, causal: bool, causal_off: int, cfg: dict, features: dict) -> None:
    """(B, H, N, D) views with unit stride along D (TMA's rule; to_bhnd views of either layout have it). A config's
    PERSISTENT, SPLIT and WS (the flagship tunes over them) win over the variant's features."""
    import torch

    _allocator()
    B, HQ, NQ, D = q.shape
    HKV, NKV, DV = k.shape[1], k.shape[2], v.shape[3]
    bm = cfg["BLOCK_M"]
    n_m = triton.cdiv(NQ, bm)
    persistent = bool(cfg.get("PERSISTENT", features.get("persistent")))
    if persistent:
        sms = torch.cuda.get_device_properties(q.device).multi_processor_count if q.is_cuda else 2
        grid = (min(sms, n_m * B * HQ),)
    else:
        grid = (n_m, B * HQ)
    tri_hop_fwd[grid](q, k, v, o, lse, scale * LOG2E, q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1),
                      k.stride(2), v.stride(0), v.stride(1), v.stride(2), o.stride(0), o.stride(1), o.stride(2),
                      B, HQ, HKV, NQ, NKV, causal_off, CAUSAL=causal, BLOCK_M=bm, BLOCK_N=cfg["BLOCK_N"], HEAD_D=D,
                      HEAD_DV=DV, WS=bool(cfg.get("WS", features.get("ws"))), PERSISTENT=persistent,
                      UPCAST=upcast(q), SPLIT=bool(cfg.get("SPLIT", False)), num_warps=cfg["num_warps"],
                      num_stages=cfg["num_stages"], **({"maxnreg": cfg["maxnreg"]} if cfg.get("maxnreg") else {}))
