"""The steps of the prefill rungs (fa2, fa1, hopper): inputs bound once, the config chosen on the first call, forward (and fa2's backward) launched as named kernels."""
from __future__ import annotations

from dataclasses import dataclass, field

from . import fa2_bwd, fa2_fwd, named, tuning

INTERPRETER = [{"BLOCK_M": 16, "BLOCK_N": 16, "num_warps": 4, "num_stages": 1}]


def _c(bm, bn, w, s, **kw) -> dict:
    return {"BLOCK_M": bm, "BLOCK_N": bn, "num_warps": w, "num_stages": s, **kw}


# Forward candidates per head dim (two: each one compiles and is timed in the cold call, within a recipe's budget): the FA2 paper's 128x64 / 128x128
# tiles for D <= 128, smaller K/V tiles at 256 where registers bound the tile.
FWD = {64: [_c(128, 64, 4, 3), _c(128, 128, 8, 3)],
       128: [_c(128, 64, 8, 3), _c(128, 128, 8, 2)],
       256: [_c(64, 64, 8, 2), _c(128, 32, 8, 2)]}
# Backward: BLOCK_N the KV rows a dK/dV program holds, BWD_M the query rows per step; BLOCK_M the query rows a
# dQ program holds, BWD_N the KV rows per step. The first candidate of each list is the one least likely to spill
# (ATTNBENCH_TRITON_TUNE=first takes it).
BWD = {64: [_c(64, 64, 4, 2, BWD_M=32, BWD_N=32), _c(128, 128, 8, 2, BWD_M=32, BWD_N=32)],
       # D=128 (lab/triton_compile_check.py, sm_90): the dK/dV program holding 128 KV rows spills least stepping 16
       # query rows (4 stages: none, 96 KiB) or 32 (3 stages: 40 B); the dQ program holding 128 query rows steps 32 or
       # 64 KV rows without spilling (112-160 KiB)
       128: [_c(64, 64, 4, 2, BWD_M=32, BWD_N=32), _c(128, 128, 8, 2, BWD_M=32, BWD_N=32),
             _c(128, 128, 8, 4, BWD_M=16, BWD_N=32), _c(128, 128, 8, 3, BWD_M=32, BWD_N=64)],
       256: [_c(64, 64, 8, 1, BWD_M=32, BWD_N=32), _c(32, 32, 4, 1, BWD_M=32, BWD_N=32)]}


def candidates(table: dict, device, head_dim: int) -> list[dict]:
    if device.type != "cuda":
        return INTERPRETER
    return table[min((d for d in table if d >= head_dim), default=max(table))]


@dataclass
class Bound:
    """One attempt's tensors as (B, H, N, D) views, its causal rule and what the first calls chose."""

    q: object
    k: object
    v: object
    o: object
    do: object
    lse: object
    scale: float
    causal: bool
    off: int
    key: tuple
    config: dict = field(default_factory=dict)
    saved: dict = field(default_factory=dict)


def bind(w, inputs, to_bhnd, causal_offset) -> Bound:
    q, k, v = (to_bhnd(t.detach(), w.layout) for t in (inputs.q, inputs.k, inputs.v))
    do = to_bhnd(inputs.do.detach(), w.layout) if inputs.do is not None else None
    return bind_tensors(q, k, v, to_bhnd(inputs.out, w.layout), do, inputs.scale, w.causal,
                        causal_offset(w.q_len, w.kv_len, w.causal_align), w.dtype)


def bind_tensors(q, k, v, o, do, scale: float, causal: bool, off: int, dtype: str) -> Bound:
    """(B, H, N, D) views, detached; `o` the output buffer (None: a new one)."""
    import torch

    if o is None:
        o = torch.empty(*q.shape[:3], v.shape[3], device=q.device, dtype=q.dtype)
    lse = torch.empty(q.shape[0] * q.shape[1], q.shape[2], device=q.device, dtype=torch.float32)
    key = (q.shape[3], dtype, causal, tuning.shape_class(max(q.shape[2], k.shape[2])), q.shape[1] // k.shape[1])
    return Bound(q, k, v, o, do, lse, scale, causal, off, key)


def attach(q, k, v, call, backward):
    """call()'s O as an autograd node over q, k, v (their BHND views that require grad): a train_fwd row stays
    differentiable and attend() serves a model's backward; the backward is the rung's (FA2's passes)."""
    return _LadderAttention.apply(q, k, v, call, backward)


def _autograd_function():
    import torch

    class LadderAttention(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, call, backward):
            ctx.rung_backward = backward
            return call()

        @staticmethod
        def backward(ctx, do):
            dq, dk, dv = ctx.rung_backward(None, do.contiguous())
            return dq, dk, dv, None, None

    return LadderAttention


class _Lazy:
    """The autograd Function, made on first use (torch is imported at prepare time, not at registry load)."""

    fn = None

    def apply(self, *args):
        if _Lazy.fn is None:
            _Lazy.fn = _autograd_function()
        return _Lazy.fn.apply(*args)


_LadderAttention = _Lazy()


def fa2(b: Bound, deterministic: bool = True):
    """(first_call, step, backward) of triton-fa2 on bound tensors; each returns BHND tensors."""
    def fwd(cfg):
        named.run("tri_fa2_fwd", lambda: fa2_fwd.forward(b.q, b.k, b.v, b.o, b.lse, b.scale, b.causal, b.off, cfg),
                  b.q)

    def first():
        b.config["fwd"] = tuning.choose("fa2_fwd", b.key, candidates(FWD, b.q.device, b.q.shape[-1]), fwd, b.q.device)
        return b.o

    def step():
        fwd(b.config["fwd"])
        return b.o

    def bwd_run(cfg, do):
        out = []
        named.run("tri_fa2_bwd", lambda: out.extend(fa2_bwd.backward(
            b.q, b.k, b.v, b.o, do, b.lse, b.scale, b.causal, b.off, cfg, deterministic)), b.q)
        return out

    def backward(o, do_layout):
        do = b.do if b.do is not None else do_layout
        if "bwd" not in b.config:
            got = {}
            b.config["bwd"] = tuning.choose("fa2_bwd" + ("_det" if deterministic else ""), b.key,
                                            candidates(BWD, b.q.device, b.q.shape[-1]),
                                            lambda cfg: got.update(g=bwd_run(cfg, do)), b.q.device)
            return tuple(got["g"])
        return tuple(bwd_run(b.config["bwd"], do))

    return first, step, backward


def fa1(b: Bound):
    """(first_call, step) of triton-fa1: FA1's loop order, its O/m/l scratch allocated once here."""
    from . import fa1 as kernel

    bufs = kernel.scratch(b.q, b.v)

    def fwd(cfg):
        named.run("tri_fa1_fwd", lambda: kernel.forward(b.q, b.k, b.v, b.o, bufs, b.scale, b.causal, b.off, cfg), b.q)

    def first():
        b.config["fwd"] = tuning.choose("fa1_fwd", b.key, candidates(FA1, b.q.device, b.q.shape[-1]), fwd, b.q.device)
        return b.o

    def step():
        fwd(b.config["fwd"])
        return b.o

    return first, step


# FA1: one program per batch·head, so the tile is all it has; K/V blocks held, query blocks streamed
FA1 = {64: [_c(64, 64, 4, 2)], 128: [_c(64, 64, 4, 2)],
       256: [_c(32, 64, 4, 1), _c(64, 32, 4, 1)]}


# The Hopper rung: 128-row query tiles (two warpgroups of 64 rows, FA3's consumer shape) by default; the candidates'
# stage count is the variant's (2 without deeper pipelining, 3 with it)
def hopper_candidates(device, head_dim: int, features: dict) -> list[dict]:
    if device.type != "cuda":
        return INTERPRETER
    if features.get("tune"):
        return TUNED[128 if head_dim <= 128 else 256]
    deep = features.get("pipe")
    if head_dim > 128:  # persistent at 64x64 and 3 stages is 257 KiB on sm_90
        stages = 3 if deep and not features.get("persistent") else 2
        return [_c(64, 64, 8, stages), _c(128, 32, 8, 3 if deep else 2)]
    if deep and features.get("persistent"):  # the persistent loop holds more: 128x128 at 3 stages is 257 KiB on sm_90
        return [_c(128, 64, 8, 3), _c(128, 128, 8, 2)]
    if deep:
        return [_c(128, 64, 8, 3), _c(128, 128, 8, 3)]
    return [_c(128, 64, 8, 2), _c(128, 128, 8, 2)]


# The flagship (features "tune"): every schedule the rung has, timed at cold start, the fastest kept. First the
# last H200 run's best (-ws-pipe's 128x128, 3 stages: 538 TFLOP/s at the anchor); 128x64 at 2 stages capped at 128
# registers (96 KiB: two programs per SM, whose softmax and MMAs the warp schedulers interleave); the query tile as
# two 128-row halves (SPLIT: one half's softmax under the other's P@V wgmma, seen in the PTX); persistent 128x128 at
# 2 stages (3 is 257 KiB); 128x64 at 3 stages; one warpgroup on 64x64 tiles at 2 stages (81 KiB, 138 registers: two
# programs per SM, FA3's two consumer warpgroups as independent programs; WS off: Triton 3.6's warp specialiser fails
# on this 4-warp loop for sm_90). PERSISTENT in every one, so the row says which schedule won.
TUNED = {128: [_c(128, 128, 8, 3, PERSISTENT=False), _c(128, 64, 8, 2, PERSISTENT=False, maxnreg=128),
               _c(256, 32, 8, 3, PERSISTENT=False, SPLIT=True), _c(128, 128, 8, 2, PERSISTENT=True),
               _c(128, 64, 8, 3, PERSISTENT=False), _c(64, 64, 4, 2, PERSISTENT=False, WS=False)],
         256: [_c(64, 64, 8, 3, PERSISTENT=False), _c(128, 32, 8, 3, PERSISTENT=False),
               _c(64, 64, 8, 2, PERSISTENT=True)]}


def ran(features: dict, cfg: dict) -> list[str]:
    """The features a config ran with: the variant's, with what the flagship's tuning chose in place of "tune"."""
    on = {k for k, v in features.items() if v and k != "tune"}
    for flag in ("PERSISTENT", "SPLIT", "WS"):
        if flag in cfg:
            on = on - {flag.lower()} | ({flag.lower()} if cfg[flag] else set())
    return sorted(on)


def hopper(b: Bound, features: dict):
    """(first_call, step, backward) of a triton-hopper variant; the backward is FA2's on the forward's LSE."""
    from . import hopper as kernel

    used = dict(features)  # what the kernel is compiled with: the variant's features unless the compiler refused one

    def fwd(cfg):
        named.run("tri_hop_fwd", lambda: kernel.forward(b.q, b.k, b.v, b.o, b.lse, b.scale, b.causal, b.off, cfg,
                                                        used), b.q)

    def choose():
        tag = "hop_" + "_".join(sorted(k for k, v in used.items() if v))
        cfg = tuning.choose(tag, b.key, hopper_candidates(b.q.device, b.q.shape[-1], used), fwd, b.q.device)
        extra = {"tuned_features": ["persistent", "split", "ws"]} if used.get("tune") else {}
        return {**cfg, "features": ran(used, cfg), **extra}

    def first():
        try:
            b.config["fwd"] = choose()
        except RuntimeError as e:
            # Triton 3.6 documents warp specialisation for Blackwell first: where it cannot compile this loop on
            # this GPU the variant runs without it, and its config says so (the ablation shows the refusal)
            if not used.get("ws") or "no launch config compiled" not in str(e):
                raise
            used["ws"] = False
            b.config["fwd"] = {**choose(), "ws_refused": str(e)[:300]}
        return b.o

    def step():
        fwd(b.config["fwd"])
        return b.o

    _, _, backward = fa2(b, deterministic=True)
    return first, step, backward
