"""Dispatch probe: which kernels actually ran (torch.profiler), mapped to kernel families."""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

# Order matters: attention families are matched before generic GEMM and Triton names.
FAMILY_PATTERNS: list[tuple[str, re.Pattern]] = [
    ("pytorch-flash-cpu", re.compile(r"_scaled_dot_product_flash_attention_for_cpu")),
    ("cudnn", re.compile(r"cudnn|fort_native_sdpa", re.I)),
    ("pytorch-flash", re.compile(r"pytorch_flash|flash_fwd|flash_bwd|_flash_attention_(forward|backward)")),
    ("cutlass-fmha", re.compile(r"fmha_cutlass|efficient_attention|attention_kernel_batched|fmha", re.I)),
    ("triton", re.compile(r"^triton_|triton", re.I)),
    ("inductor", re.compile(r"CompiledFxGraph|Torch-Compiled Region|inductor", re.I)),
    ("unfused-gemm", re.compile(r"gemm|xmma|nvjet|cublas|cutlass.*(mm|gemm)|aten::(bmm|mm|matmul|baddbmm)"
                                r"|Kernel2|sgemm|hgemm|s\d+gemm", re.I)),
]
ATTENTION_FAMILIES = frozenset({"pytorch-flash-cpu", "cudnn", "pytorch-flash", "cutlass-fmha"})


def family_of(name: str) -> str:
    for fam, pat in FAMILY_PATTERNS:
        if pat.search(name):
            return fam
    return "other"


@dataclass
class Probe:
    kernels: list[str] = field(default_factory=list)  # distinct names, most time first
    families: list[str] = field(default_factory=list)
    status: str = "unprobed"  # probed | unprobed
    error: str | None = None


def probe(step: Callable[[], Any], device: str) -> Probe:
    """Run one call under the profiler. On CUDA, device kernels are read; on CPU, operator names."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    cuda = device.startswith("cuda")
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    try:
        with profile(activities=acts) as prof:
            step()
            if cuda:
                torch.cuda.synchronize()
    except Exception as e:  # a profiler that cannot run leaves the attempt unprobed, not failed
        return Probe(status="unprobed", error=f"{type(e).__name__}: {e}")
    weight: Counter = Counter()
    for ev in prof.events():
        if not cuda:
            weight[ev.name] += 1
        elif getattr(ev, "device_type", None) == torch.autograd.DeviceType.CUDA:
            weight[ev.name] += max(int(getattr(ev, "device_time", 0) or 0), 1)
        else:  # kernels attached to the CPU op that launched them
            for k in getattr(ev, "kernels", []) or []:
                weight[k.name] += max(int(getattr(k, "duration", 0) or 0), 1)
    names = [n for n, _ in weight.most_common()]
    fams = sorted({family_of(n) for n in names} - {"other"})
    return Probe(kernels=names[:20], families=fams, status="probed")


def mismatch(expected: frozenset[str], observed: list[str]) -> str | None:
    """Why what ran is not what the backend declares, or None.

    Mismatch: none of the declared families ran, or another attention kernel family ran."""
    if not expected:
        return None
    seen = set(observed)
    if not seen & expected:
        return f"declared {sorted(expected)} but observed {sorted(seen) or ['no recognised kernel']}"
    foreign = (seen & ATTENTION_FAMILIES) - expected
    if foreign:
        return f"declared {sorted(expected)} but an undeclared attention kernel ran: {sorted(foreign)}"
    return None
