"""The selftest's misbehaving kernels: each wrong in one way the gates must catch, each bound to its class's workload.

This file is handed to the workers as a plugin (the door every user's backend enters by), so it imports the
package by absolute names only. Every kernel is right where a careless check looks and wrong where the gates
must look: its values, its kernels, its clock or the work the timer sees."""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import threading
import time
from dataclasses import dataclass

from attnbench.backends.base import Backend
from attnbench.backends.layout import from_bhnd, sdpa_mask_args, to_bhnd
from attnbench.backends.reference import attention_math
from attnbench.workloads import Workload


def _w(mode, b, nq, nkv, hq, hkv, d, dtype, **kw) -> Workload:
    return Workload(mode=mode, batch=b, q_len=nq, kv_len=nkv, q_heads=hq, kv_heads=hkv, head_dim=d, head_dim_v=d,
                    dtype=dtype, **kw)


# issue 42.2: a workload whose timed calls each see new input values (the fresh_inputs axis); the cache classes
# run with it, as a sweep that sets it does
def _fresh(w: Workload) -> Workload:
    return dataclasses.replace(w, fresh_inputs=True)


# One workload per class and device, tiny: the selftest's time is start-up and gates, not the kernels.
CPU = {
    "prefill": _w("prefill", 1, 128, 128, 2, 2, 32, "fp32"),
    # so small that a memo's answer stays under the ceiling gate's 10x margin even on a slow, loaded host (the
    # cases that were stored OK were tiny): what catches these must be the inputs changing, not the ceiling
    "cached": _fresh(_w("prefill", 1, 32, 32, 2, 2, 16, "fp32")),
    "decode": _w("decode", 2, 1, 256, 2, 1, 32, "fp32"),
    "gqa": _w("prefill", 1, 128, 128, 8, 4, 32, "fp32"),  # four KV groups: one on the declared path is a quarter
    "train": _w("train_fwd_bwd", 1, 64, 64, 2, 2, 16, "fp32", causal=True),
}
CUDA = {
    "prefill": _w("prefill", 1, 1024, 1024, 8, 8, 64, "bf16"),
    # work a stream of its own hides must dwarf a launch (tests/test_gpu.py HIDDEN: the probe's trace says so)
    "hidden": _w("prefill", 4, 4096, 4096, 32, 32, 128, "bf16", causal=True),
    "graph": _w("decode", 32, 1, 16384, 32, 8, 128, "bf16", launch="graph"),
    "cached": _fresh(_w("prefill", 1, 1024, 1024, 8, 8, 64, "bf16")),  # 2 GFLOP: a memo hit stays under the ceiling
    "decode": _w("decode", 8, 1, 4096, 16, 4, 128, "bf16"),
    "gqa": _w("prefill", 1, 1024, 1024, 8, 4, 64, "bf16"),
    "train": _w("train_fwd_bwd", 1, 1024, 1024, 8, 8, 64, "bf16", causal=True),
}

GEMM = {"cpu": frozenset({"unfused-gemm"}), "cuda": frozenset({"unfused-gemm"})}
FLASH = {"cpu": frozenset({"pytorch-flash-cpu"}), "cuda": frozenset({"pytorch-flash"})}
LEDGER = "ATTNBENCH_SELFTEST_LEDGER"  # where the cache kernels write how many calls their memo answered
COMPILED = {"cpu": frozenset({"inductor"}), "cuda": frozenset({"triton"})}


@dataclass
class Pinned(Backend):
    """A selftest kernel: runs only its class's workloads (`only`: one per device), so that one run over every
    class's workload plans the others as UNSUPPORTED without running them."""

    only: tuple = ()

    def extra_supports(self, w, dev):
        return None if w in self.only else "selftest: another class's workload"

    def math(self, w, inputs, q=None, k=None, v=None):
        """Unfused attention (GEMMs) on the inputs, or on the given BHND tensors, in the workload's layout."""
        q, k, v = (to_bhnd(t, w.layout) if x is None else x for t, x in ((inputs.q, q), (inputs.k, k), (inputs.v, v)))
        return from_bhnd(attention_math(q, k, v, w.causal, w.causal_align, inputs.scale), w.layout)

    def fused(self, w, inputs, q=None, k=None, v=None):
        """SDPA's flash kernel (the declared FLASH family) on the inputs or the given BHND tensors (BHND out)."""
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel

        q, k, v = (to_bhnd(t, w.layout) if x is None else x for t, x in ((inputs.q, q), (inputs.k, k), (inputs.v, v)))
        mask = sdpa_mask_args(q.shape[2], k.shape[2], w.causal, w.causal_align)
        gqa = q.shape[1] != k.shape[1]
        # CUDA: pinned, so that no other SDPA kernel stands in for the declared one; CPU has one fused kernel
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]) if q.is_cuda else contextlib.nullcontext():
            return F.scaled_dot_product_attention(q, k, v, scale=inputs.scale, enable_gqa=gqa, **mask)


class Honest(Pinned):
    """The control: SDPA's flash kernel on every call, declared as such. It must be OK, or the gates refuse
    correct kernels and every class below would be 'caught' for nothing; the cache classes' times are read
    against it."""

    def prepare(self, w, inputs):
        return lambda: from_bhnd(self.fused(w, inputs), w.layout)


class OwnStream(Pinned):
    """Launches its kernel on a stream of its own that the caller's stream never waits for."""

    def prepare(self, w, inputs):
        import torch

        side = torch.cuda.Stream()

        def fn():
            side.wait_stream(torch.cuda.current_stream())  # inputs are ready; the result is never awaited
            with torch.cuda.stream(side):
                return from_bhnd(self.fused(w, inputs), w.layout)

        return fn


class OutsideGraph(Pinned):
    """Right eager calls; under graph capture it records nothing and hands back the last eager result."""

    def prepare(self, w, inputs):
        import torch

        def fn():
            if torch.cuda.is_current_stream_capturing():
                return inputs.out
            inputs.out.copy_(from_bhnd(self.fused(w, inputs), w.layout))
            return inputs.out

        return fn


class CachedByVersion(Pinned):
    """Memoises on the inputs' identity and version counters (any number of entries): right for every input
    it is given, computed again when Q, K or V were written, and answered from its memo otherwise. It keeps
    the truth of its calls: after each attempt it appends how many of them its memo answered to the ledger
    file ATTNBENCH_SELFTEST_LEDGER names (the selftest's judge reads it; the gates never see it)."""

    ENTRIES = 8  # more than any rotation of input sets a harness might cycle through

    def key(self, inputs) -> tuple:
        return tuple((t.data_ptr(), t._version) for t in (inputs.q, inputs.k, inputs.v))

    def hit(self, w, inputs):
        """What a call that finds its answer in the memo still runs (nothing here)."""

    def prepare(self, w, inputs):
        memo: dict = {}
        # calls, memo answers, and the longest run of consecutive calls that did the work: the timed calls are one
        # run of calls, so they were computed only if some run of computed calls is as long as they are
        count = self.__dict__["count"] = {"calls": 0, "hits": 0, "longest_computed": 0}
        run = [0]

        def fn():
            count["calls"] += 1
            key = self.key(inputs)
            if key in memo:
                count["hits"] += 1
                run[0] = 0
                self.hit(w, inputs)
                return memo[key]
            run[0] += 1
            count["longest_computed"] = max(count["longest_computed"], run[0])
            if len(memo) >= self.ENTRIES:
                memo.pop(next(iter(memo)))
            memo[key] = out = from_bhnd(self.fused(w, inputs), w.layout)
            return out

        return fn

    def release(self):
        count, path = self.__dict__.pop("count", None), os.environ.get(LEDGER)
        if count and path:
            with open(path, "a") as f:
                f.write(json.dumps({"backend": self.name, **count}) + "\n")


class CachedByValues(CachedByVersion):
    """Memoises on a fingerprint of the input values; a call answered from the memo still launches its declared
    kernel, on a quarter of the KV length, so the profiler sees the right family doing some work."""

    def key(self, inputs) -> tuple:
        import torch

        with torch.no_grad():
            return tuple(torch.stack([t.float().sum() for t in (inputs.q, inputs.k, inputs.v)]).tolist())

    def hit(self, w, inputs):
        q, k, v = (to_bhnd(t, w.layout) for t in (inputs.q, inputs.k, inputs.v))
        n = max(k.shape[2] // 4, 1)
        self.fused(w, inputs, q, k[:, :, :n], v[:, :, :n])


class RoundsCache(Pinned):
    """Decode that rounds the KV cache in place (idempotent: after its first call it changes nothing)."""

    def prepare(self, w, inputs):
        import torch

        def fn():
            with torch.no_grad():
                inputs.k.copy_(torch.round(inputs.k * 64) / 64)
            return from_bhnd(self.fused(w, inputs), w.layout)

        return fn


class FallsBackLate(Pinned):
    """Its declared fused kernel for the first 12 calls, unfused GEMMs after: right values throughout."""

    def prepare(self, w, inputs):
        n = {"calls": 0}

        def fn():
            n["calls"] += 1
            if n["calls"] <= 12:
                return from_bhnd(self.fused(w, inputs), w.layout)
            return self.math(w, inputs)

        return fn


class PartlyFused(Pinned):
    """Its declared fused kernel for the first KV group, unfused GEMMs for the others: right values, and the
    declared family appears in every call."""

    def prepare(self, w, inputs):
        import torch

        def fn():
            q, k, v = (to_bhnd(t, w.layout) for t in (inputs.q, inputs.k, inputs.v))
            g = w.q_heads // w.kv_heads
            first = self.fused(w, inputs, q[:, :g], k[:, :1], v[:, :1])
            rest = attention_math(q[:, g:], k[:, 1:], v[:, 1:], w.causal, w.causal_align, inputs.scale)
            return from_bhnd(torch.cat([first, rest.to(first.dtype)], dim=1), w.layout)

        return fn


class EagerCompiled(Pinned):
    """flex_attention without torch.compile: declares the compiled path's kernels (Triton on CUDA, Inductor's
    on CPU) and runs the unfused eager fallback a recompile limit silently leaves behind."""

    def prepare(self, w, inputs):
        from torch.nn.attention.flex_attention import flex_attention

        q, k, v = (to_bhnd(t, w.layout) for t in (inputs.q, inputs.k, inputs.v))
        gqa = w.kv_heads != w.q_heads
        return lambda: from_bhnd(flex_attention(q, k, v, scale=inputs.scale, enable_gqa=gqa), w.layout)


class HostThread(Pinned):
    """Returns at once; a host thread waits 50 ms and then writes the right output into the returned buffer,
    outside every clock and stream the caller watches."""

    def prepare(self, w, inputs):
        import torch

        def fn():
            o = torch.full_like(inputs.out, float("nan"))

            def work():
                time.sleep(0.05)
                o.copy_(from_bhnd(self.fused(w, inputs), w.layout))

            threading.Thread(target=work, daemon=True).start()
            return o

        return fn


class Unwritten(Pinned):
    """Writes only the first half of the query rows of the (NaN-poisoned) output buffer it is given."""

    def prepare(self, w, inputs):
        def fn():
            o, out = self.math(w, inputs), inputs.out
            half = max(out.shape[2 if w.layout == "BHND" else 1] // 2, 1)
            (out[:, :, :half] if w.layout == "BHND" else out[:, :half]).copy_(
                o[:, :, :half] if w.layout == "BHND" else o[:, :half])
            return out

        return fn


class WrongGrad(Pinned):
    """Right forward values; the gradient reaching K is 20% too large, beyond any bf16 tolerance (a backward bug
    the forward never shows)."""

    def prepare(self, w, inputs):
        import torch

        class ScaleGrad(torch.autograd.Function):
            @staticmethod
            def forward(ctx, t):
                return t.view_as(t)

            @staticmethod
            def backward(ctx, g):
                return g * 1.2

        return lambda: self.math(w, inputs, k=ScaleGrad.apply(to_bhnd(inputs.k, w.layout)))


def _pin(kind: str) -> tuple:
    return tuple(d[kind] for d in (CPU, CUDA) if kind in d)


def _make(cls, name: str, kind: str, families, devices=("cpu", "cuda"), **kw) -> Pinned:
    w = (CPU.get(kind) or CUDA[kind])
    return cls(name=name, family="selftest", kernel_families=families, devices=devices, modes=(w.mode,),
               dtypes=("fp32", "bf16"), only=_pin(kind), accepts={"launch": ("graph",)},
               description=(cls.__doc__ or "").split("\n")[0], **kw)


BACKENDS = [
    _make(Honest, "selftest-honest", "prefill", FLASH),
    _make(OwnStream, "selftest-side-stream", "hidden", FLASH, devices=("cuda",)),
    _make(OutsideGraph, "selftest-empty-graph", "graph", FLASH, devices=("cuda",)),
    # declares no kernel families, as the case that was stored OK did: dispatch cannot be checked
    # the honest kernel on the cache classes' workload too: their times are shown beside its
    _make(Honest, "selftest-honest-cached", "cached", FLASH),
    # holds_pool: release() (the ledger line) after every attempt
    _make(CachedByVersion, "selftest-cached-identity", "cached", {}, holds_pool=True),
    _make(CachedByValues, "selftest-cached-values", "cached", FLASH, holds_pool=True),
    _make(RoundsCache, "selftest-writes-inputs", "decode", FLASH),
    _make(FallsBackLate, "selftest-late-fallback", "gqa", FLASH),
    _make(PartlyFused, "selftest-partial-fallback", "gqa", FLASH),
    _make(EagerCompiled, "selftest-silently-eager", "prefill", COMPILED),
    _make(HostThread, "selftest-host-thread", "prefill", FLASH),
    _make(Unwritten, "selftest-unwritten-output", "prefill", GEMM),
    _make(WrongGrad, "selftest-wrong-gradients", "train", GEMM),
]
