"""Fake CUDA backends: a kernel that breaks the CUDA context, a real OOM, an uncompiled Flex call
that silently takes the slow path while declaring Triton kernels, and wrappers whose work the
timer cannot see: on a stream of their own, or left out of a captured CUDA graph."""
from __future__ import annotations

import types

from attnbench.backends.base import Backend
from attnbench.backends.layout import from_bhnd, sdpa_mask_args, to_bhnd

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


FLASH = {"cuda": frozenset({"pytorch-flash"})}


def _sdpa(w, inputs):
    """SDPA pinned to its flash kernel on the inputs (a correct, real attention kernel)."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k, v = (to_bhnd(t, w.layout) for t in (inputs.q, inputs.k, inputs.v))
    mask = sdpa_mask_args(w.q_len, w.kv_len, w.causal, w.causal_align)

    def run():
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            o = F.scaled_dot_product_attention(q, k, v, scale=inputs.scale, enable_gqa=w.kv_heads != w.q_heads,
                                               **mask)
        return from_bhnd(o, w.layout)

    return run


class OwnStream(Backend):
    """Launches its kernel on a stream of its own and never makes the caller's stream wait: events
    on the caller's stream time only the launch."""

    def prepare(self, w, inputs):
        import torch

        side = torch.cuda.Stream()
        run = _sdpa(w, inputs)

        def fn():
            side.wait_stream(torch.cuda.current_stream())  # inputs are ready; the result is not awaited
            with torch.cuda.stream(side):
                return run()

        return fn


class SetsStream(Backend):
    """Makes a stream of its own the process's current stream in prepare and leaves it so: its
    calls are right and timed on it; the attempts after it would inherit it."""

    def prepare(self, w, inputs):
        import torch

        torch.cuda.set_stream(torch.cuda.Stream())
        return _sdpa(w, inputs)


class OutsideGraph(Backend):
    """Correct eager calls; under graph capture it records nothing and hands back the buffer the last
    eager call filled, so a replay does no work."""

    def prepare(self, w, inputs):
        import torch

        run = _sdpa(w, inputs)

        def fn():
            if torch.cuda.is_current_stream_capturing():
                return inputs.out
            inputs.out.copy_(run())
            return inputs.out

        return fn


class OtherGpu(Backend):
    """Correct results, computed on another GPU than the attempt's (the next one): each call copies
    the inputs there, runs SDPA's flash kernel there and copies O back, as a library with its own
    idea of the default device would. The caller's stream waits for the copy back, so the timer sees
    the time; the work, its memory and its clocks are another GPU's."""

    def prepare(self, w, inputs):
        import torch

        home = inputs.q.device
        other = torch.device("cuda", (home.index + 1) % torch.cuda.device_count())
        ins = types.SimpleNamespace(**{k: getattr(inputs, k) for k in ("q", "k", "v", "scale")})

        def fn():
            there = types.SimpleNamespace(q=ins.q.to(other), k=ins.k.to(other), v=ins.v.to(other), scale=ins.scale)
            with torch.cuda.device(other):
                o = _sdpa(w, there)()
            return o.to(home)

        return fn


BACKENDS = [
    OwnStream(name="fake-own-stream", family="plugin", devices=("cuda",), modes=("prefill", "decode"),
              dtypes=("bf16", "fp16"), kernel_families=FLASH),
    SetsStream(name="fake-sets-stream", family="plugin", devices=("cuda",), modes=("prefill", "decode"),
               dtypes=("bf16", "fp16"), kernel_families=FLASH),
    OutsideGraph(name="fake-outside-graph", family="plugin", devices=("cuda",), modes=("prefill", "decode"),
                 dtypes=("bf16", "fp16"), kernel_families=FLASH),
    IllegalAddress(name="fake-illegal-address", family="plugin", devices=("cuda",), kernel_families=TRITON),
    RealOom(name="fake-real-oom", family="plugin", devices=("cuda",), kernel_families=TRITON),
    EagerFlex(name="fake-eager-flex", family="plugin", devices=("cuda",), kernel_families=TRITON),
    OtherGpu(name="fake-other-gpu", family="plugin", devices=("cuda",), modes=("prefill", "decode"),
             dtypes=("bf16", "fp16"), kernel_families=FLASH),
]
