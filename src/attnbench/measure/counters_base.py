"""What every counters collector shares: the metrics it reads (Nsight Compute's names), the counter sets, the
Collector interface and the one exception that says why counters cannot be read (measure/counters.py)."""
from __future__ import annotations

from typing import Protocol

# A kernel's values, each with its Nsight Compute metric (None: read from the launch columns of ncu's CSV).
# Shares are % of the unit's peak sustained rate: pipes over the SM's active cycles, throughputs over the
# kernel's elapsed cycles, as Nsight Compute's own Speed-of-Light and pipe tables report them.
METRICS: dict[str, str] = {
    "duration_ns": "gpu__time_duration.sum",
    "dram_read_bytes": "dram__bytes_read.sum",
    "dram_write_bytes": "dram__bytes_write.sum",
    "l2_bytes": "lts__t_bytes.sum",
    # on GH100 (ncu 2025.3) the hmma pipe counts HMMA, HFMA2.MMA, HGMMA and QGMMA: mma.sync and wgmma alike (the
    # H200 probe, lab/h200_probe_counters.sh); a gmma pipe metric does not exist there
    "tensor_pct": "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "xu_pct": "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active",
    "fma_pct": "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
    "alu_pct": "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active",
    "sm_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "mem_pct": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram_pct": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "warps_active_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "shared_pct": "l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed",
    "registers": "launch__registers_per_thread",
    "smem_static": "launch__shared_mem_per_block_static",
    "smem_dynamic": "launch__shared_mem_per_block_dynamic",
    "sm_clock_hz": "sm__cycles_elapsed.avg.per_second",
}
# The sets `run --counters SET` and `explain --counters SET` name: more metrics cost more replay passes.
SETS: dict[str, tuple[str, ...]] = {
    "standard": tuple(METRICS),
    "bytes": ("duration_ns", "dram_read_bytes", "dram_write_bytes", "l2_bytes", "dram_pct"),
}
DEFAULT_SET = "standard"
SHARES = ("tensor_pct", "xu_pct", "fma_pct", "alu_pct", "sm_pct", "mem_pct", "dram_pct",
          "warps_active_pct", "shared_pct")
BYTES = ("dram_read_bytes", "dram_write_bytes", "l2_bytes")
COLLECTOR_ENV = "ATTNBENCH_COLLECTOR"  # which collector a process uses (tests: a fake one); default ncu


class Unreadable(Exception):
    """The counters of this step cannot be read; the message says why in one line (never a guessed number)."""


class Collector(Protocol):
    name: str

    def collect(self, spec: dict, metric_set: str) -> list[dict]:
        """Each kernel of one call of the attempt's step (spec: the worker's attempt message), as a dict of
        METRICS names plus name, grid and block; raises Unreadable with the reason."""
