"""The step of triton-fp8: 16-bit inputs quantised inside the step (per-block scales, Hadamard when incoherent), or an
fp8_e4m3 workload's own codes and per-tensor descales (V transposed inside the step: the PV product reads it k-major)."""
from __future__ import annotations

from . import fp8, named, tuning
from . import interpreting
from .prefill import INTERPRETER, Bound, _c

# 128-row query tiles with 64- or 128-key blocks (the scale blocks are 128 rows: a tile never straddles two)
CUDA = {64: [_c(128, 64, 4, 3), _c(128, 128, 8, 3)], 128: [_c(128, 64, 8, 3), _c(128, 128, 8, 2)],
        256: [_c(64, 64, 8, 2), _c(128, 64, 8, 2)]}


def build(b: Bound, incoherent: bool, descale: dict | None):
    """(first_call, step) on bound tensors; `descale` (the fp8 workload's {q, k, v} scalars) or None (16-bit)."""
    import torch

    q, k, v = b.q, b.k, b.v
    B, HQ, NQ, D = q.shape
    HKV, NKV, DV = k.shape[1], k.shape[2], v.shape[3]
    shape = (B, HQ, HKV, NQ, NKV, D, DV)
    up = interpreting()
    bufs = fp8.Buffers(q, k, v)
    m = fp8.hadamard(D, 0, q.device, q.dtype) if incoherent else None

    def coded():
        """The fp8 workload's codes as (B*H, N, D) (views where the layout already is) and V transposed (a copy)."""
        q8 = q.reshape(B * HQ, NQ, D) if q.is_contiguous() else bufs.q8.view(B, HQ, NQ, D).copy_(q).view(-1, NQ, D)
        k8 = k.reshape(B * HKV, NKV, D) if k.is_contiguous() else bufs.k8.view(B, HKV, NKV, D).copy_(k).view(-1, NKV, D)
        bufs.vt8.view(B, HKV, DV, NKV).copy_(v.transpose(2, 3))
        return q8, k8, bufs.vt8

    def run(cfg):
        if descale is None:
            named.run("tri_fp8_fwd", lambda: fp8.forward(q, k, v, b.o, bufs, m, b.scale, b.causal, b.off, cfg, up), q)
        else:
            q8, k8, vt8 = coded()
            scales = tuple(descale[n].reshape(1).to(torch.float32) for n in "qkv")
            named.run("tri_fp8_fwd", lambda: fp8.attend(shape, q8, k8, vt8, scales, b.o, b.scale, b.causal, b.off,
                                                        cfg, True, up), q)

    cands = INTERPRETER if q.device.type != "cuda" else CUDA[min((d for d in CUDA if d >= D), default=256)]

    def first():
        b.config["fwd"] = {**tuning.choose("fp8" + ("_inc" if incoherent else ""), b.key, cands, run, q.device),
                           "scales": "per-tensor (the workload's codes)" if descale else f"block{fp8.QBLOCK}",
                           "incoherent": incoherent}
        return b.o

    def step():
        run(b.config["fwd"])
        return b.o

    return first, step
