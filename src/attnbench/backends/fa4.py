"""FlashAttention-4 (`flash-attn-4`, CuTe DSL; `flash_attn.cute.flash_attn_func`): Hopper and
Blackwell, (B, N, H, D) tensors, GQA, causal aligned bottom-right, forward and backward through
torch autograd. Kernels are compiled by the DSL on the first call of each configuration."""
from __future__ import annotations

from ..workloads import Workload
from .base import CONTESTANT, Backend, DeviceInfo, Inputs, Prepared
from .kernels import KernelFamily
from .optional import bottom_right_only, call_rejecting, dist_version, flash_attend, from_bnhd, import_hint, to_bnhd

# CuTe DSL names a kernel after its module and class, e.g.
# kernel_cutlass_kernel_flash_attncuteflash_fwd_sm100FlashAttentionForwardSm100_object_at_...,
# newer builds prefix a readable part: flash_fwd_sm90_bf16_head_dim128_..._kernel_cutlass_kernel_....
KERNELS = (KernelFamily("flash-attn4", r"flash_attn_?cute|FlashAttention(Forward|Backward)", attention=True),)
HINT = ("flash_attn.cute (FlashAttention-4) is not importable: pip install 'attnbench[fa4]' "
        "(flash-attn-4, CuTe DSL; Hopper or Blackwell)")


class FlashAttn4(Backend):
    def availability(self) -> str | None:
        return import_hint("flash_attn.cute", HINT, attr="flash_attn_func")

    def version(self) -> str | None:
        return dist_version("flash-attn-4")

    def extra_supports(self, w: Workload, dev: DeviceInfo) -> str | None:
        return bottom_right_only(w, "FlashAttention-4")

    def prepare(self, w: Workload, inputs: Inputs) -> Prepared:
        from flash_attn.cute import flash_attn_func

        q, k, v = (to_bnhd(t, w.layout) for t in (inputs.q, inputs.k, inputs.v))

        def step():
            o = flash_attn_func(q, k, v, softmax_scale=inputs.scale, causal=w.causal)
            return from_bnhd(o[0] if isinstance(o, tuple) else o, w.layout)  # (out, lse) in 4.0 betas

        return Prepared(step=step, first_call=lambda: call_rejecting(step, "FlashAttention-4"))


    def attend(self, q, k, v, *, causal=True, causal_align="bottom_right", scale=None, window=None):
        from flash_attn.cute import flash_attn_func

        return flash_attend(flash_attn_func, "FlashAttention-4", q, k, v, causal, causal_align, scale, window)


def make() -> list[Backend]:
    return [FlashAttn4(name="fa4", family="flash-attn", role=CONTESTANT, devices=("cuda",), dtypes=("bf16", "fp16"),
                       min_capability=(9, 0), max_head_dim=256, head_dim_multiple=8, kernel_patterns=KERNELS,
                       kernel_families={"cuda": frozenset({"flash-attn4"})},
                       description="FlashAttention-4 (flash-attn-4, CuTe DSL)")]
