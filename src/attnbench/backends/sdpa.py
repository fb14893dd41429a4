"""PyTorch scaled_dot_product_attention, one backend per kernel, each pinned so none can fall back."""
from __future__ import annotations

import warnings

from ..workloads import Workload
from ..workloads.cost import input_bytes, score_matrix_bytes
from .capabilities import ANY
from .base import ACCURACY_REFERENCE, CONTESTANT, Backend, DeviceInfo, Inputs, Prepared, Rejected
from .kernels import KernelFamily
from .layout import append_then, from_bhnd, keep_mask, sdpa_mask_args, to_bhnd

_REFUSALS = ("No viable backend", "No available kernel")

# How the kernels behind SDPA are named (CUDA kernel names; the CPU flash kernel by its operator).
KERNELS = (
    KernelFamily("pytorch-flash-cpu", r"_scaled_dot_product_flash_attention_for_cpu", attention=True),
    KernelFamily("cudnn", r"cudnn|fort_native_sdpa", attention=True, ignore_case=True),
    # PyTorch builds FlashAttention-2 in namespace pytorch_flash; a bare flash_fwd/flash_bwd is another
    # library's (flash_attn 2.x: flash::flash_fwd_*, FlashAttention-4: flash_fwd_sm90_*...).
    KernelFamily("pytorch-flash", r"pytorch_flash|_flash_attention_(forward|backward)", attention=True),
    KernelFamily("cutlass-fmha", r"fmha_cutlass|efficient_attention|attention_kernel_batched|fmha", attention=True,
                 ignore_case=True),
)


class Sdpa(Backend):
    kernel: str = "MATH"  # member name of torch.nn.attention.SDPBackend

    def extra_supports(self, w: Workload, dev: DeviceInfo) -> str | None:
        if self.kernel == "CUDNN_ATTENTION" and w.causal and w.causal_align == "bottom_right" \
                and 1 < w.q_len < w.kv_len and not w.window:
            return "bottom-right causal with q_len < kv_len has no cuDNN path through SDPA"
        return None

    def prepare(self, w: Workload, inputs: Inputs):
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel

        pinned = [getattr(SDPBackend, self.kernel)]
        q, k, v = (to_bhnd(t, w.layout) for t in (inputs.q, inputs.k, inputs.v))
        if w.window:  # no SDPA flag for a window: a boolean mask, built once here (outside the timed step)
            extra = {"attn_mask": keep_mask(w.q_len, w.kv_len, w.causal_align, q.device, w.window)}
        else:
            extra = sdpa_mask_args(w.q_len, w.kv_len, w.causal, w.causal_align)
        gqa = w.kv_heads != w.q_heads

        def attend():
            o = F.scaled_dot_product_attention(q, k, v, scale=inputs.scale, enable_gqa=gqa, **extra)
            return from_bhnd(o, w.layout)

        fn = append_then(w, inputs, attend)

        def first_call():
            # The library decides what it accepts: a refusal is UNSUPPORTED in its own words.
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    return fn()
                except RuntimeError as e:
                    if not any(r in str(e) for r in _REFUSALS):
                        raise
                    why = "; ".join(dict.fromkeys(str(c.message).split("\n")[0] for c in caught))
                    raise Rejected(f"SDPA refused {self.kernel}: {why or str(e).splitlines()[0]}") from None

        return Prepared(step=fn, first_call=first_call, context=sdpa_kernel(pinned))

    def attend_session(self):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        return sdpa_kernel([getattr(SDPBackend, self.kernel)])

    def attend(self, q, k, v, *, causal=True, causal_align="bottom_right", scale=None, window=None):
        import torch.nn.functional as F

        nq, nkv = q.shape[2], k.shape[2]
        if window and causal:  # no SDPA flag for it: a materialised mask, which only some kernels take
            extra = {"attn_mask": keep_mask(nq, nkv, causal_align, q.device, window)}
        else:
            extra = sdpa_mask_args(nq, nkv, causal, causal_align)

        def call():
            return F.scaled_dot_product_attention(q, k, v, scale=scale, enable_gqa=q.shape[1] != k.shape[1], **extra)

        try:
            return call()
        except RuntimeError as e:
            if not any(r in str(e) for r in _REFUSALS):
                raise
            with warnings.catch_warnings(record=True) as caught:  # again, for SDPA's own reasons
                warnings.simplefilter("always")
                try:
                    call()
                except RuntimeError:
                    pass
            why = "; ".join(dict.fromkeys(str(c.message).split("\n")[0] for c in caught))
            raise Rejected(f"SDPA refused {self.kernel}: {why or str(e).splitlines()[0]}") from None

    def memory_estimate(self, w: Workload) -> int:
        mask = w.q_len * w.kv_len if w.window else 0  # the window's boolean (Nq, Nkv) mask
        if self.kernel == "MATH":
            n = 6 if w.needs_grad else 3
            return input_bytes(w) * 2 + n * score_matrix_bytes(w, 4) + mask
        return super().memory_estimate(w) + mask


def make() -> list[Backend]:
    fused = dict(family="sdpa", role=CONTESTANT, kernel_patterns=KERNELS, accepts={"decode_append": ANY})
    out = [
        Sdpa(name="sdpa-math", family="sdpa", role=ACCURACY_REFERENCE, kernel_patterns=KERNELS, accepts={"decode_append": ANY},
             kernel_families={"cuda": frozenset({"unfused-gemm"}), "cpu": frozenset({"unfused-gemm"})},
             description="SDPA pinned to its math (unfused) kernel"),
        Sdpa(name="sdpa-flash", kernel_families={"cuda": frozenset({"pytorch-flash"}),
                                                 "cpu": frozenset({"pytorch-flash-cpu"})},
             dtypes=("fp32", "bf16", "fp16"), description="SDPA pinned to its FlashAttention-2 kernel", **fused),
        Sdpa(name="sdpa-efficient", devices=("cuda",), kernel_families={"cuda": frozenset({"cutlass-fmha"})},
             description="SDPA pinned to its memory-efficient (CUTLASS) kernel", **fused),
        Sdpa(name="sdpa-cudnn", devices=("cuda",), dtypes=("bf16", "fp16"), min_capability=(8, 0),
             kernel_families={"cuda": frozenset({"cudnn"})},
             description="SDPA pinned to its cuDNN kernel", **fused),
    ]
    for b, kernel in zip(out, ("MATH", "FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION")):
        b.kernel = kernel
    return out
