"""FlashAttention-4 (`flash-attn-4`, CuTe DSL; `flash_attn.cute.flash_attn_func`): Hopper and
Blackwell, (B, N, H, D) tensors, GQA, causal aligned bottom-right, forward and backward through
torch autograd. Kernels are compiled by the DSL on the first call of each configuration."""
from __future__ import annotations

import inspect

from ..workloads import Workload
from .capabilities import ANY
from .base import CONTESTANT, Backend, Prepared, Rejected
from .kernels import KernelFamily
from .optional import FlashStyle, to_bnhd, window_size

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

    def _prepare_kvcache(self, w: Workload, inputs) -> Prepared:
        """A paged decode cache (FA4 refuses appending) through flash_attn_varlen_func, its paged entry: q as
        (B, 1, Hq, D) (no cu_seqlens_q), the pages (num_pages, page_size, Hkv, D) as they are, the
        (B, pages_per_seq) int32 page_table and seqused_k (int32, kv_len for every sequence, built
        here, outside the timed step). The slack of each last page holds finite values, as the
        library asks of rows past seqused_k. A build without page_table is UNSUPPORTED."""
        import torch

        fn = self._varlen_func()
        if "page_table" not in inspect.signature(fn).parameters:
            raise Rejected(f"{self.lib}: flash_attn_varlen_func takes no page_table (paged KV cache)")
        used = torch.full((w.batch,), w.kv_len, dtype=torch.int32, device=inputs.q.device)
        kw = {**window_size(w.window), "page_table": inputs.page_table, "seqused_k": used}
        return self._call(fn, w, inputs, to_bnhd(inputs.q, w.layout), inputs.k, inputs.v, kw, used)  # q (B, 1, Hq, D)


def make() -> list[Backend]:
    return [FlashAttn4(name="fa4", family="flash-attn", role=CONTESTANT, devices=("cuda",), dtypes=("bf16", "fp16"),
                       min_capability=(9, 0), max_head_dim=256, head_dim_multiple=8, kernel_patterns=KERNELS,
                       accepts={"lengths": ANY, "page_size": ANY},  # paged: flash_attn_varlen_func(page_table=)
                       refusals={"decode_append": "FA4 offers no cache-append entry point (4.0.0b36 has no "
                                                  "flash_attn_with_kvcache)"},
                       kernel_families={"cuda": frozenset({"flash-attn4"})},
                       description="FlashAttention-4 (flash-attn-4, CuTe DSL)")]
