"""NVML telemetry over the timed window (measure/telemetry.py) and NVML handles by the attempt's GPU
(measure/nvml.py: handle_for), against a fake pynvml module and fake torch device properties."""
from __future__ import annotations

import sys
import time
from types import SimpleNamespace

import pytest
import torch

from attnbench.measure import nvml, timing
from attnbench.measure.telemetry import CLOCK_LOW_FRACTION, Telemetry
from attnbench.measure.timing import TimingConfig

UUIDS = {0: "11111111-aaaa", 1: "22222222-bbbb", 2: "33333333-cccc"}  # torch's index -> its GPU's UUID


class FakeNvml:
    """NVML of a host whose GPUs are known by UUID and PCI bus id; the test sets what the next
    reading reports (`now`), as the GPU would between two sample batches."""
    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 0, 2, 0

    def __init__(self, max_sm=1980):
        self.max_sm = max_sm
        self.now = dict(sm=1980, mem=3201, temp=40, mw=300_000, reasons=0)
        self.lookups: list[tuple[str, bytes]] = []
        self.uuid_fails = False
        self.fail_reads = False

    def nvmlInit(self):
        pass

    def nvmlDeviceGetHandleByUUID(self, uuid: bytes):
        self.lookups.append(("uuid", uuid))
        if self.uuid_fails:
            raise RuntimeError("NVML_ERROR_NOT_FOUND")
        return f"handle:{uuid.decode()}"

    def nvmlDeviceGetHandleByPciBusId(self, bus: bytes):
        self.lookups.append(("pci", bus))
        return f"handle:pci:{bus.decode()}"

    def _reading(self, h, key):
        assert h.startswith("handle:")
        if self.fail_reads:
            raise RuntimeError("NVML_ERROR_GPU_IS_LOST")
        return self.now[key]

    def nvmlDeviceGetClockInfo(self, h, kind):
        return self._reading(h, "sm" if kind == self.NVML_CLOCK_SM else "mem")

    def nvmlDeviceGetMaxClockInfo(self, h, kind):
        assert kind == self.NVML_CLOCK_SM
        return self.max_sm

    def nvmlDeviceGetTemperature(self, h, kind):
        return self._reading(h, "temp")

    def nvmlDeviceGetPowerUsage(self, h):
        return self._reading(h, "mw")

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return self._reading(h, "reasons")


@pytest.fixture
def gpu(monkeypatch):
    """torch sees GPUs 0..2 (its current device is 1); pynvml is the fake; no handle is cached."""
    fake = FakeNvml()
    asked = []

    def props(index):
        asked.append(index)
        return SimpleNamespace(uuid=UUIDS[index], pci_domain_id=0, pci_bus_id=0x1B + index, pci_device_id=0)

    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setattr(torch.cuda, "get_device_properties", props)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    monkeypatch.setattr(nvml, "_handles", {})
    fake.asked = asked
    return fake


def test_handle_for_finds_the_gpu_by_its_uuid_not_by_torchs_index(gpu):
    assert nvml.handle_for("cuda:2") == "handle:GPU-33333333-cccc"
    assert nvml.handle_for("cuda") == "handle:GPU-22222222-bbbb"  # torch's current device
    assert gpu.asked == [2, 1]
    assert gpu.lookups == [("uuid", b"GPU-33333333-cccc"), ("uuid", b"GPU-22222222-bbbb")]
    assert nvml.handle_for("cuda:2") == "handle:GPU-33333333-cccc"
    assert len(gpu.lookups) == 2  # cached per process


def test_handle_for_falls_back_to_the_pci_bus_id(gpu):
    gpu.uuid_fails = True
    assert nvml.handle_for("cuda:0") == "handle:pci:00000000:1B:00.0"
    assert gpu.lookups == [("uuid", b"GPU-11111111-aaaa"), ("pci", b"00000000:1B:00.0")]


def test_readings_and_device_static_are_of_the_attempts_gpu(gpu, monkeypatch):
    seen = []
    monkeypatch.setattr(gpu, "nvmlDeviceGetTemperature", lambda h, kind: seen.append(h) or 41)
    snap = nvml.read(nvml.handle_for("cuda:2"))
    assert snap == {"sm_clock_mhz": 1980, "mem_clock_mhz": 3201, "temp_c": 41, "power_w": 300.0, "reasons": 0}
    assert seen == ["handle:GPU-33333333-cccc"]
    gpu.nvmlSystemGetDriverVersion = lambda: b"550.1"
    gpu.nvmlDeviceGetPowerManagementLimit = lambda h: 700_000
    gpu.nvmlDeviceGetUUID = lambda h: h.split(":", 1)[1].encode()
    assert nvml.device_static("cuda:0") == {"driver": "550.1", "power_limit_w": 700.0, "max_sm_clock_mhz": 1980,
                                            "uuid": "GPU-11111111-aaaa"}


READINGS = [  # sm, mem, temp, mW, reasons
    (1980, 3201, 40, 300_000, 0x0),
    (1900, 3201, 45, 650_000, 0x4),  # sw_power_cap
    (1700, 3201, 52, 700_000, 0x4 | 0x20),  # and sw_thermal
    (1950, 2619, 50, 690_000, 0x0),
]


def read_all(tel: Telemetry, gpu: FakeNvml, readings) -> None:
    for sm, mem, temp, mw, reasons in readings:
        gpu.now = dict(sm=sm, mem=mem, temp=temp, mw=mw, reasons=reasons)
        tel.read()


def test_summary_condenses_readings_that_change(gpu):
    tel = Telemetry("cuda:1")
    read_all(tel, gpu, READINGS)
    assert tel.summary() == {
        "sm_clock_mhz": 1925.0,  # median of 1700, 1900, 1950, 1980
        "sm_clock_min_mhz": 1700,
        "sm_clock_max_mhz": 1980,  # the clock peak's clock (runner/gates.py clock_ceilings)
        "mem_clock_mhz": 3201,
        "temp_c": 52,  # the hottest
        "power_w": 670.0,  # median of 300, 650, 690, 700
        "throttle": "sw_power_cap,sw_thermal",  # the union, in nvml.py's order
        "clock_samples": 4,
        "clock_low": True,  # 1700 < 0.95 x 1980
    }


def test_clock_low_flips_at_five_percent_below_the_max_clock(gpu):
    gpu.max_sm = 2000
    assert CLOCK_LOW_FRACTION == 0.05
    for lowest, low in [(1900, False), (1899, True), (2000, False)]:
        tel = Telemetry("cuda:1")
        read_all(tel, gpu, [(2000, 3201, 40, 1000, 0), (lowest, 3201, 40, 1000, 0)])
        s = tel.summary()
        assert s["clock_low"] is low and s["sm_clock_min_mhz"] == lowest and s["throttle"] == "none"


def test_no_readings_on_cpu_without_nvml_or_after_an_nvml_error(gpu, monkeypatch):
    tel = Telemetry("cpu")
    tel.read()
    assert tel.summary() == {} and gpu.lookups == []  # NVML not even asked
    assert Telemetry("cuda:1").summary() == {}  # nothing read yet
    tel = Telemetry("cuda:1")
    read_all(tel, gpu, READINGS[:2])
    gpu.fail_reads = True
    tel.read()
    assert tel.summary() == {}  # any NVML error: no partial telemetry
    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` raises ImportError
    monkeypatch.setattr(nvml, "_handles", {})
    tel = Telemetry("cuda:1")
    tel.read()
    assert tel.summary() == {}


def test_telemetry_reads_before_between_and_after_sample_batches(gpu):
    tel = Telemetry("cuda:1")
    calls = []

    def step():
        time.sleep(0.0005)

    def read():
        calls.append(1)
        gpu.now = dict(gpu.now, sm=1980 - 10 * len(calls))  # the clock sinks a little at every reading
        tel.read()

    cfg = TimingConfig(warmup_s=0.0, min_samples=10, max_samples=25, max_time_s=10.0, target_rel_err=0.0)
    t = timing.measure(step, "cpu", cfg, "eager", "warm", on_batch=read)  # the host clock times, NVML reads
    assert len(t.samples_us) == 25
    s = tel.summary()
    assert s["clock_samples"] == len(calls) == 4  # batches of 10, 10, 5: before, twice between, after
    assert s["sm_clock_min_mhz"] == 1940 and s["sm_clock_mhz"] == 1955.0 and not s["clock_low"]
