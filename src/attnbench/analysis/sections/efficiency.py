"""Section `efficiency`: each winner's share of the measured ceiling, of the compute peak at its sampled clock and
of the roofline, a summary per side and mode, and the lines off the roofline (far below both ceilings while
another backend is far faster on the same workload)."""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from ..ceilings import SHARES, off_roofline, shares_frame
from ..frames import records
from ..winners import throughput
from .basis import Basis
from .correctness import number

NAME = "efficiency"


@dataclass(frozen=True)
class ModeSummary:
    """The winners of one side and mode."""

    side: str
    mode: str
    winners: int
    with_ceiling: int  # winners whose device has a measured ceiling
    metric: str  # TFLOP/s, or GB/s for decode
    median_pct_ceiling: float | None
    median_roofline_pct: float | None
    memory_bound: int  # winners left of the ridge
    median_pct_clock_peak: float | None = None  # median of the winners' pct_peak_clock (analysis/ceilings.py)


@dataclass(frozen=True)
class Efficiency:
    """`summary`: per side and mode; `rows`: per contest winner (efficiency_rows: its throughput, % of
    ceiling, shares of the clock peak and read ceiling, intensity, ridge, bound and % of roofline beside the
    contest's columns); `off_roofline`: lines far below both ceilings with their faster alternative."""

    summary: list[ModeSummary]
    rows: list[dict]
    off_roofline: list[dict] = ()
    shared: dict = None  # side -> OK rows measured while another process was on their GPU (gpu_shared)

    def to_json(self) -> dict:
        return {"summary": [asdict(s) for s in self.summary], "rows": self.rows,
                "off_roofline": list(self.off_roofline), "shared": dict(self.shared or {})}


def efficiency_rows(won: pd.DataFrame, ceilings: dict) -> list[dict]:
    """Per contest winner: throughput and % of the measured ceiling (winners.throughput), its shares of
    the compute peak at its clock and of the read ceiling (analysis/ceilings.shares_frame: the gate's stored
    pct_peak_clock and pct_read), and its
    position on the roofline of its device: arithmetic intensity = modelled FLOP ÷ modelled byte, the
    ridge = matmul FLOP/s ÷ read bytes/s (the copy's where no read was measured), `bound` memory or
    compute by which side of the ridge it is, and `roofline_pct` = achieved FLOP/s ÷ min(matmul rate, intensity × read bandwidth).
    `ceilings[(label, device_name)]` are the runs' measured ceilings (runs.provenance "ceilings")."""
    if won.empty:
        return []
    rows = won[["side", "label", "device_name", "match", "workload_key", "mode", "batch", "q_len", "kv_len",
                "q_heads", "kv_heads", "head_dim", "dtype", "causal", "launch", "backend", "median_us", "flops",
                "bytes", "host_bound", "clock_low"]
               + [c for c in ("l2", "sm_clock_mhz", "sm_clock_max_mhz", "pct_peak_clock", "pct_read")
                  if c in won.columns]]
    rows = throughput(rows, lambda r: ceilings.get((r["label"], r["device_name"])))
    rows = rows.drop(columns=[c for c in SHARES if c in rows.columns]).join(shares_frame(rows, ceilings))
    out = []
    for r in rows.to_dict(orient="records"):
        c = ceilings.get((r["label"], r["device_name"])) or {}
        peak, bw = c.get(f"matmul_tflops_{r['dtype']}"), c.get("read_gbps") or c.get("copy_gbps")
        flops, nbytes = r["flops"], r["bytes"]
        intensity = flops / nbytes if nbytes and pd.notna(nbytes) and nbytes > 0 else None
        ridge = peak * 1e12 / (bw * 1e9) if peak and bw else None
        roof = None
        if intensity is not None and peak and bw:
            achieved = flops / (r["median_us"] * 1e-6)
            roof = 100.0 * achieved / min(peak * 1e12, intensity * bw * 1e9)
        r.update(intensity=intensity, ridge=ridge, roofline_pct=roof,
                 bound=None if intensity is None or ridge is None else ("memory" if intensity < ridge else "compute"))
        out.append(r)
    return records(pd.DataFrame(out))


def summary(rows: list[dict]) -> list[ModeSummary]:
    """Per side and mode: winners with a ceiling, median % of ceiling and of the roofline."""
    if not rows:
        return []
    f = pd.DataFrame(rows)
    out = []
    for (side, mode), g in f.groupby(["side", "mode"], sort=True):
        pct = pd.to_numeric(g["pct_ceiling"], errors="coerce").dropna()
        roof = pd.to_numeric(g["roofline_pct"], errors="coerce").dropna()
        clock = pd.to_numeric(g.get("pct_peak_clock", pd.Series(dtype=float)), errors="coerce").dropna()
        out.append(ModeSummary(side, mode, int(len(g)), int(len(pct)), g["metric"].iloc[0],
                               number(pct.median() if len(pct) else np.nan),
                               number(roof.median() if len(roof) else np.nan), int((g["bound"] == "memory").sum()),
                               number(clock.median() if len(clock) else np.nan)))
    return out


def compute(b: Basis, done: dict) -> Efficiency:
    rows = efficiency_rows(b.won, b.ceilings)
    return Efficiency(summary(rows), rows, off_roofline(b.lines, b.ceilings), shared_rows(b.df))


def shared_rows(df: pd.DataFrame) -> dict:
    """Per side: OK rows measured while another process was on their GPU (gpu_shared; none: not listed)."""
    if df.empty or "gpu_shared" not in df.columns:
        return {}
    flag = pd.to_numeric(df["gpu_shared"], errors="coerce").fillna(0) > 0
    hit = df[(df["status"] == "OK") & flag]
    return {str(k): int(v) for k, v in hit.groupby("side").size().items()}
