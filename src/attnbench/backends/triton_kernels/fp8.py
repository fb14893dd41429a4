"""The FP8 rung: e4m3 forward with per-block scales, optional incoherent processing (Hadamard), P quantised; written from FA3 §3.3.

A quantisation kernel turns the step's 16-bit Q, K, V into e4m3 codes with one scale per 128 rows of one
(batch, head) (amax / 448), Q and K first multiplied by M = diag(±1)·H/√d when incoherent (QM(KM)ᵀ = QKᵀ, an
outlier spread over the head dimension); V is written transposed (D, N) so that both fp8 products read their
operands k-major, as Hopper's fp8 WGMMA requires (FA3's in-kernel transpose, done here in the quantiser's pass).
The attention kernel is FA2's loop on the codes: scores scaled by the two blocks' scales, P·448 cast to e4m3
before the PV product and divided back, O written in the step's dtype. The quantisation runs inside the timed
step: a 16-bit caller pays it."""
from __future__ import annotations


import torch
import triton
import triton.language as tl

from .common import LOG2E, launch_options, mm, softmax_step

QBLOCK = 128  # rows per scale
FP8_MAX = 448.0


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
def tri_fp8_quant(X, M, CODES, SCALES, inv_sqrt_d, sxb, sxh, sxn, sxd, H, N, NBLK,
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
    if TRANSPOSE:  # (B*H, D, N): the PV product's operand, k-major
        tl.store(CODES + bh * HEAD_D * N + offs_d[:, None] * N + rows[None, :], tl.trans(codes),
                 mask=rows[None, :] < N)
    else:
        tl.store(CODES + (bh * N + rows[:, None]) * HEAD_D + offs_d[None, :], codes, mask=rows[:, None] < N)


@triton.jit
def tri_fp8_fwd(Q8, K8, VT8, SQ, SK, SV, O, qk_scale, sob, soh, son, sod,
                HQ, GROUP, NQ, NKV, NBQ, NBK, CAUSAL_OFF,
                CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, QB: tl.constexpr,
                HEAD_D: tl.constexpr, HEAD_DV: tl.constexpr, PER_TENSOR: tl.constexpr, O_FP8: tl.constexpr,
                UPCAST: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // HQ
    h = bh % HQ
    bk = b * (HQ // GROUP) + h // GROUP
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_D)
    offs_dv = tl.arange(0, HEAD_DV)
    q = tl.load(Q8 + (bh * NQ + offs_m[:, None]) * HEAD_D + offs_d[None, :], mask=offs_m[:, None] < NQ, other=0.0)
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
        kT = tl.load(K8 + (bk * NKV + kv[None, :]) * HEAD_D + offs_d[:, None], mask=kv[None, :] < NKV, other=0.0)
        vT = tl.load(VT8 + bk * HEAD_DV * NKV + offs_dv[:, None] * NKV + kv[None, :], mask=kv[None, :] < NKV,
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
    out = acc / l_safe[:, None]
    if O_FP8:
        out = to_e4m3(tl.minimum(tl.maximum(out, -448.0), 448.0), O.dtype.element_ty, UPCAST)
    else:
        out = out.to(O.dtype.element_ty)
    tl.store(O + b * sob + h * soh + offs_m[:, None] * son + offs_dv[None, :] * sod, out, mask=offs_m[:, None] < NQ)


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
    """The codes and scales of one attempt, allocated once."""

    def __init__(self, q, k, v):
        B, HQ, NQ, D = q.shape
        HKV, NKV, DV = k.shape[1], k.shape[2], v.shape[3]
        f8, dev = torch.float8_e4m3fn, q.device
        self.q8 = torch.empty(B * HQ, NQ, D, device=dev, dtype=f8)
        self.k8 = torch.empty(B * HKV, NKV, D, device=dev, dtype=f8)
        self.vt8 = torch.empty(B * HKV, DV, NKV, device=dev, dtype=f8)
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
                                            x.shape[1], x.shape[2],
                                            nb, HADAMARD=had, TRANSPOSE=tr, QB=QBLOCK, HEAD_D=x.shape[3], UPCAST=up,
                                            num_warps=4)


def attend(shape: tuple, q8, k8, vt8, scales: tuple, o, scale: float, causal: bool, causal_off: int, cfg: dict,
           per_tensor: bool, up: bool) -> None:
    """The fp8 attention on codes (B*H, N, D) (V as (B*Hkv, Dv, N)); `scales` (sq, sk, sv): per-block arrays, or
    one-element tensors when `per_tensor`; o (B, Hq, Nq, Dv) view, written in its own dtype (float8 too)."""
    B, HQ, HKV, NQ, NKV, D, DV = shape
    sq, sk, sv = scales
    tri_fp8_fwd[(triton.cdiv(NQ, cfg["BLOCK_M"]), B * HQ)](
        q8, k8, vt8, sq, sk, sv, o, scale * LOG2E, *o.stride(), HQ, HQ // HKV, NQ, NKV, triton.cdiv(NQ, QBLOCK),
        triton.cdiv(NKV, QBLOCK), causal_off, CAUSAL=causal, BLOCK_M=cfg["BLOCK_M"], BLOCK_N=cfg["BLOCK_N"],
        QB=QBLOCK, HEAD_D=D, HEAD_DV=DV, PER_TENSOR=per_tensor, O_FP8=o.dtype == torch.float8_e4m3fn, UPCAST=up,
        **launch_options(cfg))


def forward(q, k, v, o, bufs: Buffers, m, scale: float, causal: bool, causal_off: int, cfg: dict,
            up: bool) -> None:
    """16-bit (B, H, N, D) views: quantised (Q, K turned by `m` when given), then attended into o."""
    quantise(q, k, v, bufs, m, up)
    shape = (q.shape[0], q.shape[1], k.shape[1], q.shape[2], k.shape[2], q.shape[3], v.shape[3])
    attend(shape, bufs.q8, bufs.k8, bufs.vt8, (bufs.sq, bufs.sk, bufs.sv), o, scale, causal, causal_off, cfg,
           False, up)
