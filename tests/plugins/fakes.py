"""Fake backends that misbehave in every way the runner must survive (loaded with --plugin)."""
from __future__ import annotations

import os
import time

from attnbench.backends.base import Backend, Rejected
from attnbench.backends.layout import from_bhnd, to_bhnd
from attnbench.backends.reference import attention_math

CPU_AND_CUDA = ("cpu", "cuda")


class _Base(Backend):
    def math(self, w, inputs):
        q, k, v = (to_bhnd(t, w.layout) for t in (inputs.q, inputs.k, inputs.v))
        return from_bhnd(attention_math(q, k, v, w.causal, w.causal_align, inputs.scale), w.layout)


class Good(_Base):
    """Correct, declares what it runs (unfused GEMMs)."""

    def prepare(self, w, inputs):
        return lambda: self.math(w, inputs)


class Crash(_Base):
    """Aborts the process on its first call (like a segfault or abort in a native kernel)."""

    def prepare(self, w, inputs):
        def fn():
            os.abort()

        return fn


class Hang(_Base):
    def prepare(self, w, inputs):
        def fn():
            while True:
                time.sleep(1)

        return fn


class Oom(_Base):
    def prepare(self, w, inputs):
        import torch

        def fn():
            raise torch.OutOfMemoryError("fake: tried to allocate 1.00 TiB")

        return fn


class OneHeadWrong(_Base):
    """Right everywhere but in one query head of one batch index (the last head of the last batch
    index), where the output is 5% off: a bug in one head of eight."""

    def prepare(self, w, inputs):
        def fn():
            o = self.math(w, inputs).clone()
            to_bhnd(o, w.layout)[-1, -1] *= 1.05
            return o

        return fn


class WrongDtype(_Base):
    """Right values, returned in float64 whatever the workload's dtype."""

    def prepare(self, w, inputs):
        return lambda: self.math(w, inputs).double()


class Detached(_Base):
    """A training forward computed without autograd: right values, no graph back to the inputs."""

    def prepare(self, w, inputs):
        import torch

        def fn():
            with torch.no_grad():
                return self.math(w, inputs)

        return fn


class HostOom(_Base):
    """The CPU allocator failing, in its own words (a RuntimeError, not a MemoryError)."""

    def prepare(self, w, inputs):
        def fn():
            raise RuntimeError("[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: not enough memory: "
                               "you tried to allocate 1099511627776 bytes.")

        return fn


class Wrong(_Base):
    """Returns plausible but wrong values (scaled output)."""

    def prepare(self, w, inputs):
        return lambda: self.math(w, inputs) * 1.05


class Unwritten(_Base):
    """Writes only the first half of the (NaN-poisoned) output buffer it is given."""

    def prepare(self, w, inputs):
        def fn():
            o = self.math(w, inputs)
            out = inputs.out
            half = out.shape[2 if w.layout == "BHND" else 1] // 2 or 1
            if w.layout == "BHND":
                out[:, :, :half].copy_(o[:, :, :half])
            else:
                out[:, :half].copy_(o[:, :half])
            return out

        return fn


class Refuses(_Base):
    def prepare(self, w, inputs):
        raise Rejected("fake: this library refuses every configuration")


class Raises(_Base):
    def prepare(self, w, inputs):
        def fn():
            raise ValueError("fake: a bug in the kernel wrapper")

        return fn


class Mutates(_Base):
    """Decode that writes into the KV cache it was handed."""

    def prepare(self, w, inputs):
        def fn():
            o = self.math(w, inputs)
            inputs.k.data.mul_(1.0001) if not inputs.k.requires_grad else None
            return o

        return fn


class LaterGarbage(_Base):
    """Right on its first calls, then returns the output of its first call forever (a stale buffer)."""

    def prepare(self, w, inputs):
        kept = {}

        def fn():
            kept["n"] = kept.get("n", 0) + 1
            if kept["n"] <= 3:
                kept["o"] = self.math(w, inputs)
            return kept["o"]

        return fn


class Cached(_Base):
    """Computes once, then answers from a cache keyed on the inputs' identity; a tiny GEMM per call
    makes every call look like GEMM work to the profiler."""

    def prepare(self, w, inputs):
        import torch

        cache = {}
        probe = torch.ones(4, 4, dtype=inputs.q.dtype, device=inputs.q.device)

        def fn():
            probe @ probe  # the fingerprint GEMM
            key = (inputs.q.data_ptr(), inputs.k.data_ptr(), inputs.v.data_ptr())
            if key not in cache:
                cache[key] = self.math(w, inputs)
            return cache[key]

        return fn


class ScalesQ(_Base):
    """Correct output from a Q it has just scaled in place (and scales again on every call)."""

    def prepare(self, w, inputs):
        import torch

        def fn():
            with torch.no_grad():
                inputs.q.mul_(1.0)  # rewrites Q with itself: invisible to value checks of the output
                inputs.q.add_(0.0)
                inputs.q.data[..., :1] *= 1.5
            return self.math(w, inputs)

        return fn


class RoundsCache(_Base):
    """Decode that rounds the KV cache in place (idempotent: the second call changes nothing more)."""

    def prepare(self, w, inputs):
        import torch

        def fn():
            with torch.no_grad():
                inputs.k.copy_(torch.round(inputs.k * 64) / 64)
            return self.math(w, inputs)

        return fn


GEMM = {"cpu": frozenset({"unfused-gemm"}), "cuda": frozenset({"unfused-gemm"})}
FLASH = {"cpu": frozenset({"pytorch-flash-cpu"}), "cuda": frozenset({"pytorch-flash"})}

BACKENDS = [
    Good(name="fake-good", family="plugin", kernel_families=GEMM, devices=CPU_AND_CUDA),
    Crash(name="fake-crash", family="plugin", kernel_families=GEMM),
    Hang(name="fake-hang", family="plugin", kernel_families=GEMM),
    Oom(name="fake-oom", family="plugin", kernel_families=GEMM),
    Wrong(name="fake-wrong", family="plugin", kernel_families=GEMM),
    Unwritten(name="fake-unwritten", family="plugin", kernel_families=GEMM,
              modes=("prefill", "decode")),
    # Claims a flash kernel but runs unfused matmuls: the dispatch probe must catch it.
    Good(name="fake-liar", family="plugin", kernel_families=FLASH),
    Refuses(name="fake-refuses", family="plugin", kernel_families=GEMM),
    Raises(name="fake-raises", family="plugin", kernel_families=GEMM),
    Mutates(name="fake-mutates", family="plugin", kernel_families=GEMM, modes=("decode",)),
    LaterGarbage(name="fake-later-garbage", family="plugin", kernel_families=GEMM, modes=("prefill", "decode")),
    Cached(name="fake-cached-result", family="plugin", kernel_families=GEMM, modes=("prefill", "decode")),
    ScalesQ(name="fake-scales-q", family="plugin", kernel_families=GEMM, modes=("prefill", "decode")),
    HostOom(name="fake-host-oom", family="plugin", kernel_families=GEMM),
    WrongDtype(name="fake-wrong-dtype", family="plugin", kernel_families=GEMM, modes=("prefill", "decode")),
    Detached(name="fake-detached", family="plugin", kernel_families=GEMM, modes=("train_fwd",)),
    OneHeadWrong(name="fake-one-head-wrong", family="plugin", kernel_families=GEMM, modes=("prefill", "decode")),
    RoundsCache(name="fake-rounds-cache", family="plugin", kernel_families=GEMM, modes=("decode",)),
]
