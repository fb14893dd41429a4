"""A run's options, validated before anything is written: the device, and OptionsError for bad input."""
from __future__ import annotations


class OptionsError(ValueError):
    """Options that cannot make a run (the command line turns it into its one-line usage error, exit 2)."""


def default_device() -> str:
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:
        return "cpu"


def check_device(device: str) -> str:
    """cpu, cuda or cuda:N, which this host has."""
    if device == "cpu":
        return device
    if device == "cuda" or (device.startswith("cuda:") and device[5:].isdigit()):
        import torch

        if not torch.cuda.is_available():
            raise OptionsError(f"device {device} requested but no CUDA device is visible")
        n = torch.cuda.device_count()
        if ":" in device and int(device[5:]) >= n:
            raise OptionsError(f"device {device} does not exist (this host has {n} CUDA device(s))")
        return device
    raise OptionsError(f"bad --device {device!r}: use cpu, cuda or cuda:N")
