"""Hardware counters of an attempt's step: the collector interface, the counter sets, each kernel's values and
their time-weighted aggregate per attempt, and the collector a process uses (docs/method/counters.md)."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

from .counters_base import (BYTES, COLLECTOR_ENV, DEFAULT_SET, METRICS, SETS, SHARES, Collector,  # noqa: F401
                            Unreadable)


@dataclass(frozen=True)
class Fake:
    """A collector that needs no GPU: known counters (`fake`), or each way reading fails."""

    name: str
    fails: str | None = None

    def collect(self, spec: dict, metric_set: str) -> list[dict]:
        if self.fails:
            raise Unreadable(self.fails)
        return [{"name": "fake_attention_kernel", "duration_ns": 900.0, "dram_read_bytes": 3.0e6,
                 "dram_write_bytes": 1.0e6, "l2_bytes": 8.0e6, "tensor_pct": 70.0, "xu_pct": 30.0,
                 "fma_pct": 20.0, "alu_pct": 10.0, "sm_pct": 72.0, "mem_pct": 40.0, "dram_pct": 35.0,
                 "warps_active_pct": 18.0, "shared_pct": 25.0, "registers": 168.0, "smem_static": 0.0,
                 "smem_dynamic": 196608.0, "sm_clock_hz": 1.755e9, "grid": "(132, 1, 1)", "block": "(384, 1, 1)"},
                {"name": "fake_reduce_kernel", "duration_ns": 100.0, "dram_read_bytes": 1.0e6,
                 "dram_write_bytes": 0.0, "l2_bytes": 1.0e6, "tensor_pct": 0.0, "xu_pct": 0.0,
                 "fma_pct": 40.0, "alu_pct": 30.0, "sm_pct": 20.0, "mem_pct": 60.0, "dram_pct": 55.0,
                 "warps_active_pct": 60.0, "shared_pct": 0.0, "registers": 32.0, "smem_static": 1024.0,
                 "smem_dynamic": 0.0, "sm_clock_hz": 1.755e9, "grid": "(64, 1, 1)", "block": "(256, 1, 1)"}]


FAKES = {
    "fake": Fake("fake"),
    "fake-not-installed": Fake("fake-not-installed", "no collector: Nsight Compute (ncu) is not installed"),
    "fake-not-permitted": Fake("fake-not-permitted", "counters not permitted: ERR_NVGPUCTRPERM (the driver lets "
                                                     "only admin processes read GPU performance counters)"),
    "fake-no-replay": Fake("fake-no-replay", "the profiler could not replay a kernel of the step"),
}


def collector_named(name: str | None = None) -> Collector:
    """The collector a name (or $ATTNBENCH_COLLECTOR, else ncu) gives."""
    name = name or os.environ.get(COLLECTOR_ENV) or "ncu"
    if name in FAKES:
        return FAKES[name]
    if name == "ncu":
        from .counters_ncu import NcuCollector

        return NcuCollector()
    raise ValueError(f"unknown counters collector {name!r}: use ncu or one of {', '.join(FAKES)}")


def aggregate(kernels: list[dict]) -> dict:
    """One attempt's values from its kernels: durations and bytes summed over the call, shares weighted by each
    kernel's duration (a share of a unit over the whole call), the launch of the longest kernel."""
    total = sum(k.get("duration_ns") or 0.0 for k in kernels)
    out: dict = {"kernel_count": len(kernels), "profiled_us": round(total / 1e3, 3) if total else None}
    for f in BYTES:
        vals = [k[f] for k in kernels if k.get(f) is not None]
        out[f] = float(sum(vals)) if vals else None
    for f in (*SHARES, "sm_clock_hz"):
        pairs = [(k[f], k.get("duration_ns") or 0.0) for k in kernels if k.get(f) is not None]
        weight = sum(w for _, w in pairs)
        out[f] = round(sum(v * w for v, w in pairs) / weight, 2) if pairs and weight > 0 else None
    clock = out.pop("sm_clock_hz")
    out["profiled_clock_mhz"] = round(clock / 1e6, 1) if clock else None
    longest = max(kernels, key=lambda k: k.get("duration_ns") or 0.0) if kernels else {}
    smem = [longest.get("smem_static"), longest.get("smem_dynamic")]
    out.update(main_kernel=longest.get("name"), registers=_int(longest.get("registers")),
               smem_per_block=int(sum(s for s in smem if s is not None)) if any(s is not None for s in smem) else None,
               grid=longest.get("grid"), block=longest.get("block"))
    return out


def _int(v):
    return int(v) if v is not None else None


def collect(spec: dict, metric_set: str = DEFAULT_SET, collector: Collector | None = None) -> dict:
    """What the counters phase stores for one attempt: the collector, the set, each kernel and their aggregate,
    and its cost in wall seconds; or, where counters cannot be read, `note` saying why in one line."""
    t0 = time.perf_counter()
    out: dict = {"counter_set": metric_set, "note": None, "kernels": None}
    try:
        collector = collector or collector_named()
        out["collector"] = collector.name
        if metric_set not in SETS:
            raise Unreadable(f"unknown counter set {metric_set!r} (sets: {', '.join(SETS)})")
        kernels = collector.collect(spec, metric_set)
        if not kernels:
            raise Unreadable("the profiler saw no kernel in the replayed step")
        out["kernels"] = kernels
        out.update(aggregate(kernels))
    except Unreadable as e:
        out["note"] = _one_line(str(e))
    except Exception as e:  # noqa: BLE001  (a collector's own failure is the row's note, never the attempt's)
        out["note"] = _one_line(f"collector failed: {type(e).__name__}: {e}")
    out.setdefault("collector", os.environ.get(COLLECTOR_ENV) or "ncu")
    out["cost_s"] = round(time.perf_counter() - t0, 3)
    return out


def _one_line(text: str, most: int = 300) -> str:
    line = " ".join(text.split())
    return line if len(line) <= most else line[: most - 1] + "…"
