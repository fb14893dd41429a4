"""The FP8 rung: e4m3 forward with per-block scales, optional incoherent processing (Hadamard), P quantised (FA3 §3.3).

A quantisation kernel turns the step's 16-bit Q, K, V into e4m3 codes with one scale per 128 rows of one
(batch, head) (amax / 448), Q and K first multiplied by M = diag(±1)·H/√d when incoherent (QM(KM)ᵀ = QKᵀ, an
outlier spread over the head dimension); V is written transposed (D, N) so that both fp8 products read their
operands k-major, as Hopper's fp8 WGMMA requires (FA3's in-kernel transpose, done here in the quantiser's pass).
The attention kernel runs on the codes: scores scaled by the two blocks' scales, P·448 cast to e4m3 before the PV
product, O written in the step's dtype. Two versions, each a tuning candidate: v1 (tri_fp8_fwd) is FA2's loop with
pointer loads, v2 (tri_fp8_fwd_tma) the Hopper rung's: tensor descriptors (TMA), the unmasked blocks pipelined
apart from the masked diagonal, the scales folded into the exponent's one FMA. With 16-bit inputs the quantisation
runs inside the timed step (fp8_step.py): a 16-bit caller pays it."""
from __future__ import annotations


import torch
import triton
import triton.language as tl

from .common import LOG2E, launch_options, mm, softmax_step

QBLOCK = 128  # rows per scale
FP8_MAX = 448.0
QUANT_WARPS = 8  # the quantiser's: at 4 a 128-row block of D=128 spills (255 registers, 296 B stack on sm_90), at 8 not
LOG2_448 = tl.constexpr(8.807354922057604)  # log2(448): the exponent that makes P·448


@triton.jit
def to_e4m3(x, dtype: tl.constexpr, PREROUND: tl.constexpr):
    """x (fp32, |x| <= 448) cast to e4m3. PREROUND (CPU interpreter only): Triton 3.6's interpreter loses the carry
    when rounding up across a power of two (125.7 -> 64, not 128), so the value is first rounded to its e4m3
    neighbour with arithmetic (3 mantissa bits, exponents from -6) and the cast is then exact."""
    if PREROUND:
        a = tl.abs(x)
        e = tl.maximum(tl.floor(tl.math.log2(tl.where(a > 0, a, 1.0))), -6.0)
        quantum = tl.math.exp2(e - 3.0)
        x = tl.where(a > 0, tl.floor(x / quantum + 0.5) * quantum, 0.0)
    return x.to(dtype)


@triton.jit
def tri_fp8_quant(X, M, CODES, SCALES, inv_sqrt_d, sxb, sxh, sxn, sxd, H, N, NBLK, NT,
                  HADAMARD: tl.constexpr, TRANSPOSE: tl.constexpr, QB: tl.constexpr, HEAD_D: tl.constexpr,
                  UPCAST: tl.constexpr):
    blk = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    rows = blk * QB + tl.arange(0, QB)
    offs_d = tl.arange(0, HEAD_D)
    x = tl.load(X + b * sxb + h * sxh + rows[:, None] * sxn + offs_d[None, :] * sxd, mask=rows[:, None] < N,
                other=0.0)
    if HADAMARD:  # x · diag(±1)·H in x's own dtype (±1 is exact there; fp32 sums), then the 1/√d
        m = tl.load(M + offs_d[:, None] * HEAD_D + offs_d[None, :])
        x = mm(x, m, UPCAST) * inv_sqrt_d
    else:
        x = x.to(tl.float32)
    amax = tl.max(tl.max(tl.abs(x), 1), 0)
    scale = tl.where(amax > 0, amax / 448.0, 1.0)
    codes = to_e4m3(tl.minimum(tl.maximum(x / scale, -448.0), 448.0), CODES.dtype.element_ty, UPCAST)
    tl.store(SCALES + bh * NBLK + blk, scale)
    if TRANSPOSE:  # (B*H, D, NT): the PV product's operand, k-major (rows NT >= N apart: TMA's 16-byte rule)
        tl.store(CODES + bh * HEAD_D * NT + offs_d[:, None] * NT + rows[None, :], tl.trans(codes),
                 mask=rows[None, :] < N)
    else:
        tl.store(CODES + (bh * N + rows[:, None]) * HEAD_D + offs_d[None, :], codes, mask=rows[:, None] < N)


@triton.jit
def _dot(a, b, acc, UPCAST: tl.constexpr):
    """a @ b added to acc in place (the accumulator the MMA itself adds to); UPCAST as common.mm's."""
    if UPCAST:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc)
    else:
        return tl.dot(a, b, acc)


@triton.jit
def tri_fp8_fwd(Q8, K8, VT8, SQ, SK, SV, O, qk_scale, sqb, sqh, sqn, skb, skh, skn, svb, svh, svd,
                sob, soh, son, sod, HQ, GROUP, NQ, NKV, NBQ, NBK, CAUSAL_OFF,
                CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, QB: tl.constexpr,
                HEAD_D: tl.constexpr, HEAD_DV: tl.constexpr, PER_TENSOR: tl.constexpr, O_FP8: tl.constexpr,
                UPCAST: tl.constexpr):
    """v1: FA2's loop on the codes, pointer loads, every block masked."""
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // HQ
    h = bh % HQ
    hk = h // GROUP
    bk = b * (HQ // GROUP) + hk
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_D)
    offs_dv = tl.arange(0, HEAD_DV)
    q = tl.load(Q8 + b * sqb + h * sqh + offs_m[:, None] * sqn + offs_d[None, :], mask=offs_m[:, None] < NQ,
                other=0.0)
    if PER_TENSOR:
        q_scale = tl.load(SQ) * qk_scale
    else:
        q_scale = tl.load(SQ + bh * NBQ + (pid_m * BLOCK_M) // QB) * qk_scale
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DV], tl.float32)
    hi = NKV
    if CAUSAL:
        hi = tl.minimum(NKV, tl.maximum((pid_m + 1) * BLOCK_M + CAUSAL_OFF, 0))
    for start_n in range(0, hi, BLOCK_N):
        kv = start_n + offs_n
        kT = tl.load(K8 + b * skb + hk * skh + kv[None, :] * skn + offs_d[:, None], mask=kv[None, :] < NKV,
                     other=0.0)
        vT = tl.load(VT8 + b * svb + hk * svh + offs_dv[:, None] * svd + kv[None, :], mask=kv[None, :] < NKV,
                     other=0.0)
        if PER_TENSOR:
            k_scale = tl.load(SK)
            v_scale = tl.load(SV)
        else:
            k_scale = tl.load(SK + bk * NBK + start_n // QB)
            v_scale = tl.load(SV + bk * NBK + start_n // QB)
        s = mm(q, kT, UPCAST) * (q_scale * k_scale)
        keep = kv[None, :] < NKV
        if CAUSAL:
            keep = keep & (kv[None, :] <= offs_m[:, None] + CAUSAL_OFF)
        s = tl.where(keep, s, float("-inf"))
        p, alpha, m_new, l_i = softmax_step(s, m_i, l_i)
        p8 = to_e4m3(p * 448.0, vT.dtype, UPCAST)  # P quantised: e4m3 of P·448, divided back with V's scale
        acc = acc * alpha[:, None] + mm(p8, tl.trans(vT), UPCAST) * (v_scale / 448.0)
        m_i = m_new
    l_safe = tl.where(l_i == 0.0, 1.0, l_i)
    _store_o(O, acc / l_safe[:, None], b, h, offs_m, sob, soh, son, sod, NQ, HEAD_DV, O_FP8, UPCAST)


@triton.jit
def _store_o(O, out, b, h, offs_m, sob, soh, son, sod, NQ, HEAD_DV: tl.constexpr, O_FP8: tl.constexpr,
             UPCAST: tl.constexpr):
    if O_FP8:
        out = to_e4m3(tl.minimum(tl.maximum(out, -448.0), 448.0), O.dtype.element_ty, UPCAST)
    else:
        out = out.to(O.dtype.element_ty)
    offs_dv = tl.arange(0, HEAD_DV)
    tl.store(O + b * sob + h * soh + offs_m[:, None] * son + offs_dv[None, :] * sod, out, mask=offs_m[:, None] < NQ)


@triton.jit
def _fold8(s, vt, acc, m_i, l_i, ratio, c, offs_m, kv, NKV, CAUSAL_OFF, MASK: tl.constexpr, CAUSAL: tl.constexpr,
           UPCAST: tl.constexpr):
    """One KV block's raw scores `s` folded into (acc, m, l). Scores stay unscaled until the exponent: one FMA per
    score s·c - m' with c = the blocks' scales times softmax scale·log2(e) (c > 0, so max(s·c) = c·max(s)) and m'
    the running maximum less log2(448), which makes the exponent P·448 itself, the e4m3 operand (l and acc both
    carry the 448: it cancels in acc / l). Per-block V scales: acc is kept in units of the last block's V scale
    (`ratio` = previous / this block's), so the rescale is one multiply per element, as the bf16 rung's alpha, and
    the MMA adds into acc in place."""
    if MASK:
        keep = kv[None, :] < NKV
        if CAUSAL:
            keep = keep & (kv[None, :] <= offs_m[:, None] + CAUSAL_OFF)
        s = tl.where(keep, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1) * c)
    m_use = m_new
    if MASK:  # a row that has seen no key yet has nothing to subtract
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
    p = tl.math.exp2(s * c - (m_use - LOG2_448)[:, None])
    r = tl.math.exp2(m_i - m_use)
    l_i = l_i * r + tl.sum(p, 1)
    acc = _dot(to_e4m3(p, vt.dtype, UPCAST), tl.trans(vt), acc * (r * ratio)[:, None], UPCAST)
    return acc, m_new, l_i


@triton.jit
def _tma_block(qa, qb, k_desc, vt_desc, SK, SV, acc_a, m_a, l_a, acc_b, m_b, l_b, v_run, b, hk, bk, start_n,
               offs_a, offs_b, q_scale, qb_scale, NKV, NBK, CAUSAL_OFF, MASK: tl.constexpr, CAUSAL: tl.constexpr,
               SPLIT: tl.constexpr, BLOCK_N: tl.constexpr, QB: tl.constexpr, HEAD_D: tl.constexpr,
               HEAD_DV: tl.constexpr, PER_TENSOR: tl.constexpr, UPCAST: tl.constexpr):
    """One KV block of the TMA kernel for the query tile qa, or, SPLIT, for its two halves qa and qb, each with its
    own (acc, m, l): both QK^T issued before either softmax, so one half's softmax may run under the other's MMA."""
    k = k_desc.load([b, hk, start_n, 0]).reshape([BLOCK_N, HEAD_D])
    vt = vt_desc.load([b, hk, 0, start_n]).reshape([HEAD_DV, BLOCK_N])
    if PER_TENSOR:
        c = q_scale
        c_b = qb_scale
        v_scale = v_run
        ratio = 1.0
    else:
        k_scale = tl.load(SK + bk * NBK + start_n // QB)
        c = q_scale * k_scale
        c_b = qb_scale * k_scale
        v_scale = tl.load(SV + bk * NBK + start_n // QB)
        ratio = v_run / v_scale
    kv = start_n + tl.arange(0, BLOCK_N)
    kt = tl.trans(k)
    s_a = mm(qa, kt, UPCAST)
    if SPLIT:
        s_b = mm(qb, kt, UPCAST)
        acc_a, m_a, l_a = _fold8(s_a, vt, acc_a, m_a, l_a, ratio, c, offs_a, kv, NKV, CAUSAL_OFF, MASK, CAUSAL,
                                 UPCAST)
        acc_b, m_b, l_b = _fold8(s_b, vt, acc_b, m_b, l_b, ratio, c_b, offs_b, kv, NKV, CAUSAL_OFF, MASK, CAUSAL,
                                 UPCAST)
    else:
        acc_a, m_a, l_a = _fold8(s_a, vt, acc_a, m_a, l_a, ratio, c, offs_a, kv, NKV, CAUSAL_OFF, MASK, CAUSAL,
                                 UPCAST)
    return acc_a, m_a, l_a, acc_b, m_b, l_b, v_scale


@triton.jit
def tri_fp8_fwd_tma(Q8, K8, VT8, SQ, SK, SV, O, qk_scale, sqb, sqh, sqn, skb, skh, skn, svb, svh, svd,
                    sob, soh, son, sod, B, HQ, HKV, NQ, NKV, NBQ, NBK, CAUSAL_OFF,
                    CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, QB: tl.constexpr,
                    HEAD_D: tl.constexpr, HEAD_DV: tl.constexpr, PER_TENSOR: tl.constexpr, O_FP8: tl.constexpr,
                    UPCAST: tl.constexpr, SPLIT: tl.constexpr = False):
    """v2: the Hopper rung's loop on the codes: Q, K, Vᵀ through tensor descriptors (TMA), the wholly visible
    blocks unmasked and software-pipelined (num_stages), the diagonal and the tail masked, heaviest tiles first.
    SPLIT: the query tile as two halves of BLOCK_M/2 rows (BLOCK_M = 2·QB: each half has its own Q scale)."""
    ROWS: tl.constexpr = BLOCK_M // 2 if SPLIT else BLOCK_M
    q_desc = tl.make_tensor_descriptor(Q8, shape=[B, HQ, NQ, HEAD_D], strides=[sqb, sqh, sqn, 1],
                                       block_shape=[1, 1, ROWS, HEAD_D])
    k_desc = tl.make_tensor_descriptor(K8, shape=[B, HKV, NKV, HEAD_D], strides=[skb, skh, skn, 1],
                                       block_shape=[1, 1, BLOCK_N, HEAD_D])
    vt_desc = tl.make_tensor_descriptor(VT8, shape=[B, HKV, HEAD_DV, NKV], strides=[svb, svh, svd, 1],
                                        block_shape=[1, 1, HEAD_DV, BLOCK_N])
    pid_m = tl.num_programs(0) - 1 - tl.program_id(0)  # heaviest causal tiles first
    bh = tl.program_id(1)
    b = bh // HQ
    h = bh % HQ
    hk = h // (HQ // HKV)
    bk = b * HKV + hk
    m0 = pid_m * BLOCK_M
    offs_a = m0 + tl.arange(0, ROWS)
    offs_b = offs_a + ROWS
    qa = q_desc.load([b, h, m0, 0]).reshape([ROWS, HEAD_D])
    qb = qa
    if SPLIT:
        qb = q_desc.load([b, h, m0 + ROWS, 0]).reshape([ROWS, HEAD_D])
    if PER_TENSOR:
        q_scale = tl.load(SQ) * tl.load(SK) * qk_scale
        v_run = tl.load(SV)
        qb_scale = q_scale
    else:
        q_scale = tl.load(SQ + bh * NBQ + m0 // QB) * qk_scale
        v_run = 1.0
        qb_scale = tl.load(SQ + bh * NBQ + tl.minimum((m0 + ROWS) // QB, NBQ - 1)) * qk_scale  # SPLIT's 2nd half
    m_a = tl.full([ROWS], float("-inf"), tl.float32)
    l_a = tl.zeros([ROWS], tl.float32)
    acc_a = tl.zeros([ROWS, HEAD_DV], tl.float32)
    m_b, l_b, acc_b = m_a, l_a, acc_a
    hi = NKV
    full_hi = (NKV // BLOCK_N) * BLOCK_N
    if CAUSAL:
        hi = tl.minimum(NKV, tl.maximum((pid_m + 1) * BLOCK_M + CAUSAL_OFF, 0))
        full_hi = tl.minimum(full_hi, (tl.maximum(m0 + CAUSAL_OFF + 1, 0) // BLOCK_N) * BLOCK_N)
    for start_n in tl.range(0, full_hi, BLOCK_N):
        acc_a, m_a, l_a, acc_b, m_b, l_b, v_run = _tma_block(
            qa, qb, k_desc, vt_desc, SK, SV, acc_a, m_a, l_a, acc_b, m_b, l_b, v_run, b, hk, bk, start_n, offs_a,
            offs_b, q_scale, qb_scale, NKV, NBK, CAUSAL_OFF, False, CAUSAL, SPLIT, BLOCK_N, QB, HEAD_D, HEAD_DV,
            PER_TENSOR, UPCAST)
    for start_n in tl.range(full_hi, hi, BLOCK_N):
        acc_a, m_a, l_a, acc_b, m_b, l_b, v_run = _tma_block(
            qa, qb, k_desc, vt_desc, SK, SV, acc_a, m_a, l_a, acc_b, m_b, l_b, v_run, b, hk, bk, start_n, offs_a,
            offs_b, q_scale, qb_scale, NKV, NBK, CAUSAL_OFF, True, CAUSAL, SPLIT, BLOCK_N, QB, HEAD_D, HEAD_DV,
            PER_TENSOR, UPCAST)
    l_safe = tl.where(l_a == 0.0, 1.0, l_a)
    _store_o(O, acc_a * (v_run / l_safe)[:, None], b, h, offs_a, sob, soh, son, sod, NQ, HEAD_DV, O_FP8,
             UPCAST)
    if SPLIT:
        l_safe = tl.where(l_b == 0.0, 1.0, l_b)
        out_b = acc_b * (v_run / l_safe)[:, None]
        _store_o(O, out_b, b, h, offs_b, sob, soh, son, sod, NQ, HEAD_DV, O_FP8, UPCAST)


def hadamard(d: int, seed: int, device, dtype) -> torch.Tensor:
    """diag(±1)·H ((d, d), entries ±1, exact in `dtype`, the inputs' 16-bit type), the signs fp8_quant.random_signs
    draws for `seed`, so the contract's emulation of the declared scheme turns Q and K by the same matrix; the
    quantiser multiplies by 1/√d after the product (an fp32 matrix of D=256 needs 256 KiB of shared memory)."""
    from ..fp8_quant import random_signs

    h = torch.ones(1, 1, dtype=torch.float64)
    while h.shape[0] < d:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    signs = random_signs(d, seed, "cpu")
    return (signs[:, None] * h).to(device=device, dtype=dtype).contiguous()


class Buffers:
    """The codes and scales of one attempt, allocated once: Q, K codes (B, H, N, D), V's (B, Hkv, Dv, N) in rows
    padded to 16 bytes (a tensor descriptor's strides are multiples of 16 bytes; the padding is never read)."""

    def __init__(self, q, k, v):
        B, HQ, NQ, D = q.shape
        HKV, NKV, DV = k.shape[1], k.shape[2], v.shape[3]
        f8, dev = torch.float8_e4m3fn, q.device
        self.q8 = torch.empty(B, HQ, NQ, D, device=dev, dtype=f8)
        self.k8 = torch.empty(B, HKV, NKV, D, device=dev, dtype=f8)
        self.nt = triton.cdiv(NKV, 16) * 16
        self.vt8 = torch.empty(B, HKV, DV, self.nt, device=dev, dtype=f8)[..., :NKV]
        self.nbq, self.nbk = triton.cdiv(NQ, QBLOCK), triton.cdiv(NKV, QBLOCK)
        self.sq = torch.empty(B * HQ * self.nbq, device=dev, dtype=torch.float32)
        self.sk = torch.empty(B * HKV * self.nbk, device=dev, dtype=torch.float32)
        self.sv = torch.empty_like(self.sk)


def quantise(q, k, v, bufs: Buffers, m, up: bool) -> None:
    """Q, K (turned by `m` when it is not None) and V into the buffers' e4m3 codes and per-block scales."""
    B = q.shape[0]
    for x, codes, scales, nb, had, tr in ((q, bufs.q8, bufs.sq, bufs.nbq, m is not None, False),
                                          (k, bufs.k8, bufs.sk, bufs.nbk, m is not None, False),
                                          (v, bufs.vt8, bufs.sv, bufs.nbk, False, True)):
        tri_fp8_quant[(nb, B * x.shape[1])](x, m if had else x, codes, scales, x.shape[3] ** -0.5, *x.stride(),
                                            x.shape[1], x.shape[2], nb, bufs.nt, HADAMARD=had, TRANSPOSE=tr,
                                            QB=QBLOCK, HEAD_D=x.shape[3], UPCAST=up, num_warps=QUANT_WARPS)


def attend(q8, k8, vt8, scales: tuple, o, scale: float, causal: bool, causal_off: int, cfg: dict,
           per_tensor: bool, up: bool) -> None:
    """The fp8 attention on codes: q8 (B, Hq, Nq, D), k8 (B, Hkv, Nkv, D) views with unit stride along D, vt8
    (B, Hkv, Dv, Nkv) with unit stride along N (16-byte strides for the TMA kernel); `scales` (sq, sk, sv):
    per-block arrays, or one-element tensors when `per_tensor`; o (B, Hq, Nq, Dv) view, written in its own dtype
    (float8 too). cfg["TMA"] picks the kernel (v2, tensor descriptors) over v1 (pointer loads)."""
    B, HQ, NQ, D = q8.shape
    HKV, NKV, DV = k8.shape[1], k8.shape[2], vt8.shape[2]
    sq, sk, sv = scales
    strides = (*q8.stride()[:3], *k8.stride()[:3], *vt8.stride()[:3], *o.stride())
    consts = dict(CAUSAL=causal, BLOCK_M=cfg["BLOCK_M"], BLOCK_N=cfg["BLOCK_N"], QB=QBLOCK, HEAD_D=D, HEAD_DV=DV,
                  PER_TENSOR=per_tensor, O_FP8=o.dtype == torch.float8_e4m3fn, UPCAST=up, **launch_options(cfg))
    grid = (triton.cdiv(NQ, cfg["BLOCK_M"]), B * HQ)
    nbq, nbk = triton.cdiv(NQ, QBLOCK), triton.cdiv(NKV, QBLOCK)
    if cfg.get("TMA"):
        from .hopper import _allocator

        _allocator()
        tri_fp8_fwd_tma[grid](q8, k8, vt8, sq, sk, sv, o, scale * LOG2E, *strides, B, HQ, HKV, NQ, NKV, nbq, nbk,
                              causal_off, SPLIT=bool(cfg.get("SPLIT")), **consts)
    else:
        tri_fp8_fwd[grid](q8, k8, vt8, sq, sk, sv, o, scale * LOG2E, *strides, HQ, HQ // HKV, NQ, NKV, nbq, nbk,
                          causal_off, **consts)


def forward(q, k, v, o, bufs: Buffers, m, scale: float, causal: bool, causal_off: int, cfg: dict,
            up: bool) -> None:
    """16-bit (B, H, N, D) views: quantised (Q, K turned by `m` when given), then attended into o."""
    quantise(q, k, v, bufs, m, up)
    attend(bufs.q8, bufs.k8, bufs.vt8, (bufs.sq, bufs.sk, bufs.sv), o, scale, causal, causal_off, cfg, False, up)
