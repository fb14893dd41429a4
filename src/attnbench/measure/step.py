"""What one timed call is, per mode: forward in a training graph, forward+backward, or inference."""
from __future__ import annotations

from typing import Any, Callable

from ..backends.base import Inputs
from ..workloads import Workload


def make_step(w: Workload, fwd: Callable[[], Any], inputs: Inputs, first: bool = False) -> Callable[[], Any]:
    """train_fwd: forward with grad-requiring inputs (saves what backward needs);
    train_fwd_bwd: forward then dQ, dK, dV for the given dO (no accumulation into .grad);
    prefill / decode: forward under no_grad. Returns O, or (O, dQ, dK, dV)."""
    import torch

    call = getattr(fwd, "first_call", fwd) if first else fwd
    if w.mode == "train_fwd":
        return call
    if w.mode == "train_fwd_bwd":
        leaves = (inputs.q, inputs.k, inputs.v)

        def fwd_bwd():
            o = call()
            return (o, *torch.autograd.grad(o, leaves, inputs.do))

        return fwd_bwd

    def infer():
        with torch.no_grad():
            return call()

    return infer
