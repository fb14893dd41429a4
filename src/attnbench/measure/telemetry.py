"""NVML readings (clocks, power, temperature, throttle reasons) taken inside one attempt's timed window."""
from __future__ import annotations

import statistics

from . import nvml

# The samples ran at a lowered clock when the lowest SM clock read is more than this below the
# device's maximum: a compute-bound kernel's time scales about with the clock, so this is where the
# clock alone could move a sample as much as warm-up's tolerance (timing.WARMUP_TOLERANCE); the
# power cap seen on the H200 (1680-1755 of 1980 MHz) lies at 11-15%.
CLOCK_LOW_FRACTION = 0.05


class Telemetry:
    """Reads NVML when read() is called (timing.measure calls it between sample batches, so no
    reading falls inside a sample and no thread competes with the host's launches); summary()
    condenses the readings. On CPU, without pynvml or after any NVML error it reads nothing and
    summary() is {}; nothing raises."""

    def __init__(self, device: str):
        self.readings: list[dict] = []
        self.failed = not device.startswith("cuda")
        self._handle = None
        self._max_sm_clock_mhz = None
        if self.failed:
            return
        try:  # resolved here, before the timed window, so the first read costs no lookup
            import pynvml

            self._handle = nvml.handle_for(device)
            self._max_sm_clock_mhz = pynvml.nvmlDeviceGetMaxClockInfo(self._handle, pynvml.NVML_CLOCK_SM)
        except Exception:
            self.failed = True

    def read(self) -> None:
        if self.failed:
            return
        try:
            self.readings.append(nvml.read(self._handle))
        except Exception:
            self.failed = True

    def summary(self) -> dict:
        """Medians of clocks and power, the lowest and highest SM clock, the highest temperature, the union of
        throttle reasons, the number of readings and whether the SM clock was low; {} when NVML could not say."""
        if self.failed or not self.readings:
            return {}
        sm = [r["sm_clock_mhz"] for r in self.readings]
        reasons = 0
        for r in self.readings:
            reasons |= r["reasons"]
        return {
            "sm_clock_mhz": statistics.median(sm),
            "sm_clock_min_mhz": min(sm),
            "sm_clock_max_mhz": max(sm),  # the row's clock peak is taken at it (runner/gates.py)
            "mem_clock_mhz": statistics.median(r["mem_clock_mhz"] for r in self.readings),
            "temp_c": max(r["temp_c"] for r in self.readings),
            "power_w": statistics.median(r["power_w"] for r in self.readings),
            "throttle": nvml.throttle_names(reasons),
            "clock_samples": len(self.readings),
            "clock_low": min(sm) < self._max_sm_clock_mhz * (1 - CLOCK_LOW_FRACTION),
        }
