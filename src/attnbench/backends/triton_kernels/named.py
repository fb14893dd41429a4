"""A kernel launch named as a CPU operator (attnbench_triton::<kernel>), so that the dispatch probe, which reads
operators by self time on CPU, sees the interpreted Triton kernel as it sees the kernel's name on CUDA."""
from __future__ import annotations

import threading

_LOCAL = threading.local()
_DEFINED: set[str] = set()
_LIB = None


def _op(name: str):
    import torch

    global _LIB
    if name not in _DEFINED:
        if _LIB is None:
            _LIB = torch.library.Library("attnbench_triton", "DEF")
        _LIB.define(f"{name}(Tensor x) -> ()")

        def impl(x):
            _LOCAL.fn()

        _LIB.impl(name, impl, "CPU")
        _DEFINED.add(name)
    return getattr(torch.ops.attnbench_triton, name)


def run(name: str, fn, like) -> None:
    """fn() (a Triton launch); on CPU inside the operator attnbench_triton::<name>. On CUDA the launch is
    direct: the kernel carries the name, and an operator's dispatch would add host time to every call."""
    if like.device.type != "cpu":
        fn()
        return
    op = _op(name)
    _LOCAL.fn = fn
    try:
        op(like.detach())
    finally:
        _LOCAL.fn = None
