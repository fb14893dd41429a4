"""Clocks, temperature, power and throttle reasons from NVML (nvidia-ml-py), when available."""
from __future__ import annotations

_THROTTLE = {
    0x1: "gpu_idle", 0x2: "app_clock_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x10: "sync_boost",
    0x20: "sw_thermal", 0x40: "hw_thermal", 0x80: "hw_power_brake", 0x100: "display_clock",
}


def handle(index: int):
    import pynvml

    pynvml.nvmlInit()
    return pynvml, pynvml.nvmlDeviceGetHandleByIndex(index)


def snapshot(device: str) -> dict:
    """Per-attempt conditions; empty on CPU or without NVML."""
    if not device.startswith("cuda"):
        return {}
    try:
        import torch

        index = torch.device(device).index or 0
        nv, h = handle(index)
        reasons = nv.nvmlDeviceGetCurrentClocksEventReasons(h) if hasattr(
            nv, "nvmlDeviceGetCurrentClocksEventReasons") else nv.nvmlDeviceGetCurrentClocksThrottleReasons(h)
        return {
            "sm_clock_mhz": nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
            "mem_clock_mhz": nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM),
            "temp_c": nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU),
            "power_w": nv.nvmlDeviceGetPowerUsage(h) / 1000.0,
            "throttle": ",".join(n for bit, n in _THROTTLE.items() if reasons & bit) or "none",
        }
    except Exception:
        return {}


def device_static(index: int) -> dict:
    try:
        nv, h = handle(index)
        out = {"driver": nv.nvmlSystemGetDriverVersion(), "power_limit_w": nv.nvmlDeviceGetPowerManagementLimit(h) / 1000,
               "max_sm_clock_mhz": nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM),
               "uuid": nv.nvmlDeviceGetUUID(h)}
        return {k: (v.decode() if isinstance(v, bytes) else v) for k, v in out.items()}
    except Exception as e:
        return {"nvml_error": f"{type(e).__name__}: {e}"}
