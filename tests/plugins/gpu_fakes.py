"""Fake CUDA backends: a kernel that breaks the CUDA context, a real OOM, and an uncompiled Flex
call that silently takes the slow path while declaring Triton kernels."""
from __future__ import annotations

from attnbench.backends.base import Backend
from attnbench.backends.layout import from_bhnd, to_bhnd

TRITON = {"cuda": frozenset({"triton"})}


class IllegalAddress(Backend):
    def prepare(self, w, inputs):
        import triton
        import triton.language as tl

        @triton.jit
        def _scribble(ptr):
            tl.store(ptr + (1 << 40), 1.0)  # far outside any allocation

        def fn():
            _scribble[(1,)](inputs.out)
            return inputs.out

        return fn


class RealOom(Backend):
    def prepare(self, w, inputs):
        import torch

        def fn():
            return torch.empty(1 << 50, dtype=torch.uint8, device=inputs.q.device)  # 1 PiB

        return fn


class EagerFlex(Backend):
    """flex_attention without torch.compile runs an unfused fallback: what a recompile limit
    silently leaves behind. Declares Triton, so the probe must call it a mismatch."""

    def extra_supports(self, w, dev):
        return "fake: no mask support" if w.causal else None

    def prepare(self, w, inputs):
        from torch.nn.attention.flex_attention import flex_attention

        q, k, v = (to_bhnd(t, w.layout) for t in (inputs.q, inputs.k, inputs.v))
        gqa = w.kv_heads != w.q_heads
        return lambda: from_bhnd(flex_attention(q, k, v, scale=inputs.scale, enable_gqa=gqa), w.layout)


BACKENDS = [
    IllegalAddress(name="fake-illegal-address", family="plugin", devices=("cuda",), kernel_families=TRITON),
    RealOom(name="fake-real-oom", family="plugin", devices=("cuda",), kernel_families=TRITON),
    EagerFlex(name="fake-eager-flex", family="plugin", devices=("cuda",), kernel_families=TRITON),
]
