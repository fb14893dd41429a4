"""FlashAttention-2 (`flash_attn` 2.x, `flash_attn.flash_attn_func`): (B, N, H, D) tensors, causal
aligned bottom-right, its own forward and backward through torch autograd."""
from __future__ import annotations

from .capabilities import ANY
from .base import CONTESTANT, Backend
from .kernels import KernelFamily
from .optional import FlashStyle

# flash_attn 2.x builds its kernels in namespace `flash` (FLASH_NAMESPACE); PyTorch's vendored copy
# is `pytorch_flash::` (sdpa.py's pytorch-flash), which the look-behind keeps out.
KERNELS = (KernelFamily("flash-attn2", r"(?<!\w)flash::flash_(fwd|bwd)", attention=True),)
HINT = ("flash_attn 2.x is not importable: build it from source for this torch/CUDA "
        "(pip install flash-attn --no-build-isolation; no attnbench extra: wheels follow torch builds)")


class FlashAttn2(FlashStyle):
    module = "flash_attn"
    lib = "FlashAttention-2"
    hint = HINT
    dists = (("flash-attn", "flash_attn"),)
    call_kwargs = {"dropout_p": 0.0}
    page_multiple = 256  # flash_api.cpp: "Paged KV cache block size must be divisible by 256"


def make() -> list[Backend]:
    return [FlashAttn2(name="fa2", family="flash-attn", role=CONTESTANT, devices=("cuda",), dtypes=("bf16", "fp16"),
                       min_capability=(8, 0), max_head_dim=256, head_dim_multiple=8, kernel_patterns=KERNELS,
                       # append: flash_attn_with_kvcache(k=, v=), the append inside the kernel call
                       accepts={"lengths": ANY, "page_size": ANY, "decode_append": ANY},
                       kernel_families={"cuda": frozenset({"flash-attn2"})},
                       description="FlashAttention-2 (flash_attn 2.x)")]
