"""The counters row (table counters): one per OK attempt whose step was replayed under a collector (`run --counters`,
`attnbench explain`), keyed by the attempt; where counters cannot be read, `note` says why and no number is kept."""
from __future__ import annotations

from .columns import ALL, DERIVED, Column, RecordError, Table, _c

COLLECTED = "counters"  # read by the collector from one profiled call of the attempt's step (measure/counters*.py)
_PCT = "% of peak sustained"
COUNTER_COLUMNS: tuple[Column, ...] = (
    _c("attempt_key", str, "the attempt these counters explain (attempts.attempt_key)", COLLECTED, required_by=ALL,
       constraint="NOT NULL UNIQUE"),
    _c("how", str, "run (run --counters, after timing) or explain (attnbench explain, later)", COLLECTED,
       required_by=ALL, constraint="NOT NULL"),
    _c("collector", str, "ncu (Nsight Compute around a replay of the step), or a fake one (tests)", COLLECTED,
       required_by=ALL, constraint="NOT NULL"),
    _c("counter_set", str, "standard or bytes (measure/counters.py SETS)", COLLECTED, required_by=ALL),
    _c("note", str, "why counters could not be read (no collector, not permitted, CPU device, a replay that failed); "
                    "NULL when they were: a row with a note holds no number", COLLECTED),
    _c("kernels", list, "JSON per profiled kernel: name, duration_ns, bytes, shares, launch (grid, block)", COLLECTED),
    _c("kernel_count", int, "kernels of one call", COLLECTED),
    _c("profiled_us", float, "device time of one call under the profiler (clocks as ncu set them)", COLLECTED),
    _c("profiled_clock_mhz", float, "SM clock under the profiler, time-weighted", COLLECTED),
    _c("dram_read_bytes", float, "DRAM bytes read by one call (caches flushed before it: ncu's default)", COLLECTED),
    _c("dram_write_bytes", float, "DRAM bytes written by one call", COLLECTED),
    _c("l2_bytes", float, "L2 bytes (lts__t_bytes) of one call", COLLECTED),
    _c("tensor_pct", float, f"tensor pipe active, {_PCT} over active cycles (wgmma and mma.sync), time-weighted",
       COLLECTED),
    _c("xu_pct", float, f"SFU (XU: exp, rcp) pipe instructions, {_PCT} over active cycles, time-weighted", COLLECTED),
    _c("fma_pct", float, f"FMA pipe active, {_PCT}, time-weighted", COLLECTED),
    _c("alu_pct", float, f"ALU pipe active, {_PCT}, time-weighted", COLLECTED),
    _c("sm_pct", float, f"SM throughput, {_PCT} over elapsed cycles, time-weighted", COLLECTED),
    _c("mem_pct", float, f"memory throughput (the busiest of DRAM, L2, L1), {_PCT}, time-weighted", COLLECTED),
    _c("dram_pct", float, f"DRAM throughput, {_PCT} over elapsed cycles, time-weighted", COLLECTED),
    _c("warps_active_pct", float, "achieved occupancy: warps active over the SM's maximum, time-weighted",
       COLLECTED),
    _c("shared_pct", float, f"shared-memory wavefronts of the L1 data pipe (wgmma operand reads included), {_PCT}, "
                            "time-weighted", COLLECTED),
    _c("main_kernel", str, "the longest kernel of the call", COLLECTED),
    _c("registers", int, "registers per thread of the longest kernel", COLLECTED),
    _c("smem_per_block", int, "shared memory per block (static + dynamic) of the longest kernel, bytes", COLLECTED),
    _c("grid", str, "grid of the longest kernel", COLLECTED),
    _c("block", str, "block of the longest kernel", COLLECTED),
    _c("cost_s", float, "wall seconds of the counters phase for this attempt (replay, profiler passes)", COLLECTED),
    _c("bound", str, "memory, tensor, sfu, shared, latency or host (measure/counters_bound.py); NULL with a note",
       DERIVED),
    _c("bound_evidence", str, "the counter values the bound was read from, in one line", DERIVED),
    _c("modelled_bytes", float, "the attempt's byte model (attempts.bytes, workloads/cost.py)", DERIVED),
    _c("bytes_ratio", float, "(DRAM read + written) / modelled bytes: above 1, re-reads the model does not count",
       DERIVED),
    _c("collected_at", str, "UTC time the counters were read", COLLECTED, required_by=ALL, constraint="NOT NULL"),
)
NUMBERS = tuple(c.name for c in COUNTER_COLUMNS if c.type in (int, float) and c.origin == COLLECTED)


class CountersError(RecordError):
    """A value no counters column declares, or a counters row that lacks what it must hold."""


COUNTERS = Table("counters", "attempt_key", COUNTER_COLUMNS, CountersError, "no counters column for {}",
                 "counters row")


def finish(values: dict) -> dict:
    """The counters row as stored: unknown names refused, the required ones checked, and a row with a note holds
    no number (a reason, never a guessed value)."""
    unknown = set(values) - set(COUNTERS.names)
    if unknown:
        raise CountersError(COUNTERS.unknown_text.format(", ".join(sorted(unknown))))
    row = {n: values.get(n) for n in COUNTERS.names}
    missing = [c.name for c in COUNTER_COLUMNS if c.required_by and row[c.name] is None]
    if missing:
        raise CountersError(f"counters row of {row.get('attempt_key')} lacks {', '.join(missing)}")
    if row["note"]:
        for n in (*NUMBERS, "kernels", "bound", "bound_evidence", "bytes_ratio", "main_kernel", "grid", "block"):
            if n != "cost_s":
                row[n] = None
    elif not row["kernels"]:
        raise CountersError(f"counters row of {row['attempt_key']} has neither kernels nor a note")
    return row
