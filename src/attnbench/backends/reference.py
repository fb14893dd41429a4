"""Unfused PyTorch attention: the accuracy reference, runnable on any device and dtype."""
from __future__ import annotations

from ..workloads import Workload
from ..workloads.cost import input_bytes, score_matrix_bytes
from ..workloads.varlen import packed, seq_lengths
from .capabilities import ANY
from .base import ACCURACY_REFERENCE, Backend, Inputs
from .layout import append_then, dense_kv, from_bhnd, keep_mask, to_bhnd


def attention_math(q, k, v, causal: bool, align: str, scale: float, window: int | None = None,
                   lengths=None):
    """Plain softmax(QK^T·scale)V on (B, H, N, D) tensors in their own dtype; GQA by expansion;
    `window`: a causal sliding window (layout.keep_mask); `lengths`: a packed batch, the sequences'
    token counts along N, each sequence computed on its own (its queries see only its keys)."""
    import torch

    if lengths is not None and len(lengths) > 0:
        outs, start = [], 0
        for n in lengths:
            end = start + n
            outs.append(attention_math(q[:, :, start:end], k[:, :, start:end], v[:, :, start:end], causal, align,
                                       scale, window))
            start = end
        return torch.cat(outs, dim=2)

    group = q.shape[1] // k.shape[1]
    if group > 1:
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
    s = torch.matmul(q, k.transpose(-1, -2)) * scale  # (B, H, Nq, Nkv)
    if causal:
        s = s.masked_fill(~keep_mask(q.shape[2], k.shape[2], align, q.device, window), float("-inf"))
    p = torch.softmax(s, dim=-1)
    return torch.matmul(p, v)  # (B, H, Nq, Dv)


class Reference(Backend):
    def prepare(self, w: Workload, inputs: Inputs):
        lengths = seq_lengths(w) if packed(w) else None

        def attend():
            # a paged cache is gathered back into a contiguous one on every call (the reference is no contestant)
            q, k, v = (to_bhnd(t, w.layout) for t in (inputs.q, *dense_kv(w, inputs)))
            return from_bhnd(attention_math(q, k, v, w.causal, w.causal_align, inputs.scale, w.window, lengths),
                             w.layout)

        return append_then(w, inputs, attend)

    def attend(self, q, k, v, *, causal=True, causal_align="bottom_right", scale=None, window=None):
        scale = q.shape[-1] ** -0.5 if scale is None else scale
        return attention_math(q, k, v, causal, causal_align, scale, window)

    def memory_estimate(self, w: Workload) -> int:
        # scores, probabilities (and their grads) are materialised: (B, Hq, Nq, Nkv) each
        n = 6 if w.needs_grad else 3
        return input_bytes(w) * 2 + n * score_matrix_bytes(w, 4)


def make() -> list[Backend]:
    return [
        Reference(
            name="reference",
            family="reference",
            role=ACCURACY_REFERENCE,
            # the accuracy reference: one sequence at a time (not a packed kernel), the pages gathered into
            # a contiguous cache (not a paged kernel), the new token written with torch ops
            accepts={"lengths": ANY, "page_size": ANY, "decode_append": ANY},
            kernel_families={"cuda": frozenset({"unfused-gemm"}), "cpu": frozenset({"unfused-gemm"})},
            description="unfused PyTorch matmul-softmax-matmul in the workload dtype",
        )
    ]
