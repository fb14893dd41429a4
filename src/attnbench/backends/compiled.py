"""torch.compile of the unfused reference: whatever Inductor makes of plain attention."""
from __future__ import annotations

from contextlib import contextmanager

from ..workloads import Workload
from .capabilities import ANY
from .base import CONTESTANT, Backend, Inputs
from .layout import append_then, from_bhnd, to_bhnd
from .reference import attention_math


class Compiled(Backend):
    def prepare(self, w: Workload, inputs: Inputs):
        import torch

        torch._dynamo.reset()  # see flex.py: no recompile history can leak into this attempt
        q, k, v = (to_bhnd(t, w.layout) for t in (inputs.q, inputs.k, inputs.v))
        compiled = torch.compile(attention_math, dynamic=False)

        def attend():
            return from_bhnd(compiled(q, k, v, w.causal, w.causal_align, inputs.scale, w.window), w.layout)

        return append_then(w, inputs, attend)  # an appending decode: the new token written eagerly first

    @contextmanager
    def attend_session(self):
        import torch

        torch._dynamo.reset()  # as prepare(): a cold start holds this run's compilation
        self.__dict__["_attend_fn"] = torch.compile(attention_math, dynamic=False)
        try:
            yield
        finally:
            self.__dict__.pop("_attend_fn", None)

    def attend(self, q, k, v, *, causal=True, causal_align="bottom_right", scale=None, window=None):
        import torch

        fn = self.__dict__.get("_attend_fn") or self.__dict__.setdefault(
            "_attend_fn", torch.compile(attention_math, dynamic=False))
        return fn(q, k, v, causal, causal_align, q.shape[-1] ** -0.5 if scale is None else scale, window)

    def memory_estimate(self, w: Workload) -> int:
        from .reference import Reference

        return Reference.memory_estimate(self, w)


def make() -> list[Backend]:
    return [
        Compiled(
            name="compile",
            family="compile",
            role=CONTESTANT,
            isolation="backend",
            accepts={"decode_append": ANY},  # the new token written eagerly before the compiled attention
            # Inductor may emit Triton kernels, keep extern GEMMs, or pattern-match to an SDPA kernel.
            kernel_families={
                "cuda": frozenset({"triton", "unfused-gemm", "pytorch-flash", "cutlass-fmha", "cudnn"}),
                "cpu": frozenset({"inductor", "pytorch-flash-cpu", "unfused-gemm"}),
            },
            description="torch.compile of the unfused reference",
        )
    ]
