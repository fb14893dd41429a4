"""The devices a run names: cpu, cuda, cuda:N, or several (--devices) as DeviceSpecs. ValueError with one
line for anything this host does not have."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


def default_device() -> str:
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:
        return "cpu"


def cuda_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def check_device(device: str) -> str:
    """cpu, cuda or cuda:N, which this host has."""
    if device == "cpu":
        return device
    if device == "cuda" or (device.startswith("cuda:") and device[5:].isdigit()):
        import torch

        if not torch.cuda.is_available():
            raise ValueError(f"device {device} requested but no CUDA device is visible")
        n = torch.cuda.device_count()
        if ":" in device and int(device[5:]) >= n:
            raise ValueError(f"device {device} does not exist (this host has {n} CUDA device(s))")
        return device
    raise ValueError(f"bad --device {device!r}: use cpu, cuda or cuda:N")


@dataclass(frozen=True)
class DeviceSpec:
    """One device of a multi-device run."""

    label: str  # as given: "cuda:1", or "cpu:1" (a fake device: a CPU worker set of its own, for tests)
    torch_device: str  # what its workers bind: "cuda:1" or "cpu"
    index: int


def parse_devices(text: str, cuda_count: Callable[[], int]) -> list[DeviceSpec]:
    """--devices all | 0,1,... | cuda:0,cuda:1 | cpu:0,cpu:1 (fake devices: CPU worker sets for tests
    and laptops). ValueError with one line for anything else."""
    items = [x.strip() for x in text.split(",")]
    if not text.strip() or any(not x for x in items):
        raise ValueError(f"bad --devices {text!r}: use all, a comma list of CUDA indices (0,1) or cpu:0,cpu:1")
    if items == ["all"]:
        n = cuda_count()
        if n < 1:
            raise ValueError("--devices all: no CUDA device is visible (use cpu:0,cpu:1 for fake CPU devices)")
        return [DeviceSpec(f"cuda:{i}", f"cuda:{i}", i) for i in range(n)]
    out, kinds = [], set()
    for x in items:
        kind, _, num = x.rpartition(":") if ":" in x else ("cuda", "", x)
        if kind not in ("cuda", "cpu") or not num.isdigit():
            raise ValueError(f"bad device {x!r} in --devices: use all, N, cuda:N or cpu:N")
        kinds.add(kind)
        i = int(num)
        out.append(DeviceSpec(f"{kind}:{i}", "cpu" if kind == "cpu" else f"cuda:{i}", i))
    if len(kinds) > 1:
        raise ValueError("--devices mixes CPU and CUDA devices")
    labels = [d.label for d in out]
    dup = next((x for x in labels if labels.count(x) > 1), None)
    if dup:
        raise ValueError(f"--devices names {dup} twice")
    if "cuda" in kinds:
        n = cuda_count()
        bad = next((d for d in out if d.index >= n), None)
        if bad and n == 0:
            raise ValueError(f"device {bad.label} requested but no CUDA device is visible")
        if bad:
            raise ValueError(f"device {bad.label} does not exist (this host has {n} CUDA device(s))")
    return out
