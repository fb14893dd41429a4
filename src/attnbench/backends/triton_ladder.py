"""The `triton` family: the project's own FlashAttention ladder (issue 41), one backend per rung, kernels in backends/triton_kernels/.

Each rung's kernels carry a name of their own (tri_fa2_*, tri_fa1_*, tri_dec_*, tri_hop_*, tri_fp8_*), so the
dispatch gate checks that the rung's kernel ran: on CUDA by the kernel's name, on CPU (Triton's interpreter,
TRITON_INTERPRET=1) by the operator attnbench_triton::<kernel> each launch runs inside."""
from __future__ import annotations

import os

from ..workloads import Workload
from .base import CONTESTANT, Backend, DeviceInfo, Inputs, Prepared, Rejected
from .capabilities import ANY
from .kernels import KernelFamily
from .layout import causal_offset, from_bhnd, to_bhnd

KERNELS = (
    KernelFamily("triton-fa2", r"tri_fa2_", attention=True),
    KernelFamily("triton-fa1", r"tri_fa1_", attention=True),
    KernelFamily("triton-decode", r"tri_dec_", attention=True),
    KernelFamily("triton-hopper", r"tri_hop_", attention=True),
    KernelFamily("triton-fp8", r"tri_fp8_", attention=True),
)


class TritonRung(Backend):
    """One rung of the ladder; `rung` picks the kernels, `options` its variant (e.g. deterministic)."""

    rung: str = "fa2"
    options: dict = {}
    fp8_scheme: str | None = None  # the fp8 rung's quantisation, judged by the fp8 contract (measure/fp8_contract.py)
    quantises_inputs = True  # the fp8 rungs quantise 16-bit inputs themselves (no effect without fp8_scheme)

    def availability(self) -> str | None:
        try:
            import triton  # noqa: F401
        except ImportError as e:
            return f"triton not importable ({e}); pip install 'attnbench[triton]'"
        return None

    def version(self) -> str | None:
        try:
            import triton

            return triton.__version__
        except ImportError:
            return None

    def extra_supports(self, w: Workload, dev: DeviceInfo) -> str | None:
        if dev.type == "cpu" and os.environ.get("TRITON_INTERPRET", "0") != "1":
            return "Triton kernels run on CPU only under its interpreter (TRITON_INTERPRET=1)"
        for d in {w.head_dim, w.head_dim_v}:
            if d < 16 or d & (d - 1):
                return f"head_dim {d}: the ladder's kernels take power-of-two head dims from 16 to 256"
        if w.window:
            return "a sliding window is not in the ladder's kernels"
        if self.rung == "fp8" and w.dtype == "fp8_e4m3" and self.options.get("incoherent"):
            return "fp8_e4m3 inputs are already quantised per tensor: incoherent processing comes before that"
        if self.rung == "decode" and w.q_len != 1:
            return f"triton-decode takes one query token per sequence (q_len {w.q_len})"
        return None

    def prepare(self, w: Workload, inputs: Inputs):
        from .triton_kernels import decode_step, prefill

        layout, backward = w.layout, None
        if self.rung == "decode":
            config: dict = {}
            first, step = decode_step.build(w, inputs, to_bhnd, causal_offset, config)
        else:
            b = prefill.bind(w, inputs, to_bhnd, causal_offset)
            config = b.config
            if self.rung == "fa1":
                first, step = prefill.fa1(b)
            elif self.rung == "hopper":
                first, step, backward = prefill.hopper(b, self.options)
            elif self.rung == "fp8":
                from .triton_kernels import fp8_step

                first, step = fp8_step.build(b, self.options.get("incoherent", False), inputs.descale)
            else:
                first, step, backward = prefill.fa2(b, deterministic=self.options.get("deterministic", True))

        def grads(o, do):
            return tuple(from_bhnd(g, layout) for g in backward(o, to_bhnd(do, layout)))

        if w.mode == "train_fwd":  # O stays differentiable: an autograd node whose backward is the rung's
            leaves = tuple(to_bhnd(t, layout) for t in (inputs.q, inputs.k, inputs.v))
            plain_first, plain_step = first, step
            first = lambda: prefill.attach(*leaves, plain_first, backward)  # noqa: E731
            step = lambda: prefill.attach(*leaves, plain_step, backward)  # noqa: E731
        return Prepared(step=lambda: from_bhnd(step(), layout), first_call=lambda: from_bhnd(first(), layout),
                        backward=grads if backward else None, config=lambda: dict(config) or None)

    def attend(self, q, k, v, *, causal=True, causal_align="bottom_right", scale=None, window=None):
        from .triton_kernels import prefill

        if self.rung not in ("fa2", "hopper") or window:
            raise Rejected(f"{self.name} attends a model's tensors only as triton-fa2 and the triton-hopper rungs do, "
                           "without a sliding window")
        if q.device.type == "cpu" and os.environ.get("TRITON_INTERPRET", "0") != "1":
            raise Rejected("Triton kernels run on CPU only under its interpreter (TRITON_INTERPRET=1)")
        dtype = {"torch.bfloat16": "bf16", "torch.float16": "fp16"}.get(str(q.dtype))
        if dtype is None:
            raise Rejected(f"{self.name} takes bf16 or fp16, not {q.dtype}")
        b = prefill.bind_tensors(q.detach(), k.detach(), v.detach(), None, None,
                                 q.shape[-1] ** -0.5 if scale is None else scale, causal,
                                 causal_offset(q.shape[2], k.shape[2], causal_align), dtype)
        first, _, backward = (prefill.hopper(b, self.options) if self.rung == "hopper"
                              else prefill.fa2(b, deterministic=self.options.get("deterministic", True)))
        if q.requires_grad or k.requires_grad or v.requires_grad:
            return prefill.attach(q, k, v, first, backward)
        return first()  # the config is chosen once per shape class and worker, then only launched


def _rung(name: str, rung: str, families: set[str], description: str, options: dict | None = None,
          fp8_scheme: str | None = None, **kw) -> TritonRung:
    kw.setdefault("dtypes", ("bf16", "fp16"))
    b = TritonRung(name=name, family="triton", role=CONTESTANT, max_head_dim=256, kernel_patterns=KERNELS,
                   kernel_families={"cuda": frozenset(families), "cpu": frozenset(families)},
                   description=description, **kw)
    b.rung, b.options, b.fp8_scheme = rung, dict(options or {}), fp8_scheme
    return b


def make() -> list[Backend]:
    modes = ("prefill", "train_fwd", "train_fwd_bwd", "decode")
    return [
        _rung("triton-fa2", "fa2", {"triton-fa2"}, "FlashAttention-2 in Triton (this project's): query blocks "
              "parallel, KV loop inside, deferred normalisation; backward dK/dV + dQ passes, GQA dK/dV "
              "accumulated in a fixed order", modes=modes, options={"deterministic": True}, min_capability=(8, 0)),
        _rung("triton-fa2-atomic", "fa2", {"triton-fa2"}, "triton-fa2 with GQA dK/dV added across the group's "
              "query heads by atomics (one program per query head; order of additions not fixed)",
              modes=modes, options={"deterministic": False}, min_capability=(8, 0)),
        _rung("triton-fa1", "fa1", {"triton-fa1"}, "FlashAttention-1's loop order in Triton (this project's): one "
              "program per batch·head, KV blocks outer, query blocks inner, O/m/l through HBM per KV block",
              modes=("prefill",), min_capability=(8, 0)),
        _rung("triton-decode", "decode", {"triton-decode"}, "split-KV decoding in Triton (this project's): GQA "
              "groups as matmul rows, partial O and LSE per split, a reduction kernel; contiguous or paged KV",
              modes=("decode",), accepts={"page_size": ANY}, min_capability=(8, 0)),
    ] + [_rung(name, "fp8", {"triton-fp8"}, f"e4m3 forward in Triton (this project's), {what}; {FP8_TIMED}",
               modes=("prefill",), dtypes=("bf16", "fp16") + (("fp8_e4m3",) if not inc else ()),
               options={"incoherent": inc}, min_capability=(8, 9), fp8_scheme=scheme)
         for name, inc, what, scheme in FP8_VARIANTS] + [_rung(name, "hopper", {"triton-hopper", "triton-fa2"}, f"the Hopper rung in Triton (this project's), {what}; "
               "its backward is triton-fa2's", modes=modes[:3], options=features, min_capability=(9, 0))
         for name, features, what in HOPPER_VARIANTS]


# e4m3 with one scale per 128 rows (16-bit inputs quantised in the step), P as e4m3 of P·448; the contract's scheme
# (backends/fp8_quant.py); an fp8_e4m3 workload's inputs are its per-tensor codes, which the emulation takes as given
FP8_TIMED = ("what is timed: with bf16/fp16 inputs the quantisation (Q, K, V read once, codes and scales "
             "written, V transposed) and the kernel; with fp8_e4m3 inputs (the workload's codes and per-tensor "
             "descales, as cudnn-fe's fp8 rows take them) V's codes transposed to (D, N) and the kernel")
FP8_VARIANTS = (
    ("triton-fp8", False, "per-block scales, P quantised", "e4m3,block128,p-e4m3x448"),
    ("triton-fp8-incoherent", True, "per-block scales after a random Hadamard turn of Q and K (FA3 §3.3)",
     "e4m3,block128,incoherent,p-e4m3x448"),
)
# FA3 Table 2's ablation as declared variants, each adding one feature to the one before (TMA loads in all)
HOPPER_VARIANTS = (
    ("triton-hopper-base", {"tma": True}, "TMA tensor descriptors, 2-stage pipeline"),
    ("triton-hopper-ws", {"tma": True, "ws": True}, "+ warp specialisation as asked of the compiler (Triton 3.6 "
     "applies it on Blackwell only: on sm_90 the same kernel as -base, a control)"),
    ("triton-hopper-ws-pipe", {"tma": True, "ws": True, "pipe": True}, "+ warp specialisation + 3-stage pipeline"),
    ("triton-hopper-persistent", {"tma": True, "ws": True, "pipe": True, "persistent": True},
     "+ warp specialisation + deeper pipeline + persistent tiles (heaviest first)"),
    # the flagship: the fastest of the rung's schedules (persistent or not, tile, stages, split query tile, two
    # programs per SM), chosen at cold start; the row's kernel_config says which ran
    ("triton-hopper", {"tma": True, "ws": True, "pipe": True, "tune": True},
     "the fastest of the rung's schedules, tuned at cold start (persistent or not, split query tile or not)"),
)
