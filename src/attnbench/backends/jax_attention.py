"""JAX's `jax.nn.dot_product_attention(..., implementation='xla' | 'cudnn')`, on torch's tensors.

Inputs reach JAX without a copy (DLPack: `jax.dlpack.from_dlpack(tensor)`, done in the step as a
caller holding torch tensors pays it), and O returns to torch by DLPack. JAX's layout is (B, N, H, D)
("BTNH"); a BHND workload's tensors are transposed inside the jitted function. JAX's `is_causal` is
aligned top-left; bottom-right with 1 < Nq != Nkv is a boolean mask built inside the jitted function
(xla), which the cuDNN implementation does not take. JAX runs asynchronously on streams of its own:
the step ends with `block_until_ready()`, so the caller's stream (and host clock) sees finished work;
the host wait is part of every timed call, and the timing cross-check (kernel_us against the median)
shows what it costs. train_fwd_bwd is one jitted forward + vjp; a bare training forward is not
offered (O is no torch autograd node).

Dispatch: on CUDA the profiler sees XLA's kernels (fusions, cuBLAS GEMMs, Triton) or cuDNN's. On CPU
the torch profiler sees nothing of XLA's work, so jax-xla declares no CPU family (an explicit empty
set): the probe cannot hold it to one, and the correctness checks (first call, hard inputs, recheck on
new values) still guard it."""
from __future__ import annotations

import contextlib
import os
import sys

from ..workloads import Workload
from .base import CONTESTANT, Backend, DeviceInfo, Inputs, Prepared, Rejected
from .kernels import KernelFamily
from .layout import causal_offset
from .optional import call_rejecting, dist_version, import_hint

# XLA GPU kernels are named after their fusions: loop_add_fusion, input_reduce_fusion,
# gemm_fusion_dot_0, wrapped_transpose, ... (GEMMs outside fusions are cuBLAS: unfused-gemm)
KERNELS = (KernelFamily("xla", r"fusion|^wrapped_|^(loop|input)_\w+"),)
HINT = "jax is not importable: pip install 'attnbench[jax]' (jax; for CUDA jax[cuda13])"


def _jax():
    """jax, told before its first use on a GPU to take no memory ahead: torch shares the device. (It
    still opens a context on every GPU of the host, and may leave another GPU current: see _on().)"""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax
    import jax.dlpack  # noqa: F401

    return jax


def _on(device):
    """torch's current device set to `device` while tensors cross by DLPack (torch refuses to
    export a tensor of another GPU than the current one)."""
    import torch

    return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()


def mask_args(nq: int, nkv: int, causal: bool, align: str, window: int | None = None) -> dict:
    """dot_product_attention's causal arguments: is_causal (top-left), or `mask_offset` (query i sees
    keys j <= i + offset, and with `window` only j > i + offset - window: a boolean mask built inside
    the jitted function), or nothing."""
    if not causal:
        return {}
    off = causal_offset(nq, nkv, align)
    if window:
        return {"mask_offset": off, "window": window}
    if off == 0:
        return {"is_causal": True}
    if nq == 1:
        return {}  # bottom-right with one query token sees every key
    return {"mask_offset": off}


def attention_fn(jax, nq: int, nkv: int, causal: bool, align: str, scale: float, impl: str, bhnd: bool,
                 window: int | None = None):
    """The function JAX compiles: (q, k, v) in the caller's layout -> O in that layout."""
    jnp = jax.numpy
    margs = mask_args(nq, nkv, causal, align, window)
    off, win = margs.pop("mask_offset", None), margs.pop("window", None)

    def attention(q, k, v):
        if bhnd:  # (B, H, N, D) -> JAX's (B, N, H, D), inside the compiled function
            q, k, v = (jnp.swapaxes(t, 1, 2) for t in (q, k, v))
        mask = None
        if off is not None:
            i = jnp.arange(nq)[:, None]
            j = jnp.arange(nkv)[None, :]
            keep = j <= i + off
            mask = (keep & (j > i + off - win) if win else keep)[None, None]
        o = jax.nn.dot_product_attention(q, k, v, mask=mask, scale=scale, implementation=impl, **margs)
        return jnp.swapaxes(o, 1, 2) if bhnd else o

    return attention


class JaxAttention(Backend):
    implementation: str = "xla"  # xla | cudnn

    def availability(self) -> str | None:
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        return import_hint("jax.nn", HINT, attr="dot_product_attention")

    def version(self) -> str | None:
        v = dist_version("jax")
        lib = dist_version("jaxlib")
        return f"{v} (jaxlib {lib})" if v and lib and lib != v else v

    def extra_supports(self, w: Workload, dev: DeviceInfo) -> str | None:
        if w.head_dim != w.head_dim_v:
            return "jax.nn.dot_product_attention takes V of K's shape (head_dim_v == head_dim)"
        if self.implementation == "cudnn" and w.window:
            return "sliding window: a mask here, and JAX's cuDNN path takes no mask"
        if self.implementation == "cudnn" and "mask_offset" in mask_args(w.q_len, w.kv_len, w.causal, w.causal_align):
            return ("bottom-right causal with 1 < q_len < kv_len: JAX's cuDNN path takes no mask "
                    "(its is_causal is top-left)")
        return None

    def prepare(self, w: Workload, inputs: Inputs) -> Prepared:
        import torch

        jax = _jax()
        self.__dict__["_used"] = True
        attention = attention_fn(jax, w.q_len, w.kv_len, w.causal, w.causal_align, inputs.scale, self.implementation,
                                 w.layout == "BHND", w.window)
        impl = self.implementation

        def fwd_bwd(q, k, v, do):
            o, vjp = jax.vjp(attention, q, k, v)
            return (o, *vjp(do))

        train = w.mode == "train_fwd_bwd"
        fn = jax.jit(fwd_bwd if train else attention)
        to_jax = jax.dlpack.from_dlpack
        to_torch = torch.utils.dlpack.from_dlpack
        grads: list = []

        dev = inputs.q.device

        def step():
            with _on(dev):
                args = [to_jax(t.detach()) for t in (inputs.q, inputs.k, inputs.v)]
                if train:
                    args.append(to_jax(inputs.do))
                res = fn(*args)
                jax.block_until_ready(res)  # finished work for the caller's stream and clock
                if not train:
                    return to_torch(res)
                grads[:] = [to_torch(g) for g in res[1:]]
                return to_torch(res[0])

        def backward(out, d_out):
            if d_out is not inputs.do:  # the gradients were computed with inputs.do in the step
                raise ValueError(f"{self.name}: backward is computed in the step with inputs.do")
            return tuple(grads)

        return Prepared(step=step, first_call=lambda: call_rejecting(step, f"JAX ({impl})"),
                        backward=backward if train else None, state=fn)

    def attend(self, q, k, v, *, causal=True, causal_align="bottom_right", scale=None, window=None):
        import torch

        if torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)):
            raise Rejected(f"{self.name}: JAX's output is no torch autograd node (no training through attend)")
        nq, nkv = q.shape[2], k.shape[2]
        if self.implementation == "cudnn" and "mask_offset" in mask_args(nq, nkv, causal, causal_align, window):
            raise Rejected(f"{self.name}: this causal rule needs a mask, which JAX's cuDNN path does not take")
        jax = _jax()
        self.__dict__["_used"] = True
        scale = q.shape[-1] ** -0.5 if scale is None else scale
        key = (tuple(q.shape), tuple(k.shape), str(q.dtype), causal, causal_align, window, scale)
        fns = self.__dict__.setdefault("_attend_fns", {})  # compiled once per shape, as a model's jit is
        if key not in fns:
            fns[key] = jax.jit(attention_fn(jax, nq, nkv, causal, causal_align, scale, self.implementation, True,
                                            window))
        with _on(q.device):
            o = fns[key](*(jax.dlpack.from_dlpack(t.detach()) for t in (q, k, v)))
            jax.block_until_ready(o)
            return torch.utils.dlpack.from_dlpack(o)

    def release(self) -> None:
        """XLA keeps a memory pool of its own (up to 75 % of the GPU) that torch's allocator cannot
        use: after every attempt (holds_pool) the compiled functions and the client holding the pool
        are dropped; the next attempt compiles anew, as it would for its new shapes."""
        jax = sys.modules.get("jax")
        if jax is None or not self.__dict__.pop("_used", False):  # nothing of this process's JAX work to drop
            return
        self.__dict__.pop("_attend_fns", None)
        import gc

        gc.collect()  # arrays of the attempt kept alive by reference cycles would keep the client, and its pool
        jax.clear_caches()
        from jax.extend.backend import clear_backends

        clear_backends()
        gc.collect()  # the dropped client: its pool goes back to the device here


def make() -> list[Backend]:
    common = dict(family="jax", role=CONTESTANT, modes=("train_fwd_bwd", "prefill", "decode"), accepts={"launch": ()},
                  isolation="backend", holds_pool=True)
    xla = JaxAttention(name="jax-xla", devices=("cpu", "cuda"), kernel_patterns=KERNELS,
                       kernel_families={"cuda": frozenset({"xla", "unfused-gemm", "triton"}), "cpu": frozenset()},
                       description="JAX dot_product_attention, XLA", **common)
    cudnn = JaxAttention(name="jax-cudnn", devices=("cuda",), dtypes=("bf16", "fp16"), min_capability=(8, 0),
                         max_head_dim=256, kernel_families={"cuda": frozenset({"cudnn"})},
                         # XLA's transposes between this project's layouts and JAX's BTNH
                         side_families={"cuda": frozenset({"xla"})},
                         description="JAX dot_product_attention, cuDNN", **common)
    cudnn.implementation = "cudnn"
    return [xla, cudnn]
