"""What one timed call is, per mode: forward in a training graph, forward+backward, or inference."""
from __future__ import annotations

from typing import Any, Callable

from ..backends.base import Inputs, Prepared
from ..workloads import Workload


def make_step(w: Workload, prepared: Prepared, inputs: Inputs, first: bool = False) -> Callable[[], Any]:
    """train_fwd: forward with grad-requiring inputs (saves what backward needs);
    train_fwd_bwd: forward then dQ, dK, dV for the given dO (the backend's own backward when it
    declares one, else autograd; no accumulation into .grad);
    prefill / decode: forward under no_grad. Returns O, or (O, dQ, dK, dV).
    first=True makes the backend's first call (Prepared.first_call) instead of its step."""
    import torch

    call = (prepared.first_call or prepared.step) if first else prepared.step
    if w.mode == "train_fwd":
        return call
    if w.mode == "train_fwd_bwd":
        leaves = (inputs.q, inputs.k, inputs.v)
        backward = prepared.backward or (lambda o, do: torch.autograd.grad(o, leaves, do))

        def fwd_bwd():
            o = call()
            return (o, *backward(o, inputs.do))

        return fwd_bwd

    def infer():
        with torch.no_grad():
            return call()

    return infer
