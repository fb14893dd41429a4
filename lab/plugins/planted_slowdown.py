"""A planted slowdown for compare's gate on a real GPU: `planted-flash` is SDPA's FlashAttention-2 kernel that,
when ATTNBENCH_PLANT=F (0 < F < 1) is set, also attends over about F of the KV heads (with their query heads)
and discards that result: the same kernel family, the same output, about F more device work per step.
Load with --plugin lab/plugins/planted_slowdown.py; lab/h200_gate_rerun.sh uses it."""
from __future__ import annotations

import dataclasses
import os

from attnbench.backends.capabilities import ANY
from attnbench.backends.layout import to_bhnd
from attnbench.backends.sdpa import KERNELS, Sdpa


class PlantedFlash(Sdpa):
    def prepare(self, w, inputs):
        import torch.nn.functional as F

        prepared = super().prepare(w, inputs)
        share = float(os.environ.get("ATTNBENCH_PLANT", "0") or 0)
        if share <= 0:
            return prepared
        kv_sub = max(1, round(share * w.kv_heads))
        q_sub = kv_sub * (w.q_heads // w.kv_heads)
        q, k, v = (to_bhnd(t, w.layout) for t in (inputs.q, inputs.k, inputs.v))
        q, k, v = q[:, :q_sub], k[:, :kv_sub], v[:, :kv_sub]
        causal = w.causal and w.q_len == w.kv_len  # the extra work's shape, not its meaning, matters here
        step = prepared.step

        def slower():
            F.scaled_dot_product_attention(q, k, v, scale=inputs.scale, is_causal=causal,
                                           enable_gqa=q_sub != kv_sub)
            return step()

        return dataclasses.replace(prepared, step=slower)


def _make() -> PlantedFlash:
    b = PlantedFlash(name="planted-flash", family="sdpa", kernel_patterns=KERNELS, accepts={"decode_append": ANY},
                     kernel_families={"cuda": frozenset({"pytorch-flash"}), "cpu": frozenset({"pytorch-flash-cpu"})},
                     dtypes=("fp32", "bf16", "fp16"),
                     description="sdpa-flash, plus ATTNBENCH_PLANT of its work again (a planted slowdown)")
    b.kernel = "FLASH_ATTENTION"
    return b


BACKENDS = [_make()]
