"""Section `ladder` (issue 41): each rung of the project's own Triton FlashAttention ladder beside the best of sdpa-cudnn
and fa4 and beside sdpa-flash, measured in the same store on the same workloads, with the issue's target ratio, and
where the store holds counters (run --counters) each rung's mechanism: DRAM bytes (FA1 -> FA2), tensor and SFU pipe
(FA2 -> Hopper)."""
from __future__ import annotations

from dataclasses import asdict, dataclass

import pandas as pd

from ..winners import contestants
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
CONTEST = ["label", "device_name", "side", "workload_key"]  # one contest of the basis (sides.contest_columns)


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


def _per_line(df: pd.DataFrame) -> pd.DataFrame:
    """Per contest and backend (the lines' keys), from its OK rows: the kernel config a rung chose (the first
    recorded) and, where the store has counters, their medians over the rows that have them."""
    ok = df[df["status"] == "OK"]
    have = [c for c in ("kernel_config", *MECHANISM) if c in ok.columns]
    if not have:
        return pd.DataFrame(index=pd.MultiIndex.from_tuples([], names=[*CONTEST, "backend"]))
    agg = {c: ("first" if c == "kernel_config" else "median") for c in have}
    part = ok[[*CONTEST, "backend", *have]].copy()
    for c in have:
        part[c] = pd.to_numeric(part[c], errors="coerce") if c != "kernel_config" else part[c].map(_config)
    return part.groupby([*CONTEST, "backend"], sort=False, dropna=False).agg(agg)


def _config(v) -> str | None:
    return None if v is None or (isinstance(v, float) and pd.isna(v)) else str(v)[:200]  # NaN: none recorded


def compute(b: Basis, done: dict) -> Ladder | None:
    """None when no store holds a line of the triton family. Each backend's time is its line of the basis (analyze's
    one definition: the median of its repeat medians, analysis/frames.py per_backend), contestants only."""
    lines = contestants(b.lines) if not b.lines.empty else b.lines
    if lines.empty or not lines["backend"].astype(str).str.startswith("triton-").any():
        return None
    extra = _per_line(b.df)
    out = []
    for key, g in lines.groupby(CONTEST, sort=True, dropna=False):
        by = g.drop_duplicates("backend").set_index("backend")
        rungs = [x for x in by.index if str(x).startswith("triton-")]
        if not rungs:
            continue
        w = by.iloc[0]
        decode = w["mode"] == "decode"
        rate = ((lambda r: r["bytes"] / r["median_us"] / 1e3) if decode
                else (lambda r: r["flops"] / r["median_us"] / 1e6))
        for rung in sorted(rungs):
            r = by.loc[rung]
            if decode:
                pool = [x for x in by.index if not str(x).startswith("triton-")]
            elif rung.startswith("triton-fp8"):
                pool = [x for x in BF16_RUNGS if x in by.index]
            else:
                pool = [x for x in VENDORS if x in by.index]
            against = min(pool, key=lambda x: by.loc[x, "median_us"]) if pool else None
            ratio = float(by.loc[against, "median_us"] / r["median_us"]) if against else None
            target = TARGETS.get(("triton-fp8" if rung.startswith("triton-fp8") else rung, w["mode"]))
            e = extra.loc[(*key, rung)] if (*key, rung) in extra.index else pd.Series(dtype=object)
            reads = [_num(e.get(c)) for c in MECHANISM]
            dram = (reads[0] or 0) + (reads[1] or 0) if reads[0] is not None else None
            out.append(Rung(str(w["side"]), str(w["device_name"]), _what(w), w["mode"], rung,
                            "GB/s" if decode else "TFLOP/s", round(float(rate(r)), 1), against,
                            round(float(rate(by.loc[against])), 1) if against else None,
                            round(ratio, 3) if ratio is not None else None, target,
                            bool(ratio >= target) if target is not None and ratio is not None else None,
                            round(float(rate(by.loc["sdpa-flash"])), 1) if "sdpa-flash" in by.index else None,
                            _config(e.get("kernel_config")), round(dram / 1e9, 3) if dram is not None else None,
                            reads[2], reads[3]))
    return Ladder(out) if out else None
