"""FlashAttention-3 (Hopper, `flash_attn_interface.flash_attn_func` from flash-attention's hopper/
build): (B, N, H, D) tensors, causal aligned bottom-right, backward through torch autograd."""
from __future__ import annotations

from .capabilities import ANY
from .base import CONTESTANT, Backend
from .kernels import KernelFamily
from .optional import FlashStyle

# FA3's kernels run as cutlass::device_kernel<flash::FlashAttnFwdSm90<...>> (and FlashAttnBwdSm90,
# FlashAttnFwdCombine, flash::prepare_varlen_num_blocks...); FA4's CuTe names spell "FlashAttention".
KERNELS = (KernelFamily("flash-attn3", r"FlashAttn(Fwd|Bwd)|flash::prepare_varlen", attention=True),)
HINT = ("flash_attn_interface (FlashAttention-3) is not importable: build flash-attention's hopper/ "
        "directory from source (python setup.py install there; no attnbench extra, no PyPI wheel)")


class FlashAttn3(FlashStyle):
    module = "flash_attn_interface"
    lib = "FlashAttention-3"
    hint = HINT
    dists = (("flash-attn-3", "flash_attn_interface"), ("flash_attn_3", None))


def make() -> list[Backend]:
    return [FlashAttn3(name="fa3", family="flash-attn", role=CONTESTANT, devices=("cuda",), dtypes=("bf16", "fp16"),
                       min_capability=(9, 0), max_head_dim=256, head_dim_multiple=8, kernel_patterns=KERNELS,
                       # append: flash_attn_with_kvcache(k=, v=), the append inside the kernel call
                       accepts={"lengths": ANY, "page_size": ANY, "decode_append": ANY},
                       kernel_families={"cuda": frozenset({"flash-attn3"})},
                       description="FlashAttention-3 (Hopper build)")]
