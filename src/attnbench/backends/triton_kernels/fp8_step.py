"""The step of triton-fp8, two row kinds: 16-bit inputs quantised inside the timed step (per-block scales, Hadamard
when incoherent), or an fp8_e4m3 workload's codes and descales as cuDNN's take them (only V transposed in the step)."""
from __future__ import annotations

from . import fp8, named, tuning
from . import interpreting
from .prefill import INTERPRETER, Bound, _c

# Query tiles of 128 rows or two 128-row halves (a scale block is 128 rows: a tile never straddles two). v2
# (TMA=True: tensor descriptors, unmasked pipelined loop) at 128x128 with 3 and 4 stages (fp8 tiles are half a bf16
# tile's bytes: 113 and 145 KiB of shared memory at D=128) and 128x64 with 4; a 256-row tile as two halves (SPLIT:
# one half's softmax may run under the other's MMA, as the Hopper rung's split; 56 KiB, 216 registers, no spill on
# sm_90); v1 (pointer loads) at its former first config, so the tuning can always fall back to the measured kernel.
CUDA = {64: [_c(128, 128, 8, 3, TMA=True), _c(128, 128, 4, 4, TMA=True), _c(128, 64, 4, 3)],
        128: [_c(128, 128, 8, 3, TMA=True), _c(128, 128, 8, 4, TMA=True), _c(128, 64, 8, 4, TMA=True),
              _c(256, 32, 8, 3, TMA=True, SPLIT=True), _c(128, 64, 8, 3)],
        256: [_c(64, 64, 8, 2, TMA=True), _c(64, 64, 8, 3, TMA=True), _c(64, 64, 8, 2)]}  # 128-row v2 tiles spill
INTERPRETER_FP8 = [{**c, "TMA": True} for c in INTERPRETER]  # the CPU tests run v2 (v1: tests/test_fp8_tma.py)


def tma_ready(*ts) -> bool:
    """Whether tensor descriptors may address these views: 16-byte aligned base, 16-byte multiples as strides
    (but the last, unit)."""
    return all(t.data_ptr() % 16 == 0 and t.stride(-1) == 1 and all(s * t.element_size() % 16 == 0
                                                                    for s in t.stride()[:-1]) for t in ts)


def build(b: Bound, incoherent: bool, descale: dict | None):
    """(first_call, step) on bound tensors; `descale` (the fp8 workload's {q, k, v} scalars) or None (16-bit)."""
    import torch

    q, k, v = b.q, b.k, b.v
    D = q.shape[3]
    up = interpreting()
    bufs = fp8.Buffers(q, k, v)
    m = fp8.hadamard(D, 0, q.device, q.dtype) if incoherent else None
    # the workload's descale tensors themselves (float32 views: a refill's new scales are read, not copied here)
    scales = tuple(descale[n].reshape(1).to(torch.float32) for n in "qkv") if descale is not None else None

    def run(cfg):
        if descale is None:  # 16-bit inputs: quantised in the step (this row kind times quantiser + kernel)
            named.run("tri_fp8_fwd", lambda: fp8.forward(q, k, v, b.o, bufs, m, b.scale, b.causal, b.off, cfg, up), q)
        else:  # the workload's codes as they are; V's codes transposed to (D, N) in the step: the PV operand k-major
            def call():
                bufs.vt8.copy_(v.transpose(2, 3))
                fp8.attend(q, k, bufs.vt8, scales, b.o, b.scale, b.causal, b.off, cfg, True, up)

            named.run("tri_fp8_fwd", call, q)

    cands = INTERPRETER_FP8 if q.device.type != "cuda" else CUDA[min((d for d in CUDA if d >= D), default=256)]
    if not tma_ready(q, k, bufs.vt8, *(() if descale is not None else (bufs.q8, bufs.k8))):
        cands = [c for c in cands if not c.get("TMA")] or [{**c, "TMA": False} for c in cands]

    def first():
        b.config["fwd"] = {**tuning.choose("fp8" + ("_inc" if incoherent else ""), b.key, cands, run, q.device),
                           "scales": "per-tensor (the workload's codes)" if descale else f"block{fp8.QBLOCK}",
                           "incoherent": incoherent}
        return b.o

    def step():
        run(b.config["fwd"])
        return b.o

    return first, step
