"""Helpers shared by the backends of optional libraries: an availability line naming what to
install, the library's version, BNHD views, the causal-alignment rule of bottom-right libraries,
and turning a library's refusal into `Rejected`. Nothing here imports an optional library."""
from __future__ import annotations

import importlib
import inspect
from importlib import metadata

from ..workloads import Workload
from ..workloads.append import appending, slot
from ..workloads.paged import paged
from ..workloads.varlen import cu_seqlens, packed, seq_lengths
from .base import Backend, Prepared, Rejected

# What libraries raise when they refuse a configuration (FA4 asserts its limits; cuDNN and JAX raise
# ValueError/RuntimeError with these words). A CUDA fault is none of these and stays an error, and so
# does a TypeError: a wrong argument is attnbench's bug, never the library's refusal.
_REFUSAL_TYPES = (ValueError, NotImplementedError, AssertionError)
_REFUSAL_WORDS = ("not supported", "unsupported", "only supports", "no operator found", "not implemented",
                  "is not available")


def import_hint(module: str, hint: str, attr: str | None = None) -> str | None:
    """None when `module` (and its `attr`) import, else `hint` and the import error, on one line."""
    try:
        mod = importlib.import_module(module)
        if attr:
            getattr(mod, attr)
    except Exception as e:  # ImportError, a broken binary (OSError), a missing symbol
        if isinstance(e, ModuleNotFoundError) and e.name and module.startswith(e.name):
            return hint  # the library itself is absent: the hint says it all
        first = (str(e).strip().splitlines() or [""])[0][:120]
        return f"{hint} [{type(e).__name__}: {first}]"
    return None


def dist_version(dist: str, module: str | None = None) -> str | None:
    """The installed distribution's version, else the module's __version__, else None."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        pass
    if module:
        try:
            return getattr(importlib.import_module(module), "__version__", None)
        except Exception:
            return None
    return None


def to_bnhd(t, layout: str):
    """A (B, N, H, D) view of a workload tensor (BHND tensors are transposed views, not copies)."""
    return t if layout == "BNHD" else t.transpose(1, 2)


def from_bnhd(t, layout: str):
    return t if layout == "BNHD" else t.transpose(1, 2)


def bottom_right_only(w: Workload, lib: str) -> str | None:
    """Why a library whose causal mask is aligned bottom-right (query i sees keys j <= i + Nkv - Nq)
    cannot run `w`: top-left differs from it unless Nq == Nkv."""
    if w.causal and w.causal_align == "top_left" and w.q_len != w.kv_len:
        return (f"{lib} aligns causal bottom-right only; top-left with q_len {w.q_len} != kv_len {w.kv_len} "
                "is another mask")
    return None


def is_refusal(e: BaseException) -> bool:
    """A library's refusal: one of the refusal types, or a RuntimeError (cuDNN's, JAX's XlaRuntimeError)
    saying so in words."""
    if isinstance(e, _REFUSAL_TYPES):
        return True
    return isinstance(e, RuntimeError) and any(word in str(e).lower() for word in _REFUSAL_WORDS)


def call_rejecting(fn, lib: str):
    """fn(), with the library's refusal of the configuration raised as `Rejected` (UNSUPPORTED)."""
    try:
        return fn()
    except Rejected:
        raise
    except Exception as e:
        if not is_refusal(e):
            raise
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise Rejected(f"{lib} refused: {type(e).__name__}: {first}") from None


def window_size(window: int) -> dict:
    """FlashAttention's window_size for a causal sliding window of `window` keys: (left, right) keys
    beside the diagonal, bottom-right like its causal mask; nothing (the library's default) without one."""
    return {"window_size": (window - 1, 0)} if window else {}


def _out(o):
    """The output of a FlashAttention-style call: some builds return (out, lse)."""
    return o[0] if isinstance(o, tuple) else o


def flash_attend(fn, lib: str, q, k, v, causal: bool, causal_align: str, scale, window):
    """Backend.attend() for FlashAttention-style functions (fn(q, k, v, softmax_scale=, causal=,
    window_size=) on (B, N, H, D)): the caller's (B, H, N, D) views are transposed (views, no copy),
    a sliding window of `window` keys is window_size=(window - 1, 0) (bottom-right, like causal)."""
    nq, nkv = q.shape[2], k.shape[2]
    if causal and causal_align == "top_left" and nq != nkv:
        raise Rejected(f"{lib} aligns causal bottom-right only; top-left with q_len {nq} != kv_len {nkv}")
    kw = window_size(window) if causal else {}
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    o = fn(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), softmax_scale=scale, causal=causal, **kw)
    return _out(o).transpose(1, 2)


class FlashStyle(Backend):
    """A backend over a FlashAttention-style `flash_attn_func(q, k, v, softmax_scale=, causal=)` on
    (B, N, H, D) tensors, causal aligned bottom-right, backward through torch autograd. A library
    sets: `module` (where flash_attn_func lives), `lib` (its name in reasons), `hint` (the install
    hint), `dists` ((distribution, module) pairs its version is read from, in order) and
    `call_kwargs` (fixed extra arguments of flash_attn_func), and `page_multiple` (the page sizes its
    paged KV cache takes are multiples of it). A paged or appending decode cache goes through
    flash_attn_with_kvcache (_prepare_kvcache), where the library has it."""

    module = ""
    lib = ""
    hint = ""
    dists: tuple = ()
    call_kwargs: dict = {}
    page_multiple: int = 1

    def _func(self):
        return importlib.import_module(self.module).flash_attn_func

    def _varlen_func(self):
        fn = getattr(importlib.import_module(self.module), "flash_attn_varlen_func", None)
        if fn is None:
            raise Rejected(f"{self.lib}: this build offers no flash_attn_varlen_func (packed batches)")
        return fn

    def availability(self) -> str | None:
        return import_hint(self.module, self.hint, attr="flash_attn_func")

    def version(self) -> str | None:
        for dist, module in self.dists:
            v = dist_version(dist, module)
            if v:
                return v
        return None

    def extra_supports(self, w: Workload, dev) -> str | None:
        if w.page_size and w.page_size % self.page_multiple:
            return f"{self.lib}'s paged KV cache takes page sizes divisible by {self.page_multiple}, got {w.page_size}"
        return bottom_right_only(w, self.lib)

    def prepare(self, w: Workload, inputs) -> Prepared:
        if packed(w):
            return self._prepare_varlen(w, inputs)
        if paged(w) or appending(w):
            return self._prepare_kvcache(w, inputs)
        fn = self._func()
        # (B, N, H, D) views: a BHND workload's are transposed views the library may copy (timed)
        q, k, v = (to_bnhd(t, w.layout) for t in (inputs.q, inputs.k, inputs.v))
        return self._call(fn, w, inputs, q, k, v, {**self.call_kwargs, **window_size(w.window)})

    def _call(self, fn, w: Workload, inputs, q, k, v, kw: dict, state=None) -> Prepared:
        """The step of one library call fn(q, k, v, softmax_scale=, causal=, **kw) on (B, N, H, D)
        tensors, its output returned in the workload's layout; `state` stays alive with it."""
        def step():
            return from_bnhd(_out(fn(q, k, v, softmax_scale=inputs.scale, causal=w.causal, **kw)), w.layout)

        return Prepared(step=step, first_call=lambda: call_rejecting(step, self.lib), state=state)

    def _prepare_varlen(self, w: Workload, inputs) -> Prepared:
        """A packed batch through flash_attn_varlen_func on (T, H, D) tensors: cu_seqlens (int32, built
        here, outside the timed step) mark where each sequence starts; max_seqlen is passed where the
        library's signature names it (FA4 derives it)."""
        import torch

        fn = self._varlen_func()
        cu = torch.tensor(cu_seqlens(w), dtype=torch.int32, device=inputs.q.device)
        longest = max(seq_lengths(w))
        params = inspect.signature(fn).parameters
        kw = {**self.call_kwargs, **window_size(w.window), "cu_seqlens_q": cu, "cu_seqlens_k": cu}
        kw.update({n: longest for n in ("max_seqlen_q", "max_seqlen_k") if n in params})
        q, k, v = (to_bnhd(t, w.layout) for t in (inputs.q, inputs.k, inputs.v))  # (1, T, H, D)

        def step():
            # (T, H, D): views of BNHD tensors; a BHND workload's are copied here, inside the timed step
            qp, kp, vp = (t.reshape(t.shape[1], t.shape[2], t.shape[3]) for t in (q, k, v))
            o = _out(fn(qp, kp, vp, softmax_scale=inputs.scale, causal=w.causal, **kw))
            return from_bnhd(o.view(1, *o.shape), w.layout)

        return Prepared(step=step, first_call=lambda: call_rejecting(step, self.lib), state=cu)

    def _prepare_kvcache(self, w: Workload, inputs) -> Prepared:
        """A decode cache through flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=, ...).

        Paged: the pages (num_pages, page_size, Hkv, D) as they are, the (B, pages_per_seq) int32 page
        table under the name the function's signature has (block_table in FlashAttention-2, page_table
        in FlashAttention-3). Contiguous: the (B, Nkv, Hkv, D) cache (a BHND workload's as a transposed
        view). An appending decode (workloads/append.py) passes the new token as k=, v= (B, 1, Hkv, D)
        with cache_seqlens kv_len - 1: the library writes it into the cache at that position (through
        the table when paged) and attends over cache_seqlens + 1 = kv_len keys, in one call. Otherwise
        cache_seqlens is kv_len. cache_seqlens (int32 per sequence) is built here, outside the timed
        step. A build without the function, a paged cache without either table name, or an append
        without k and v in the signature is UNSUPPORTED."""
        import torch

        fn = getattr(importlib.import_module(self.module), "flash_attn_with_kvcache", None)
        if fn is None:
            raise Rejected(f"{self.lib}: this build offers no flash_attn_with_kvcache (paged or appending KV cache)")
        params = inspect.signature(fn).parameters
        kw = dict(window_size(w.window))
        if paged(w):
            name = next((n for n in ("block_table", "page_table") if n in params), None)
            if name is None:
                raise Rejected(f"{self.lib}: flash_attn_with_kvcache takes no block_table or page_table")
            kw[name] = inputs.page_table
            k_cache, v_cache = inputs.k, inputs.v
        else:
            k_cache, v_cache = (to_bnhd(t, w.layout) for t in (inputs.k, inputs.v))
        if appending(w):
            if not {"k", "v"} <= set(params):
                raise Rejected(f"{self.lib}: this build's flash_attn_with_kvcache takes no k, v (no in-place append)")
            kw.update(k=to_bnhd(inputs.k_new, w.layout), v=to_bnhd(inputs.v_new, w.layout))
        cached = slot(w) if appending(w) else w.kv_len  # tokens in the cache before this call's append
        seqlens = torch.full((w.batch,), cached, dtype=torch.int32, device=inputs.q.device)
        kw["cache_seqlens"] = seqlens
        return self._call(fn, w, inputs, to_bnhd(inputs.q, w.layout), k_cache, v_cache, kw, seqlens)  # q (B, 1, Hq, D)

    def attend(self, q, k, v, *, causal=True, causal_align="bottom_right", scale=None, window=None):
        return flash_attend(self._func(), self.lib, q, k, v, causal, causal_align, scale, window)
