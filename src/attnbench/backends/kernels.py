"""How kernels are named: a family is a regular expression over kernel (CUDA) or operator (CPU)
names. Backends declare their library's families; the generic ones here are library-neutral."""
from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class KernelFamily:
    """How one family's kernels (CUDA) or operators (CPU) are named: a regular expression searched
    in the name. `attention`: a fused attention kernel, so one running where a backend does not
    declare it is a dispatch mismatch."""

    name: str
    pattern: str
    attention: bool = False
    ignore_case: bool = False

    def regex(self) -> re.Pattern:
        return re.compile(self.pattern, re.I if self.ignore_case else 0)


GENERIC_FAMILIES: tuple[KernelFamily, ...] = (
    KernelFamily("triton", r"^triton_|triton", ignore_case=True),
    # Inductor's own graph call ("## Call CompiledFxGraph <key> ##"), not Dynamo's "Torch-Compiled Region" range:
    # Dynamo opens that around every frame it compiled, whatever the backend, and flex_attention called without
    # torch.compile runs its unfused path through torch.compile(backend="eager"), so the region is no sign of
    # Inductor's kernels (an uncompiled flex passed for a compiled one on CPU whenever its GEMMs were < 10 %)
    KernelFamily("inductor", r"CompiledFxGraph|inductor", ignore_case=True),
    KernelFamily("unfused-gemm", r"gemm|xmma|nvjet|cublas|cutlass.*(mm|gemm)|aten::(bmm|mm|matmul|baddbmm)"
                                 r"|Kernel2|sgemm|hgemm|s\d+gemm", ignore_case=True),
)
