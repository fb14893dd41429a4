"""Clock-true device peaks: tensor FLOP per SM per clock by architecture and dtype, the datasheet's clock,
and the DRAM's theoretical bandwidth from NVML (what no kernel can exceed, whatever the probes measured)."""
from __future__ import annotations

# Dense tensor-core FLOP per SM per clock (an FMA counts 2), by compute capability and the dtype class a row's
# inputs allow. From the datasheets: H100/H200 SXM 989.4 bf16 TFLOP/s = 4096 x 132 SMs x 1830 MHz (fp8 twice,
# tf32 half); A100 312 = 2048 x 108 x 1410 MHz. fp32 rows are judged at the tf32 rate: a kernel may compute
# fp32 inputs on tf32 tensor cores. Architectures whose rate differs by product (sm_86/89: GeForce parts halve
# the fp32-accumulate rate) or that are unverified here (sm_100) are absent: their rows have no clock peak.
FLOP_PER_SM_CLK = {
    "8.0": {"bf16": 2048, "fp16": 2048, "fp32": 1024},
    "9.0": {"bf16": 4096, "fp16": 4096, "fp32": 2048, "fp8": 8192},
}
# The SM clock a product's datasheet figure is quoted at (name substring, MHz): the H200's and H100 SXM's
# 989 TFLOP/s is the 1830 MHz value; their boost is 1980 MHz, and under the 700 W cap long kernels run at
# 1620-1755 MHz (../shared/H200.md).
DATASHEET_CLOCK_MHZ = (("H200", 1830), ("H100 80GB HBM3", 1830), ("H100 SXM", 1830), ("H100 PCIe", 1620),
                       ("A100", 1410))


def dtype_class(dtype: str) -> str:
    """The rate class of a workload dtype (fp8_e4m3 -> fp8)."""
    return "fp8" if str(dtype).startswith("fp8") else str(dtype)


def flop_per_sm_clk(cc: str | None, dtype: str) -> int | None:
    """Dense tensor FLOP per SM per clock of `dtype` on compute capability `cc` ("9.0"), None when unknown."""
    return FLOP_PER_SM_CLK.get(str(cc), {}).get(dtype_class(dtype))


def datasheet_clock_mhz(device_name: str | None) -> int | None:
    for part, mhz in DATASHEET_CLOCK_MHZ:
        if device_name and part in device_name:
            return mhz
    return None


def peak_tflops(per_clk, sms, mhz):
    """TFLOP/s of `per_clk` FLOP per SM per clock on `sms` SMs at `mhz` (scalars or arrays alike)."""
    return per_clk * sms * mhz * 1e6 / 1e12


def tflops_at(ceilings: dict, dtype: str, mhz: float | None) -> float | None:
    """TFLOP/s of `dtype` at SM clock `mhz`: rate per SM per clock x SMs x clock (ceilings: "cc" and "sms" as
    measure/ceilings.py records them); None when any part is unknown."""
    rate, sms = flop_per_sm_clk(ceilings.get("cc"), dtype), ceilings.get("sms")
    if not rate or not sms or not mhz or mhz != mhz:  # NaN clock: not read
        return None
    return peak_tflops(rate, sms, mhz)


# A row's shares of its ceilings, as the gate stores them (runner/gates.py: pct_peak_clock, pct_read) and as
# analysis computes them for rows stored before those columns (analysis/ceilings.py): one definition for both.
# Modelled bytes smaller than L2_FACTOR x the L2 size may be served from L2 (warm), so HBM bandwidth bounds
# nothing and such a row has no read share.
L2_FACTOR = 2


def pct_peak(rate, peak_tflops_):
    """FLOP/s `rate` as % of a peak in TFLOP/s (scalars or arrays alike)."""
    return 100.0 * rate / (peak_tflops_ * 1e12)


def pct_read(nbytes, median_us, read_gbps):
    """Modelled bytes per call over the median as % of the read ceiling in GB/s (scalars or arrays alike)."""
    return 100.0 * (nbytes / (median_us * 1e-6) / 1e9) / read_gbps


def off_chip(l2_mode, nbytes, l2_bytes):
    """Whether a row's bytes cannot sit in L2 (a cold-L2 row, or more than L2_FACTOR x the L2 size): only then is
    its read share taken. No cache size known (a CPU): False, a cache-resident workload may beat DRAM bandwidth.
    Scalars (nbytes a number) or arrays alike."""
    if l2_bytes is None or l2_bytes != l2_bytes:
        return False
    return (l2_mode == "cold") | (nbytes > L2_FACTOR * l2_bytes)


def dram_peak(ceilings: dict) -> float | None:
    """NVML's DRAM bandwidth (dram_peak_gbps) where it is a ceiling: a figure below the measured read (read_gbps)
    is a misread of NVML's clock or bus width, not a ceiling (None). measure/ceilings.py drops such a figure from
    the run's ceilings and the gate (runner/gates.py) does not believe one; this is the one place the rule is."""
    dram, read = ceilings.get("dram_peak_gbps"), ceilings.get("read_gbps")
    return dram if dram and not (read and dram < read) else None


def device_peaks(device: str) -> dict:
    """What the clock peaks need of a CUDA device: compute capability, SMs, the datasheet clock and its bf16
    figure, the maximum SM clock and the DRAM's theoretical bandwidth (NVML: bus width x maximum memory
    clock x 2 transfers per clock; 3,352 GB/s on an H100 SXM, whose datasheet says 3.35 TB/s). {} on CPU."""
    if not device.startswith("cuda"):
        return {}
    import torch

    p = torch.cuda.get_device_properties(torch.device(device))
    out: dict = {"cc": f"{p.major}.{p.minor}", "sms": p.multi_processor_count}
    sheet = datasheet_clock_mhz(p.name)
    if sheet:
        out["datasheet_clock_mhz"] = sheet
        for dt in ("bf16", "fp8"):
            v = tflops_at(out, dt, sheet)
            if v:
                out[f"datasheet_tflops_{dt}"] = round(v, 1)
    try:
        import pynvml as nv

        from .nvml import handle_for

        h = handle_for(device)
        out["max_sm_clock_mhz"] = nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM)
        out["max_tflops_bf16"] = tflops_at(out, "bf16", out["max_sm_clock_mhz"])
        bus, mem = nv.nvmlDeviceGetMemoryBusWidth(h), nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_MEM)
        out["dram_peak_gbps"] = round(bus / 8 * mem * 1e6 * 2 / 1e9, 1)
    except Exception as e:  # noqa: BLE001  (no NVML: the peaks from the clock are unknown, said so)
        out["peaks_error"] = f"{type(e).__name__}: {e}"
    return out
