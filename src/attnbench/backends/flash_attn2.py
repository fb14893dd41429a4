"""FlashAttention-2 (`flash_attn` 2.x, `flash_attn.flash_attn_func`): (B, N, H, D) tensors, causal
aligned bottom-right, its own forward and backward through torch autograd."""
from __future__ import annotations

from ..workloads import Workload
from .base import CONTESTANT, Backend, DeviceInfo, Inputs, Prepared
from .kernels import KernelFamily
from .optional import bottom_right_only, call_rejecting, dist_version, flash_attend, from_bnhd, import_hint, to_bnhd

# flash_attn 2.x builds its kernels in namespace `flash` (FLASH_NAMESPACE); PyTorch's vendored copy
# is `pytorch_flash::` (sdpa.py's pytorch-flash), which the look-behind keeps out.
KERNELS = (KernelFamily("flash-attn2", r"(?<!\w)flash::flash_(fwd|bwd)", attention=True),)
HINT = ("flash_attn 2.x is not importable: build it from source for this torch/CUDA "
        "(pip install flash-attn --no-build-isolation; no attnbench extra: wheels follow torch builds)")


class FlashAttn2(Backend):
    def availability(self) -> str | None:
        return import_hint("flash_attn", HINT, attr="flash_attn_func")

    def version(self) -> str | None:
        return dist_version("flash-attn", "flash_attn")

    def extra_supports(self, w: Workload, dev: DeviceInfo) -> str | None:
        return bottom_right_only(w, "FlashAttention-2")

    def prepare(self, w: Workload, inputs: Inputs) -> Prepared:
        from flash_attn import flash_attn_func

        # (B, N, H, D) views: a BHND workload's are transposed views the library may copy (timed)
        q, k, v = (to_bnhd(t, w.layout) for t in (inputs.q, inputs.k, inputs.v))

        def step():
            o = flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=inputs.scale, causal=w.causal)
            return from_bnhd(o, w.layout)

        return Prepared(step=step, first_call=lambda: call_rejecting(step, "flash_attn 2"))


    def attend(self, q, k, v, *, causal=True, causal_align="bottom_right", scale=None, window=None):
        from flash_attn import flash_attn_func

        return flash_attend(flash_attn_func, "FlashAttention-2", q, k, v, causal, causal_align, scale, window)


def make() -> list[Backend]:
    return [FlashAttn2(name="fa2", family="flash-attn", role=CONTESTANT, devices=("cuda",), dtypes=("bf16", "fp16"),
                       min_capability=(8, 0), max_head_dim=256, head_dim_multiple=8, kernel_patterns=KERNELS,
                       kernel_families={"cuda": frozenset({"flash-attn2"})},
                       description="FlashAttention-2 (flash_attn 2.x)")]
