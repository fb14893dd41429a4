"""Section `mechanism`: why a kernel is fast or slow, from the hardware counters of its rows (run --counters,
explain): the bound classes per backend and launch, measured over modelled bytes, and each lead explained in
counter terms where the winner and the runner-up both have counters (docs/method/counters.md)."""
from __future__ import annotations

from dataclasses import asdict, dataclass

import pandas as pd

from ...store import counters as store_counters
from .basis import Basis

NAME = "mechanism"
# the counters a lead is explained by, with the words that name them
UNITS = (("tensor_pct", "tensor pipe"), ("xu_pct", "SFU pipe"), ("dram_pct", "DRAM throughput"),
         ("shared_pct", "shared-memory pipe"), ("warps_active_pct", "warps active"))
KEY = ["side", "device_name", "workload_key"]
MIN_GAP = 2.0  # points of peak: two rows closer than this on every unit differ by none of them


@dataclass(frozen=True)
class Classes:
    """One side, backend, mode and launch: its OK rows with counters by bound, and their bytes over the model."""

    side: str
    backend: str
    mode: str
    launch: str
    rows: int
    bounds: dict  # bound -> rows
    median_bytes_ratio: float | None
    unreadable: int  # rows whose counters could not be read (counters_note)
    median_cost_s: float | None  # the counters phase's wall per attempt


@dataclass(frozen=True)
class Lead:
    """A winner against its runner-up on one workload, both with counters: the lead and the counter that
    differs most between them."""

    side: str
    workload_key: str
    workload: str  # mode B N H D dtype causal launch, short
    mode: str
    winner: str
    runner_up: str
    ratio: float  # runner-up's median over the winner's
    winner_bound: str | None
    runner_up_bound: str | None
    why: str  # e.g. "tensor pipe 76 % vs 57 %"


@dataclass(frozen=True)
class Mechanism:
    classes: list[Classes]
    leads: list[Lead]

    def to_json(self) -> dict:
        return {"classes": [asdict(c) for c in self.classes], "leads": [asdict(x) for x in self.leads]}


def _med(s) -> float | None:
    v = pd.to_numeric(s, errors="coerce").dropna()
    return round(float(v.median()), 3) if len(v) else None


def compute(b: Basis, done: dict) -> Mechanism | None:
    """None when no store holds counters."""
    df = store_counters.joined(b.df, b.paths)
    if "bound" not in df.columns:
        return None
    ok = df[(df["status"] == "OK") & (df["bound"].notna() | df["counters_note"].notna())]
    if ok.empty:
        return None
    classes = []
    for (side, backend, mode, launch), g in ok.groupby(["side", "backend", "mode", "launch"], sort=True):
        read = g[g["bound"].notna()]
        classes.append(Classes(str(side), backend, mode, str(launch), int(len(read)),
                               {k: int(v) for k, v in read["bound"].value_counts().sort_index().items()},
                               _med(read["bytes_ratio"]), int(g["counters_note"].notna().sum()),
                               _med(g["counters_cost_s"])))
    return Mechanism(classes, _leads(ok[ok["bound"].notna()]))


def _leads(read: pd.DataFrame) -> list[Lead]:
    cols = ["median_us", "bound", *(u for u, _ in UNITS)]
    per = read.groupby([*KEY, "mode", "backend"], sort=True).agg(
        {c: (lambda s: s.mode().iat[0] if len(s.dropna()) else None) if c == "bound" else "median" for c in cols})
    first = read.drop_duplicates("workload_key").set_index("workload_key")
    out = []
    for (side, _, wkey, mode), g in per.reset_index().groupby([*KEY, "mode"], sort=True):
        if len(g) < 2:
            continue
        g = g.sort_values("median_us")
        w, r = g.iloc[0], g.iloc[1]
        out.append(Lead(str(side), wkey, label(first.loc[wkey]), mode, w["backend"], r["backend"],
                        round(r["median_us"] / w["median_us"], 3), w["bound"], r["bound"], why(w, r)))
    return out


def label(r) -> str:
    """A workload in one short line: mode B N H D dtype mask launch."""
    n = r["kv_len"] if r["q_len"] == r["kv_len"] or r["mode"] == "decode" else f"{r['q_len']}/{r['kv_len']}"
    mask = "causal" if r["causal"] else "full"
    return (f"{r['mode']} B{r['batch']} N{n} H{r['q_heads']}/{r['kv_heads']} D{r['head_dim']} {r['dtype']} {mask} "
            f"{r['launch']}")


def why(winner, runner_up) -> str:
    """The counter that differs most between two rows, in points of its peak: 'tensor pipe 76 % vs 57 %'."""
    gaps = [(abs(winner[u] - runner_up[u]), u, label) for u, label in UNITS
            if pd.notna(winner.get(u)) and pd.notna(runner_up.get(u))]
    if not gaps:
        return "no counter read on both"
    gap, u, label = max(gaps)
    if gap < MIN_GAP:
        return f"the counters agree within {MIN_GAP:.0f} points: the lead is in none of these units"
    return f"{label} {winner[u]:.0f} % vs {runner_up[u]:.0f} %"


def winner_bounds(best: pd.DataFrame, attempts: pd.DataFrame) -> pd.DataFrame:
    """show's winners (best_per_workload) with `bound`: the bound most of the winner's OK rows with counters on
    that device and workload have (attempts: with the counters joined, store/counters.py); unchanged when no row
    has one."""
    if best.empty or "bound" not in attempts.columns or not attempts["bound"].notna().any():
        return best
    read = attempts[(attempts["status"] == "OK") & attempts["bound"].notna()]
    modal = (read.groupby(["device_name", "workload_key", "backend"])["bound"].agg(lambda s: s.mode().iat[0])
             .rename("bound").reset_index().rename(columns={"backend": "best"}))
    return best.drop(columns="bound", errors="ignore").merge(modal, on=["device_name", "workload_key", "best"],
                                                             how="left")
