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


def _start_child() -> None:
    """A child process that sleeps for ten minutes; its pid is appended to the file named by
    ATTNBENCH_FAKE_CHILD_PIDS."""
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    _note("ATTNBENCH_FAKE_CHILD_PIDS", str(child.pid))


def _note(env: str, line: str) -> None:
    """Appends a line to the file the environment variable `env` names (nothing when it is unset)."""
    path = os.environ.get(env)
    if path:
        with open(path, "a") as f:
            f.write(f"{line}\n")


class HangsWithChild(_Base):
    """Starts a child process, then hangs: killing the worker must take the child too."""

    def prepare(self, w, inputs):
        _start_child()

        def fn():
            while True:
                time.sleep(1)

        return fn


class LeavesChild(_Base):
    """Right values, and a child process started in prepare that it never stops."""

    def prepare(self, w, inputs):
        _start_child()
        return lambda: self.math(w, inputs)


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


class LibraryError(_Base):
    """A library's own exception type (a RuntimeError subclass named ERROR) with its text (MESSAGE)."""

    ERROR = "LibraryError"
    MESSAGE = "fake: failed"

    def prepare(self, w, inputs):
        error = type(self.ERROR, (RuntimeError,), {})

        def fn():
            raise error(self.MESSAGE)

        return fn


class CompileFails(LibraryError):
    """A kernel that fails to compile: the first line heads the quoted source, the error is last."""

    ERROR = "InductorError"
    MESSAGE = ("CompilationError: at 194:23:\n        acc = tl.dot(p, v, acc)\n                       ^\n"
               "ValueError('fake: shared memory 262144 exceeds the limit 232448')\n\n"
               "Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace")


class LibraryOom(LibraryError):
    """A library's allocator failing in its own words (XLA's, raised as a RuntimeError subclass)."""

    ERROR = "XlaRuntimeError"
    MESSAGE = ("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 80.00GiB with allocator GPU_0_bfc on "
               "device 0.")


class AutotuneOom(LibraryOom):
    """A library whose first line names another failure, its allocator's words further down (XLA's
    autotuner when every candidate kernel failed to get its workspace)."""

    ERROR = "JaxRuntimeError"
    MESSAGE = ("NOT_FOUND: All configs failed during profiling or were excluded from selection.\n"
               "  config 0: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 137438953472 bytes.\n"
               "  config 1: excluded")


class HoldsPool(Good):
    """Correct, and holds a pool of its own between workloads: release() says when it was asked to
    give it back (one line per call in the file named by ATTNBENCH_FAKE_RELEASE_LOG)."""

    def release(self):
        _note("ATTNBENCH_FAKE_RELEASE_LOG", self.name)


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
    """Right on its first calls, then returns the output of its tenth call forever (a stale buffer);
    a tiny GEMM on every call keeps it looking like GEMM work to the profiler."""

    def prepare(self, w, inputs):
        import torch

        kept = {}
        probe = torch.ones(4, 4, dtype=inputs.q.dtype, device=inputs.q.device)

        def fn():
            probe @ probe
            kept["n"] = kept.get("n", 0) + 1
            if kept["n"] <= 10:
                kept["o"] = self.math(w, inputs)
            return kept["o"]

        return fn


class Cached(_Base):
    """Computes once, then answers from a cache keyed on the inputs' identity; a tiny GEMM per call
    makes every call look like GEMM work to the profiler."""

    WORK_S = 0.0  # what its real work costs on top of the math (a large prefill's time)

    def key(self, inputs) -> tuple:
        return inputs.q.data_ptr(), inputs.k.data_ptr(), inputs.v.data_ptr()

    def prepare(self, w, inputs):
        import torch

        cache = {}
        probe = torch.ones(4, 4, dtype=inputs.q.dtype, device=inputs.q.device)

        def fn():
            probe @ probe  # the fingerprint GEMM
            key = self.key(inputs)
            if key not in cache:
                cache.clear()
                time.sleep(self.WORK_S)
                cache[key] = self.math(w, inputs)
            return cache[key]

        return fn


class CachedByVersion(Cached):
    """Right for every input values: it computes again whenever Q, K or V were written (their
    version counters), and otherwise answers from its cache. Its real work is slow (50 ms), its
    answers from the cache fast."""

    # a sleep, so at least this long on any host, however loaded: the gate names a cache when calls on
    # new values take 5x the same-values calls and 2 ms more, so the same calls (a few us) would have to
    # stall past 10 ms in two of three rounds to clear it (past 1 ms, about one scheduler slice, at 5 ms)
    WORK_S = 0.05

    def key(self, inputs) -> tuple:
        return tuple((t.data_ptr(), t._version) for t in (inputs.q, inputs.k, inputs.v))


class ComputesIntoNaN(_Base):
    """Computes only when the output buffer it is handed holds NaN (a poisoned buffer: a check),
    and otherwise hands that buffer back as it is: timed calls do a tiny GEMM and a NaN test."""

    def prepare(self, w, inputs):
        import torch

        probe = torch.ones(4, 4, dtype=inputs.q.dtype, device=inputs.q.device)

        def fn():
            probe @ probe
            if torch.isnan(inputs.out).any():
                inputs.out.copy_(self.math(w, inputs))
            return inputs.out

        return fn


class ChangesScale(_Base):
    """Right on its first call; on its second it halves the workload's softmax scale (a plain
    attribute of the inputs every backend shares) and computes with it from then on."""

    def prepare(self, w, inputs):
        n = {"calls": 0}

        def fn():
            n["calls"] += 1
            if n["calls"] == 2:
                inputs.scale *= 0.5
            return self.math(w, inputs)

        return fn


class SetsThreads(_Base):
    """Right values, after setting torch's thread count for the whole process to one."""

    def prepare(self, w, inputs):
        import torch

        torch.set_num_threads(1)
        return lambda: self.math(w, inputs)


class FastClock(_Base):
    """Right values, after replacing time.perf_counter_ns (the CPU timer's clock) with one that runs
    ten times slow, so that every call seems ten times faster."""

    def prepare(self, w, inputs):
        real = time.perf_counter_ns
        start = real()
        time.perf_counter_ns = lambda: start + (real() - start) // 10
        return lambda: self.math(w, inputs)


class LazyOutput(_Base):
    """Returns its output buffer as a tensor subclass that computes the attention only when an
    operation reads it: a timed call does a tiny GEMM, a check's reads see right values."""

    def prepare(self, w, inputs):
        import torch

        outer, probe = self, torch.ones(4, 4, dtype=inputs.q.dtype, device=inputs.q.device)

        class Lazy(torch.Tensor):
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                def real(a):
                    return outer.math(w, inputs) if isinstance(a, Lazy) else a

                with torch._C.DisableTorchFunctionSubclass():
                    return func(*(real(a) for a in args), **(kwargs or {}))

        def fn():
            probe @ probe
            return inputs.out.as_subclass(Lazy)

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


class FallsBackLate(_Base):
    """Runs SDPA's flash kernel (what it declares) for its first 12 calls, then unfused GEMMs: right
    values throughout, the wrong kernel for most timed calls."""

    def prepare(self, w, inputs):
        import torch.nn.functional as F

        n = {"calls": 0}

        def fn():
            n["calls"] += 1
            if n["calls"] <= 12:
                q, k, v = (to_bhnd(t, w.layout) for t in (inputs.q, inputs.k, inputs.v))
                return from_bhnd(F.scaled_dot_product_attention(q, k, v, scale=inputs.scale, is_causal=w.causal,
                                                                enable_gqa=w.kv_heads != w.q_heads), w.layout)
            return self.math(w, inputs)

        return fn


class PartlyFused(_Base):
    """SDPA's flash kernel (declared) for the first KV group, unfused GEMMs for the others: right
    values, and the declared family does appear in every call."""

    def prepare(self, w, inputs):
        import torch
        import torch.nn.functional as F

        from torch.nn.attention import SDPBackend, sdpa_kernel

        def fn():
            q, k, v = (to_bhnd(t, w.layout) for t in (inputs.q, inputs.k, inputs.v))
            g = w.q_heads // w.kv_heads
            with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                first = F.scaled_dot_product_attention(q[:, :g], k[:, :1], v[:, :1], scale=inputs.scale,
                                                       is_causal=w.causal, enable_gqa=g > 1)
            rest = attention_math(q[:, g:], k[:, 1:], v[:, 1:], w.causal, w.causal_align, inputs.scale)
            return from_bhnd(torch.cat([first, rest], dim=1), w.layout)

        return fn


class NamedLikeAKernel(_Base):
    """Unfused GEMMs inside a profiler range named like the flash kernel it declares."""

    def prepare(self, w, inputs):
        from torch.profiler import record_function

        def fn():
            with record_function("aten::_scaled_dot_product_flash_attention_for_cpu flash_fwd_kernel"):
                return self.math(w, inputs)

        return fn


class NoMaxSoftmax(_Base):
    """Softmax as exp(s) / sum(exp(s)), without subtracting the row maximum: exact on N(0, 1) inputs,
    overflows to NaN once logits pass exp()'s range."""

    def prepare(self, w, inputs):
        import torch

        def fn():
            q, k, v = (to_bhnd(t, w.layout).float() for t in (inputs.q, inputs.k, inputs.v))
            g = w.q_heads // w.kv_heads
            k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
            s = q @ k.transpose(-1, -2) * inputs.scale
            if w.causal:
                from attnbench.backends.layout import causal_offset

                off = causal_offset(w.q_len, w.kv_len, w.causal_align)
                keep = torch.ones(w.q_len, w.kv_len, dtype=torch.bool, device=s.device).tril(off)
                s = s.masked_fill(~keep, float("-inf"))
            e = s.exp()
            o = (e / e.sum(-1, keepdim=True)) @ v
            return from_bhnd(o.to(inputs.q.dtype), w.layout)

        return fn


class Saturates(_Base):
    """Quantizes Q, K and V to a fixed range of +-8 first (a fixed-scale low-precision format):
    invisible on N(0, 1) inputs, wrong wherever activations have outliers."""

    def prepare(self, w, inputs):
        def fn():
            q, k, v = (to_bhnd(t, w.layout).clamp(-8, 8) for t in (inputs.q, inputs.k, inputs.v))
            return from_bhnd(attention_math(q, k, v, w.causal, w.causal_align, inputs.scale), w.layout)

        return fn


class EmptyHalf(_Base):
    """Allocates its own output with torch.empty and writes only the first half of the query rows:
    whatever the allocator hands back stays in the rest."""

    def prepare(self, w, inputs):
        import torch

        def fn():
            full = to_bhnd(self.math(w, inputs), w.layout)
            o = torch.empty_like(full)
            half = max(w.q_len // 2, 1) if w.q_len > 1 else 0  # decode: the one row stays unwritten
            o[:, :, :half] = full[:, :, :half]
            if w.q_len == 1:
                o[1:] = full[1:]  # decode: every batch index but the first
            return from_bhnd(o, w.layout)

        return fn


class BackgroundThread(_Base):
    """Returns at once; a thread of its own writes the right output into the returned buffer 50 ms
    later (the host's way of hiding work from the caller's clock, as another stream is the GPU's)."""

    def prepare(self, w, inputs):
        import threading

        import torch

        shape = self.math(w, inputs).shape

        def fn():
            o = torch.full(shape, float("nan"), dtype=inputs.q.dtype, device=inputs.q.device)

            def work():
                time.sleep(0.05)
                o.copy_(self.math(w, inputs))

            threading.Thread(target=work, daemon=True).start()
            return o

        return fn


class _InputCache(_Base):
    """Issue 42.2's held-out kernels: right on every input values, and answering repeated values from a
    cache of its results keyed by `key()` (`entries` of them, least recent dropped); a hit runs `on_hit`
    (by default a tiny GEMM, so that every call looks like GEMM work to the profiler)."""

    entries = 1

    def key(self, inputs) -> tuple:
        raise NotImplementedError

    def on_hit(self, w, inputs, probe):
        probe @ probe

    def prepare(self, w, inputs):
        import collections

        import torch

        cache = collections.OrderedDict()
        probe = torch.ones(4, 4, dtype=inputs.q.dtype, device=inputs.q.device)

        def fn():
            key = self.key(inputs)
            if key in cache:
                cache.move_to_end(key)
                self.on_hit(w, inputs, probe)
                return cache[key]
            out = self.math(w, inputs)
            cache[key] = out
            while len(cache) > self.entries:
                cache.popitem(last=False)
            return out

        return fn


def _values(inputs) -> tuple:
    """A fingerprint of the input values, cheap beside the attention: per tensor its sum and its norm."""
    import torch

    return tuple(tuple(torch.stack([t.detach().sum(), torch.linalg.vector_norm(t.detach())]).tolist())
                 for t in (inputs.q, inputs.k, inputs.v))


class ValueCacheHalfKV(_InputCache):
    """42.2 (a): memoises on a fingerprint of the input values and, on a hit, still runs its declared
    kernel (the GEMMs) on half the KV length, so that the profiler and the timer see attention work."""

    def key(self, inputs) -> tuple:
        return _values(inputs)

    def on_hit(self, w, inputs, probe):
        from attnbench.backends.layout import to_bhnd

        q, k, v = (to_bhnd(t, w.layout) for t in (inputs.q, inputs.k, inputs.v))
        half = max(1, k.shape[2] // 2)
        attention_math(q, k[:, :, :half], v[:, :, :half], False, w.causal_align, inputs.scale)


class ValueCacheTwo(_InputCache):
    """A two-entry cache on the input values: a rotation over two input sets would be all hits."""

    entries = 2

    def key(self, inputs) -> tuple:
        return _values(inputs)


class IdentityCache(_InputCache):
    """42.2 (b): memoises on the tensors' identity and version (declared with no kernel families)."""

    def key(self, inputs) -> tuple:
        return tuple((id(t), t._version) for t in (inputs.q, inputs.k, inputs.v))


class PointerCache(_InputCache):
    """Memoises on the tensors' data pointers and versions: a refill in place is a new version."""

    def key(self, inputs) -> tuple:
        return tuple((t.data_ptr(), t._version) for t in (inputs.q, inputs.k, inputs.v))


GEMM = {"cpu": frozenset({"unfused-gemm"}), "cuda": frozenset({"unfused-gemm"})}
FLASH = {"cpu": frozenset({"pytorch-flash-cpu"}), "cuda": frozenset({"pytorch-flash"})}

BACKENDS = [
    Good(name="fake-good", family="plugin", kernel_families=GEMM, devices=CPU_AND_CUDA),
    Crash(name="fake-crash", family="plugin", kernel_families=GEMM),
    Hang(name="fake-hang", family="plugin", kernel_families=GEMM),
    HangsWithChild(name="fake-hangs-with-child", family="plugin", kernel_families=GEMM),
    LeavesChild(name="fake-leaves-child", family="plugin", kernel_families=GEMM, modes=("prefill",)),
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
    ComputesIntoNaN(name="fake-computes-into-nan", family="plugin", kernel_families=GEMM, modes=("prefill", "decode")),
    ChangesScale(name="fake-changes-scale", family="plugin", kernel_families=GEMM, modes=("prefill", "decode")),
    LazyOutput(name="fake-lazy-output", family="plugin", kernel_families=GEMM, modes=("prefill", "decode")),
    SetsThreads(name="fake-sets-threads", family="plugin", kernel_families=GEMM, modes=("prefill", "decode")),
    FastClock(name="fake-fast-clock", family="plugin", kernel_families=GEMM, modes=("prefill", "decode")),
    ScalesQ(name="fake-scales-q", family="plugin", kernel_families=GEMM, modes=("prefill", "decode")),
    HostOom(name="fake-host-oom", family="plugin", kernel_families=GEMM),
    LibraryOom(name="fake-library-oom", family="plugin", kernel_families=GEMM),
    AutotuneOom(name="fake-autotune-oom", family="plugin", kernel_families=GEMM),
    CompileFails(name="fake-compile-fails", family="plugin", kernel_families=GEMM),
    CachedByVersion(name="fake-cached-by-version", family="plugin", kernel_families=GEMM,
                    modes=("prefill", "decode")),
    BackgroundThread(name="fake-background-thread", family="plugin", kernel_families=GEMM,
                     modes=("prefill", "decode")),
    HoldsPool(name="fake-holds-pool", family="plugin", kernel_families=GEMM, devices=CPU_AND_CUDA, holds_pool=True),
    # the fused kernel for one KV group, GEMMs for the rest; GEMMs declared as side work (layout
    # conversions): not an undeclared path, so OK
    PartlyFused(name="fake-partly-fused-side", family="plugin", kernel_families=FLASH, side_families=GEMM,
                devices=("cpu",), modes=("prefill",)),
    # side work alone never stands in for the declared kernel
    Good(name="fake-side-only", family="plugin", kernel_families=FLASH, side_families=GEMM),
    WrongDtype(name="fake-wrong-dtype", family="plugin", kernel_families=GEMM, modes=("prefill", "decode")),
    Detached(name="fake-detached", family="plugin", kernel_families=GEMM, modes=("train_fwd",)),
    OneHeadWrong(name="fake-one-head-wrong", family="plugin", kernel_families=GEMM, modes=("prefill", "decode")),
    RoundsCache(name="fake-rounds-cache", family="plugin", kernel_families=GEMM, modes=("decode",)),
    FallsBackLate(name="fake-falls-back-late", family="plugin", kernel_families=FLASH, devices=("cpu",),
                  modes=("prefill",)),
    PartlyFused(name="fake-partly-fused", family="plugin", kernel_families=FLASH, devices=("cpu",),
                modes=("prefill",)),
    NamedLikeAKernel(name="fake-named-like-a-kernel", family="plugin", kernel_families=FLASH,
                     modes=("prefill", "decode")),
    NoMaxSoftmax(name="fake-no-max-softmax", family="plugin", kernel_families=GEMM, modes=("prefill", "decode")),
    EmptyHalf(name="fake-empty-half", family="plugin", kernel_families=GEMM, modes=("prefill", "decode")),
    Saturates(name="fake-saturates", family="plugin", kernel_families=GEMM, modes=("prefill", "decode")),
    # issue 42.2: results cached on the inputs, stored OK without fresh inputs (tests/test_fresh_inputs.py)
    ValueCacheHalfKV(name="fake-value-cache", family="plugin", kernel_families=GEMM, modes=("prefill", "decode")),
    ValueCacheTwo(name="fake-value-cache-two", family="plugin", kernel_families=GEMM, modes=("prefill", "decode")),
    IdentityCache(name="fake-identity-cache", family="plugin", modes=("prefill", "decode")),
    PointerCache(name="fake-pointer-cache", family="plugin", kernel_families=GEMM, modes=("prefill", "decode")),
]
