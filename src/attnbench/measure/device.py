"""The attempt's device as the process's current CUDA device: events, synchronisation, graph
capture, the device-side delay, the profiler and memory statistics without an explicit device
then act on the GPU that runs the work, not on GPU 0."""
from __future__ import annotations


def bind(device: str) -> None:
    """Make `device` ("cuda:N"; "cuda" is torch's current one) this process's current device."""
    if not device.startswith("cuda"):
        return
    import torch

    dev = torch.device(device)
    if dev.index is not None and torch.cuda.current_device() != dev.index:
        torch.cuda.set_device(dev)


def sync(device: str) -> None:
    """Wait for the device's work (nothing to wait for on CPU: its kernels are synchronous)."""
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()
