"""FP8 fake backends (issue 40), loaded with --plugin: a correct tiled float8 kernel and the FP8 failures users report.

Each failure is to be caught by the runner.

The kernel is FlashAttention's forward with float8 operands: Q·Kᵀ and P·V as float8 GEMMs (torch's
_scaled_mm, with the inputs' descales), the online softmax in float32 over 128-key tiles, P scaled
by 448 into e4m3 against the running maximum, O divided by the row sum at the end and written in
e4m3: cuDNN's scheme as backends/cudnn_fe.py drives it (measure/fp8_contract.CUDNN_FP8)."""
from __future__ import annotations

from attnbench.backends.base import Backend
from attnbench.backends.layout import from_bhnd, keep_mask, to_bhnd

TILE = 128
FP8_MAX = 448.0


def _mm8(a, b, sa, sb):
    """a @ b of float8 (..., M, K) and (..., K, N) through torch._scaled_mm, one matrix at a time; float32 out."""
    import torch

    lead = a.shape[:-2]
    a2, b2 = a.reshape(-1, *a.shape[-2:]), b.reshape(-1, *b.shape[-2:])
    sa, sb = torch.as_tensor(sa, dtype=torch.float32).reshape(()), torch.as_tensor(sb, dtype=torch.float32).reshape(())
    out = [torch._scaled_mm(x.contiguous(), y.t().contiguous().t(), scale_a=sa, scale_b=sb, out_dtype=torch.float32)
           for x, y in zip(a2, b2)]
    return torch.stack(out).reshape(*lead, a.shape[-2], b.shape[-1])


def _truncated(x, f8):
    """x (>= 0) cast to float8 toward zero: where the nearest value is above x, the next lower code."""
    import torch

    y = x.to(f8)
    up = (y.float() > x) & (y.view(torch.uint8) > 0)
    return torch.where(up, (y.view(torch.uint8) - up.to(torch.uint8)).view(f8), y)


def tiled_fp8(w, inputs, *, descale: bool = True, p_scale: float = FP8_MAX, drop_last_full_tile: bool = False,
              truncate_p: bool = False, p_e5m2: bool = False, qkv_e5m2: bool = False):
    """O of an fp8 workload as a tiled float8 kernel computes it, written in float8 (BHND math).
    `descale` False: the descales are ignored (codes taken as values); `p_scale`: P's scale before
    its e4m3 cast; `drop_last_full_tile`: when kv_len is a multiple of the tile, the last tile is skipped;
    `truncate_p`: P cast toward zero instead of to nearest; `p_e5m2`: P rounded to e5m2 (two mantissa bits);
    `qkv_e5m2`: Q, K and V re-rounded to e5m2 inside."""
    import torch

    f8 = inputs.q.dtype
    one = torch.ones(())
    ds = {n: (t.reshape(()) if descale else one) for n, t in (inputs.descale or {}).items()}
    q, k, v = (to_bhnd(t, w.layout) for t in (inputs.q, inputs.k, inputs.v))
    if qkv_e5m2:  # the codes re-rounded to e5m2 (two mantissa bits; exact back in e4m3 within its range)
        q, k, v = (t.float().to(torch.float8_e5m2).float().to(f8) for t in (q, k, v))
    g = w.q_heads // w.kv_heads
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    nq, nkv = q.shape[2], k.shape[2]
    keep = keep_mask(nq, nkv, w.causal_align, q.device, w.window) if w.causal else None
    m = torch.full((*q.shape[:3], 1), float("-inf"))
    l, acc = torch.zeros_like(m), torch.zeros(*q.shape[:3], v.shape[-1])
    tiles = range(0, nkv, TILE)
    if drop_last_full_tile and nkv % TILE == 0 and nkv > TILE:
        tiles = tiles[:-1]
    for j in tiles:
        s = _mm8(q, k[:, :, j:j + TILE].transpose(-1, -2), ds.get("q", one), ds.get("k", one)) * inputs.scale
        if keep is not None:
            s = s.masked_fill(~keep[:, j:j + TILE], float("-inf"))
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        p = torch.exp(s - safe)
        alpha = torch.exp(m - safe)
        l = l * alpha + p.sum(-1, keepdim=True)
        p8 = (p * p_scale).clamp(max=FP8_MAX)
        if p_e5m2:  # rounded to e5m2 first: every e5m2 value in P's range is an e4m3 value, so the second cast is exact
            p8 = p8.to(torch.float8_e5m2).float()
        p8 = _truncated(p8, f8) if truncate_p else p8.to(f8)
        acc = acc * alpha + _mm8(p8, v[:, :, j:j + TILE], 1.0 / p_scale, ds.get("v", one))
        m = m_new
    o = (acc / l).clamp(-FP8_MAX, FP8_MAX)
    return from_bhnd(o.to(f8), w.layout)


class _Fp8(Backend):
    options: dict = {}

    def prepare(self, w, inputs):
        return lambda: tiled_fp8(w, inputs, **self.options)


class Good(_Fp8):
    """Correct: the tiled float8 kernel of cuDNN's scheme."""


class Bf16Inside(_Fp8):
    """Called FP8, computes in bf16: the float8 inputs dequantised, plain attention in bfloat16."""

    def prepare(self, w, inputs):
        import torch

        from attnbench.backends.reference import attention_math

        def fn():
            # bf16 operands, float32 accumulation and softmax (a bf16 tensor-core kernel's arithmetic)
            ds = {n: t.reshape(()) for n, t in (inputs.descale or {}).items()}
            q, k, v = ((to_bhnd(t, w.layout).float() * ds[n]).to(torch.bfloat16).float()
                       for n, t in zip("qkv", (inputs.q, inputs.k, inputs.v)))
            o = attention_math(q, k, v, w.causal, w.causal_align, inputs.scale, w.window)
            return from_bhnd(o.clamp(-FP8_MAX, FP8_MAX).to(inputs.q.dtype), w.layout)

        return fn


class NoDescale(_Fp8):
    """Ignores the per-tensor descales: the float8 codes are taken as the values."""

    options = {"descale": False}


class TileCollapse(_Fp8):
    """Skips the last 128-key tile when kv_len is a multiple of 128 (a tile-count off-by-one)."""

    options = {"drop_last_full_tile": True}


class E5m2Inside(_Fp8):
    """Declares cuDNN's e4m3 scheme but re-rounds Q, K and V to e5m2 inside: its error is well above
    what the e4m3 quantiser costs (an e5m2 scheme would explain it)."""

    options = {"qkv_e5m2": True}


def _make(cls, name: str) -> Backend:
    return cls(name=name, family="fake-fp8", devices=("cpu", "cuda"), modes=("prefill", "decode"),
               dtypes=("fp8_e4m3",), supports_gqa=True, kernel_families={"cpu": frozenset({"unfused-gemm"})},
               description=(cls.__doc__ or "").split("\n")[0])


BACKENDS = [_make(Good, "fake-fp8-good"), _make(Bf16Inside, "fake-fp8-bf16"), _make(NoDescale, "fake-fp8-no-descale"),
            _make(TileCollapse, "fake-fp8-tile-collapse"), _make(E5m2Inside, "fake-fp8-e5m2-inside")]
