"""Clocks, temperature, power and throttle reasons from NVML (nvidia-ml-py), when available."""
from __future__ import annotations

from typing import Any

_THROTTLE = {
    0x1: "gpu_idle", 0x2: "app_clock_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x10: "sync_boost",
    0x20: "sw_thermal", 0x40: "hw_thermal", 0x80: "hw_power_brake", 0x100: "display_clock",
}
_handles: dict[int, Any] = {}  # torch device index -> NVML handle of that GPU, for this process


def handle(index: int):
    """NVML's own index (all GPUs of the host, CUDA_VISIBLE_DEVICES ignored); see handle_for."""
    import pynvml

    pynvml.nvmlInit()
    return pynvml, pynvml.nvmlDeviceGetHandleByIndex(index)


def handle_for(device: str):
    """The NVML handle of the GPU torch calls `device` ("cuda": torch's current device). Torch counts
    the visible GPUs and NVML all of the host's, so the GPU is found by its UUID, or by its PCI bus
    id where the UUID lookup fails."""
    import pynvml
    import torch

    dev = torch.device(device)
    index = dev.index if dev.index is not None else torch.cuda.current_device()
    if index not in _handles:
        pynvml.nvmlInit()
        props = torch.cuda.get_device_properties(index)
        try:  # bytes: what every nvidia-ml-py version accepts
            h = pynvml.nvmlDeviceGetHandleByUUID(f"GPU-{props.uuid}".encode())
        except Exception:
            bus = "%08X:%02X:%02X.0" % (props.pci_domain_id, props.pci_bus_id, props.pci_device_id)
            h = pynvml.nvmlDeviceGetHandleByPciBusId(bus.encode())
        _handles[index] = h
    return _handles[index]


def throttle_names(reasons: int) -> str:
    """The clock-event (throttle) reasons of a bitmask, comma-joined, or "none"."""
    return ",".join(n for bit, n in _THROTTLE.items() if reasons & bit) or "none"


def read(h) -> dict:
    """One reading of a GPU's clocks (MHz), temperature (°C), power (W) and throttle-reason bitmask."""
    import pynvml as nv

    reasons = nv.nvmlDeviceGetCurrentClocksEventReasons(h) if hasattr(
        nv, "nvmlDeviceGetCurrentClocksEventReasons") else nv.nvmlDeviceGetCurrentClocksThrottleReasons(h)
    return {"sm_clock_mhz": nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
            "mem_clock_mhz": nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM),
            "temp_c": nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU),
            "power_w": nv.nvmlDeviceGetPowerUsage(h) / 1000.0, "reasons": int(reasons)}


def device_static(device: str) -> dict:
    try:
        import pynvml as nv

        h = handle_for(device)
        out = {"driver": nv.nvmlSystemGetDriverVersion(), "power_limit_w": nv.nvmlDeviceGetPowerManagementLimit(h) / 1000,
               "max_sm_clock_mhz": nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM),
               "uuid": nv.nvmlDeviceGetUUID(h)}
        return {k: (v.decode() if isinstance(v, bytes) else v) for k, v in out.items()}
    except Exception as e:
        return {"nvml_error": f"{type(e).__name__}: {e}"}
