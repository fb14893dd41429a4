"""FlexAttention compiled with torch.compile, causal rules as block masks."""
from __future__ import annotations

from contextlib import contextmanager

from ..workloads import Workload
from ..workloads.varlen import cu_seqlens, packed, tensor_dims
from .capabilities import ANY
from .base import CONTESTANT, Backend, DeviceInfo, Inputs
from .layout import append_then, causal_offset, from_bhnd, to_bhnd


class Flex(Backend):
    def availability(self) -> str | None:
        try:
            from torch.nn.attention import flex_attention  # noqa: F401
        except ImportError as e:
            return f"torch.nn.attention.flex_attention not importable: {e}"
        return None

    def extra_supports(self, w: Workload, dev: DeviceInfo) -> str | None:
        if dev.type == "cpu" and w.mode in ("train_fwd", "train_fwd_bwd"):
            return "FlexAttention has no backward on CPU (and refuses grad-requiring inputs there)"
        if w.head_dim & (w.head_dim - 1) or w.head_dim_v & (w.head_dim_v - 1):
            return "FlexAttention's kernels need power-of-two head dims"
        return None

    def prepare(self, w: Workload, inputs: Inputs):
        import torch
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        # A fresh dynamo state per attempt: recompiles of earlier shapes cannot push this
        # attempt past the recompile limit onto the eager (unfused) path.
        torch._dynamo.reset()
        q, k, v = (to_bhnd(t, w.layout) for t in (inputs.q, inputs.k, inputs.v))
        block_mask = None
        _, nq, nkv = tensor_dims(w)
        if packed(w):
            # a document mask: each token's sequence id; queries see keys of their own sequence only
            bounds = torch.tensor(cu_seqlens(w)[1:-1], device=q.device)
            doc = torch.bucketize(torch.arange(nkv, device=q.device), bounds, right=True)
            causal_, window = w.causal, w.window

            def document(b, h, qi, kj):
                keep = doc[qi] == doc[kj]
                if causal_:  # within one sequence positions are absolute: causal is kj <= qi
                    keep = keep & (kj <= qi)
                    if window:
                        keep = keep & (kj > qi - window)
                return keep

            block_mask = create_block_mask(document, None, None, nq, nkv, device=q.device)
        elif w.causal:
            off, window = causal_offset(w.q_len, w.kv_len, w.causal_align), w.window

            def causal(b, h, qi, kj):
                keep = kj <= qi + off
                return keep & (kj > qi + off - window) if window else keep

            block_mask = create_block_mask(causal, None, None, w.q_len, w.kv_len, device=q.device)
        compiled = torch.compile(flex_attention, dynamic=False)
        gqa = w.kv_heads != w.q_heads

        def attend():
            return from_bhnd(compiled(q, k, v, block_mask=block_mask, scale=inputs.scale, enable_gqa=gqa),
                             w.layout)

        return append_then(w, inputs, attend)  # an appending decode: the new token written eagerly first

    @contextmanager
    def attend_session(self):
        import torch

        torch._dynamo.reset()  # as prepare(): a cold start holds this run's compilation
        self.__dict__["_attend_state"] = {}
        try:
            yield
        finally:
            self.__dict__.pop("_attend_state", None)

    def attend(self, q, k, v, *, causal=True, causal_align="bottom_right", scale=None, window=None):
        import torch
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        state = self.__dict__.setdefault("_attend_state", {})
        if "fn" not in state:
            state["fn"] = torch.compile(flex_attention, dynamic=False)
        nq, nkv = q.shape[2], k.shape[2]
        key = (nq, nkv, causal, causal_align, window, str(q.device))
        if key not in state:  # the block mask is built once per shape, as a model with fixed shapes does
            off = causal_offset(nq, nkv, causal_align)

            def mask(b, h, qi, kj):
                keep = kj <= qi + off
                return keep & (kj > qi + off - window) if window else keep

            full = not causal or (off >= nkv - 1 and not window)  # every query sees every key
            state[key] = None if full else create_block_mask(mask, None, None, nq, nkv, device=q.device)
        return state["fn"](q, k, v, block_mask=state[key], scale=scale, enable_gqa=q.shape[1] != k.shape[1])


def make() -> list[Backend]:
    return [
        Flex(
            name="flex",
            family="flex",
            role=CONTESTANT,
            isolation="backend",
            # lengths: a document mask over the packed tokens; decode_append: the new token written eagerly
            # before the kernel (workloads/append.py)
            accepts={"lengths": ANY, "decode_append": ANY},
            kernel_families={"cuda": frozenset({"triton"}), "cpu": frozenset({"inductor"})},
            description="torch.compile(flex_attention) with a block mask for causal",
        )
    ]
