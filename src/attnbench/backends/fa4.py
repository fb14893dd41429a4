"""FlashAttention-4 (`flash-attn-4`, CuTe DSL; `flash_attn.cute.flash_attn_func`): Hopper and
Blackwell, (B, N, H, D) tensors, GQA, causal aligned bottom-right, forward and backward through
torch autograd. Kernels are compiled by the DSL on the first call of each configuration."""
from __future__ import annotations

from .base import CONTESTANT, Backend
from .kernels import KernelFamily
from .optional import FlashStyle

# CuTe DSL names a kernel after its module and class, e.g.
# kernel_cutlass_kernel_flash_attncuteflash_fwd_sm100FlashAttentionForwardSm100_object_at_...,
# newer builds prefix a readable part: flash_fwd_sm90_bf16_head_dim128_..._kernel_cutlass_kernel_....
KERNELS = (KernelFamily("flash-attn4", r"flash_attn_?cute|FlashAttention(Forward|Backward)", attention=True),)
HINT = ("flash_attn.cute (FlashAttention-4) is not importable: pip install 'attnbench[fa4]' "
        "(flash-attn-4, CuTe DSL; Hopper or Blackwell)")


class FlashAttn4(FlashStyle):
    module = "flash_attn.cute"
    lib = "FlashAttention-4"
    hint = HINT
    dists = (("flash-attn-4", None),)


def make() -> list[Backend]:
    return [FlashAttn4(name="fa4", family="flash-attn", role=CONTESTANT, devices=("cuda",), dtypes=("bf16", "fp16"),
                       min_capability=(9, 0), max_head_dim=256, head_dim_multiple=8, kernel_patterns=KERNELS,
                       supports_varlen=True,
                       # no paged path: FA4's paged-cache entry point is not mapped (not verified against
                       # the library), so page_size > 0 is refused (supports_paged stays False)
                       append_refusal="FA4's cache-append entry point is not mapped (not verified against the "
                                      "library)",
                       kernel_families={"cuda": frozenset({"flash-attn4"})},
                       description="FlashAttention-4 (flash-attn-4, CuTe DSL)")]
