"""FlashAttention-3 (Hopper, `flash_attn_interface.flash_attn_func` from flash-attention's hopper/
build): (B, N, H, D) tensors, causal aligned bottom-right, backward through torch autograd."""
from __future__ import annotations

from ..workloads import Workload
from .base import CONTESTANT, Backend, DeviceInfo, Inputs, Prepared
from .kernels import KernelFamily
from .optional import bottom_right_only, call_rejecting, dist_version, flash_attend, from_bnhd, import_hint, to_bnhd

# FA3's kernels run as cutlass::device_kernel<flash::FlashAttnFwdSm90<...>> (and FlashAttnBwdSm90,
# FlashAttnFwdCombine, flash::prepare_varlen_num_blocks...); FA4's CuTe names spell "FlashAttention".
KERNELS = (KernelFamily("flash-attn3", r"FlashAttn(Fwd|Bwd)|flash::prepare_varlen", attention=True),)
HINT = ("flash_attn_interface (FlashAttention-3) is not importable: build flash-attention's hopper/ "
        "directory from source (python setup.py install there; no attnbench extra, no PyPI wheel)")


class FlashAttn3(Backend):
    def availability(self) -> str | None:
        return import_hint("flash_attn_interface", HINT, attr="flash_attn_func")

    def version(self) -> str | None:
        return dist_version("flash-attn-3", "flash_attn_interface") or dist_version("flash_attn_3")

    def extra_supports(self, w: Workload, dev: DeviceInfo) -> str | None:
        return bottom_right_only(w, "FlashAttention-3")

    def prepare(self, w: Workload, inputs: Inputs) -> Prepared:
        from flash_attn_interface import flash_attn_func

        q, k, v = (to_bnhd(t, w.layout) for t in (inputs.q, inputs.k, inputs.v))

        def step():
            o = flash_attn_func(q, k, v, softmax_scale=inputs.scale, causal=w.causal)
            return from_bnhd(o[0] if isinstance(o, tuple) else o, w.layout)  # some builds return (out, lse)

        return Prepared(step=step, first_call=lambda: call_rejecting(step, "FlashAttention-3"))


    def attend(self, q, k, v, *, causal=True, causal_align="bottom_right", scale=None, window=None):
        from flash_attn_interface import flash_attn_func

        return flash_attend(flash_attn_func, "FlashAttention-3", q, k, v, causal, causal_align, scale, window)


def make() -> list[Backend]:
    return [FlashAttn3(name="fa3", family="flash-attn", role=CONTESTANT, devices=("cuda",), dtypes=("bf16", "fp16"),
                       min_capability=(9, 0), max_head_dim=256, head_dim_multiple=8, kernel_patterns=KERNELS,
                       kernel_families={"cuda": frozenset({"flash-attn3"})},
                       description="FlashAttention-3 (Hopper build)")]
