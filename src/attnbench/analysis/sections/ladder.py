"""Section `ladder` (issue 41): each rung of the project's own Triton FlashAttention ladder beside the best of sdpa-cudnn
and fa4 and beside sdpa-flash, measured in the same store on the same workloads, with the issue's target ratio, and
where the store holds counters (run --counters) each rung's mechanism: DRAM bytes (FA1 -> FA2), tensor and SFU pipe
(FA2 -> Hopper)."""
from __future__ import annotations

from dataclasses import asdict, dataclass

import pandas as pd

from ...store import counters as store_counters
from .basis import Basis

NAME = "ladder"
VENDORS = ("sdpa-cudnn", "fa4")
# the targets: (rung, mode) -> ratio of the best vendor's time over the rung's (decode: of the best other
# decode backend's; fp8: of the best 16-bit rung's on the same workload)
TARGETS = {("triton-hopper", "prefill"): 0.85, ("triton-fa2", "prefill"): 0.70,
           ("triton-hopper", "train_fwd_bwd"): 0.70, ("triton-fa2", "train_fwd_bwd"): 0.70,
           ("triton-decode", "decode"): 0.95, ("triton-fp8", "prefill"): 1.4}
BF16_RUNGS = ("triton-fa2", "triton-hopper", "triton-hopper-base", "triton-hopper-ws", "triton-hopper-ws-pipe")
MECHANISM = ("dram_read_bytes", "dram_write_bytes", "tensor_pct", "xu_pct")


@dataclass(frozen=True)
class Rung:
    side: str
    device: str
    workload: str  # mode dtype B H D N causal launch, short
    mode: str
    rung: str
    metric: str  # TFLOP/s, or GB/s (decode: modelled KV bytes)
    value: float
    against: str | None  # what the ratio is taken against
    against_value: float | None
    ratio: float | None  # against's median time over the rung's (> 1: the rung is faster)
    target: float | None
    met: bool | None
    sdpa_flash: float | None
    kernel_config: str | None
    dram_gb: float | None  # DRAM bytes read + written by one call (counters), GB
    tensor_pct: float | None
    xu_pct: float | None


@dataclass(frozen=True)
class Ladder:
    rungs: list[Rung]

    def to_json(self) -> list[dict]:
        return [asdict(r) for r in self.rungs]


def _what(w) -> str:
    n = f"KV{w.kv_len}" if w["mode"] == "decode" else f"N{w.q_len}"
    c = " causal" if w["causal"] and w["mode"] != "decode" else ""
    return f"{w['mode']} {w['dtype']} B{w['batch']} H{w['q_heads']}/{w['kv_heads']} D{w['head_dim']} {n}{c} {w['launch']}"


def _num(v):
    return None if v is None or pd.isna(v) else float(v)


def compute(b: Basis, done: dict) -> Ladder | None:
    """None when no store holds a row of the triton family."""
    df = b.df
    if df.empty or not df["backend"].astype(str).str.startswith("triton-").any():
        return None
    df = store_counters.joined(df, b.paths)
    ok = df[df["status"] == "OK"].copy()
    out = []
    for (side, device, key), g in ok.groupby(["side", "device_name", "workload_key"], sort=True):
        fastest = g.sort_values("median_us").drop_duplicates("backend").set_index("backend")
        rungs = [x for x in fastest.index if str(x).startswith("triton-")]
        if not rungs:
            continue
        w = fastest.iloc[0]
        decode = w["mode"] == "decode"
        size = (lambda r: r["bytes"] / r["median_us"] / 1e3) if decode else (lambda r: r["flops"] / r["median_us"] / 1e6)
        for rung in sorted(rungs):
            r = fastest.loc[rung]
            if decode:
                pool = [x for x in fastest.index if not str(x).startswith("triton-")]
            elif rung.startswith("triton-fp8"):
                pool = [x for x in BF16_RUNGS if x in fastest.index]
            else:
                pool = [x for x in VENDORS if x in fastest.index]
            against = min(pool, key=lambda x: fastest.loc[x, "median_us"]) if pool else None
            ratio = fastest.loc[against, "median_us"] / r["median_us"] if against else None
            target = TARGETS.get(("triton-fp8" if rung.startswith("triton-fp8") else rung, w["mode"]))
            reads = [_num(r.get(c)) for c in MECHANISM]
            dram = (reads[0] or 0) + (reads[1] or 0) if reads[0] is not None else None
            cfg = r.get("kernel_config")
            out.append(Rung(str(side), str(device), _what(w), w["mode"], rung, "GB/s" if decode else "TFLOP/s",
                            round(size(r), 1), against, round(size(fastest.loc[against]), 1) if against else None,
                            round(ratio, 3) if ratio is not None else None, target,
                            (ratio >= target) if target is not None and ratio is not None else None,
                            round(size(fastest.loc["sdpa-flash"]), 1) if "sdpa-flash" in fastest.index else None,
                            None if cfg is None or (isinstance(cfg, float) and pd.isna(cfg)) else str(cfg)[:200],
                            round(dram / 1e9, 3) if dram is not None else None, reads[2], reads[3]))
    return Ladder(out) if out else None
