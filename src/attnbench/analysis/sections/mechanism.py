"""Section `mechanism`: why a kernel is fast or slow, from the hardware counters of its rows (run --counters,
explain): the bound classes per backend and launch, measured over modelled bytes, and each lead explained in
counter terms where the winner and the runner-up (the contests of the basis) both have counters
(docs/method/counters.md)."""
from __future__ import annotations

from dataclasses import asdict, dataclass

import pandas as pd

from .basis import Basis

NAME = "mechanism"
# the counters a lead is explained by, with the words that name them
UNITS = (("tensor_pct", "tensor pipe"), ("xu_pct", "SFU pipe"), ("dram_pct", "DRAM throughput"),
         ("shared_pct", "shared-memory pipe"), ("warps_active_pct", "warps active"))
# a contest of the basis (sides.contest_columns, the --by value as `side`) and a backend in it: one line
LINE = ["label", "device_name", "side", "workload_key", "backend"]
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
    """A contest's winner against its runner-up (analyze's winners), where either has counters: the lead and the
    counter that differs most between them when both have, else which of them has none."""

    side: str
    workload_key: str
    workload: str  # mode B N H D dtype causal launch, short
    mode: str
    winner: str
    runner_up: str
    ratio: float  # runner-up's median over the winner's
    winner_bound: str | None  # None: the winner has no counters
    runner_up_bound: str | None
    why: str  # e.g. "tensor pipe 76 % vs 57 %", or "the winner has no counters: ..."


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
    """None when no store holds counters (sources.read joins them onto the attempts)."""
    df = b.df
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
    return Mechanism(classes, _leads(b.won, ok[ok["bound"].notna()]))


def _leads(won: pd.DataFrame, read: pd.DataFrame) -> list[Lead]:
    """Per contest with a runner-up (won: the basis' contests), its winner and runner-up with the counters of
    their lines (read: OK rows with counters; a line's counters: the median over its rows, its bound the most
    frequent); contests where neither has counters are left out."""
    if won.empty or read.empty:
        return []
    cols = ["bound", *(u for u, _ in UNITS)]
    per = read.groupby(LINE, sort=True, dropna=False).agg(
        {c: (lambda s: s.mode().iat[0] if len(s.dropna()) else None) if c == "bound" else "median" for c in cols})
    out = []
    for c in won[won["runner_up"].notna()].to_dict(orient="records"):
        at = tuple(c[k] for k in LINE[:-1])
        w, r = (per.loc[at + (name,)] if at + (name,) in per.index else None for name in (c["backend"], c["runner_up"]))
        if w is None and r is None:
            continue
        if w is not None and r is not None:
            text = why(w, r)
        else:
            text = f"the {'winner' if w is None else 'runner-up'} has no counters: no counter compares them"
        out.append(Lead(str(c["side"]), c["workload_key"], label(c), c["mode"], c["backend"], c["runner_up"],
                        round(float(c["ratio"]), 3), None if w is None else w["bound"],
                        None if r is None else r["bound"], text))
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
    that device and workload have (attempts: sources.read's, with the counters joined); unchanged when no row
    has one."""
    if best.empty or "bound" not in attempts.columns or not attempts["bound"].notna().any():
        return best
    read = attempts[(attempts["status"] == "OK") & attempts["bound"].notna()]
    modal = (read.groupby(["device_name", "workload_key", "backend"])["bound"].agg(lambda s: s.mode().iat[0])
             .rename("bound").reset_index().rename(columns={"backend": "best"}))
    return best.drop(columns="bound", errors="ignore").merge(modal, on=["device_name", "workload_key", "best"],
                                                             how="left")
