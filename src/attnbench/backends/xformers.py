"""xFormers' memory_efficient_attention pinned to its CUTLASS operator (forward and backward):
(B, N, H, D) tensors ("BMHK"), GQA as (B, N, Hkv, G, D) with K/V broadcast (no copy), causal by
attention-bias objects for either alignment."""
from __future__ import annotations

from ..workloads import Workload
from .base import CONTESTANT, Backend, DeviceInfo, Inputs, Prepared, Rejected
from .optional import call_rejecting, dist_version, from_bnhd, import_hint, to_bnhd

HINT = "xformers is not importable: pip install 'attnbench[xformers]' (its wheel must match the installed torch)"


class XFormers(Backend):
    def availability(self) -> str | None:
        return import_hint("xformers.ops", HINT, attr="memory_efficient_attention")

    def version(self) -> str | None:
        return dist_version("xformers", "xformers")

    def extra_supports(self, w: Workload, dev: DeviceInfo) -> str | None:
        if dev.capability and tuple(dev.capability) > (9, 0):  # its CUDA_MAXIMUM_COMPUTE_CAPABILITY
            return "xformers' CUTLASS operator runs up to compute capability 9.0"
        if w.window and w.causal_align == "top_left" and w.q_len != w.kv_len:
            return "xformers: its local-attention causal mask is aligned bottom-right only"
        return None

    def prepare(self, w: Workload, inputs: Inputs) -> Prepared:
        import xformers.ops as xops
        from xformers.ops import fmha

        q, k, v, g = _operands(*(to_bnhd(t, w.layout) for t in (inputs.q, inputs.k, inputs.v)))
        bias = _bias(fmha, w.causal, w.causal_align, w.window)
        op = (fmha.cutlass.FwOp, fmha.cutlass.BwOp)

        def step():
            o = xops.memory_efficient_attention(q, k, v, attn_bias=bias, p=0.0, scale=inputs.scale, op=op)
            return from_bnhd(o.flatten(2, 3) if g > 1 else o, w.layout)

        return Prepared(step=step, first_call=lambda: call_rejecting(step, "xformers"))

    def attend(self, q, k, v, *, causal=True, causal_align="bottom_right", scale=None, window=None):
        import xformers.ops as xops
        from xformers.ops import fmha

        if window and causal and causal_align != "bottom_right":
            raise Rejected("xformers: its local-attention causal mask is aligned bottom-right only")
        q5, k5, v5, g = _operands(*(t.transpose(1, 2) for t in (q, k, v)))  # (B, N, H, D) views
        bias = _bias(fmha, causal, causal_align, window)
        o = xops.memory_efficient_attention(q5, k5, v5, attn_bias=bias, p=0.0,
                                            scale=q.shape[-1] ** -0.5 if scale is None else scale,
                                            op=(fmha.cutlass.FwOp, fmha.cutlass.BwOp))
        return (o.flatten(2, 3) if g > 1 else o).transpose(1, 2)


def _operands(q, k, v):
    """(B, N, H, D) tensors as xformers takes them: BMHK, or BMGHK for GQA (query heads grouped per KV
    head, K/V expanded with stride 0, no copy); and the group size."""
    b, _, hq, _ = q.shape
    nkv, hkv = k.shape[1], k.shape[2]
    g = hq // hkv
    if g > 1:
        q = q.unflatten(2, (hkv, g))
        k, v = (t.unsqueeze(3).expand(b, nkv, hkv, g, t.shape[-1]) for t in (k, v))
    return q, k, v, g


def _bias(fmha, causal: bool, align: str, window: int | None = None):
    if not causal:
        return None
    if window:  # the `window` newest keys up to the query's diagonal (bottom-right; equal when Nq == Nkv)
        return fmha.attn_bias.LowerTriangularFromBottomRightLocalAttentionMask(window)
    if align == "bottom_right":
        return fmha.attn_bias.LowerTriangularFromBottomRightMask()
    return fmha.attn_bias.LowerTriangularMask()  # top-left

def make() -> list[Backend]:
    # Its CUTLASS kernels are the ones PyTorch vendored as SDPA's memory-efficient kernel: the family
    # (cutlass-fmha, declared by sdpa.py) is reused deliberately; xformers' own FlashAttention
    # operators would show up as flash-attn2/3 and be a mismatch.
    return [XFormers(name="xformers", family="xformers", role=CONTESTANT, devices=("cuda",),
                     min_capability=(7, 0), max_head_dim=256, kernel_families={"cuda": frozenset({"cutlass-fmha"})},
                     description="xFormers, CUTLASS operator")]
