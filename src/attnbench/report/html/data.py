"""What the site shows, computed once by the analysis modules, and the slices its figures and tables cut
from it: every figure holds one slice, the lines sharing store, device and every workload axis but batch
and lengths."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ...analysis.analyze import Analysis
from ...analysis.sides import contest_columns
from ...analysis.slices import cell_status, flags_recorded, line_memory, speedups
from ...analysis.winners import throughput
from ...store.sources import Dataset
from ...workloads.axes import NAMES
from .figures import NOT_MEASURED, backend_colors

BY = "label"  # one side per store
CELL = ["batch", "kv_len"]  # the cell of a slice: the rest of the workload is the slice
SLICE_AXES = [n for n in NAMES if n not in ("batch", "q_len", "kv_len")]
SLICE_KEY = ["label", "device_name", *SLICE_AXES, "square"]
MODE_ORDER = {"prefill": 0, "train_fwd": 1, "train_fwd_bwd": 2, "decode": 3}
PREFERRED_BASELINE = "sdpa-flash"


@dataclass
class SiteData:
    """The stores (a store.sources.Dataset), the analysis computed from them once (by label, without
    references), and the frames the figures cut their slices from."""

    dataset: Dataset
    analysis: Analysis  # every section of `analyze`: the pages render these, they do not recompute them
    baseline: str | None  # the backend speedups divide by; None: model rows only
    by_analysis: Analysis | None = None  # the analysis by `report --by` (another side than the store); None: by store
    lines: pd.DataFrame = field(init=False)  # per store × device × workload × backend, with throughput and memory
    won: pd.DataFrame = field(init=False)  # one row per contest: its fastest contestant
    blanks: pd.DataFrame = field(init=False)  # store × device × workload × backend with no OK row: its status
    workloads: pd.DataFrame = field(init=False)  # every workload attempted per store and device, with its axes
    colors: dict = field(init=False)
    flags: dict = field(init=False)  # label -> OK rows that recorded host_bound / clock_low

    def __post_init__(self):
        group = contest_columns(BY)
        basis = self.analysis.basis
        self.won = basis.won
        lines = throughput(basis.lines, lambda r: self.ceilings.get((r["label"], r["device_name"])))
        mem = line_memory(self.df, group)
        self.lines = lines.merge(mem, on=[*group, "backend"], how="left").assign(
            peak_mem_mib=lambda f: f["peak_mem_bytes"] / 2 ** 20)
        self.blanks = cell_status(self.df, group)
        self.workloads = _square(self.df.drop_duplicates(group)[[*group, *NAMES]].reset_index(drop=True))
        self.colors = backend_colors(self.df["backend"].dropna().astype(str))
        self.flags = {label: flags_recorded(g) for label, g in self.df.groupby("label", sort=False)}

    @property
    def portability(self) -> Analysis:
        """What the portability page compares: the sides of `report --by` (default: one per store)."""
        return self.by_analysis if self.by_analysis is not None else self.analysis

    @property
    def df(self) -> pd.DataFrame:
        return self.dataset.attempts

    @property
    def runs(self) -> dict[str, list[dict]]:
        return self.dataset.runs

    @property
    def paths(self) -> dict[str, Path]:
        return self.dataset.paths

    @property
    def models(self) -> pd.DataFrame:
        return self.dataset.models

    @property
    def ceilings(self) -> dict:
        """(label, device) -> measured ceilings"""
        return self.analysis.basis.ceilings

    @property
    def labels(self) -> list[str]:
        return list(self.runs)


def _square(frame: pd.DataFrame) -> pd.DataFrame:
    # prefill-like slices plot against one length: say whether Nq = Nkv holds for each workload
    return frame.assign(square=frame["q_len"] == frame["kv_len"])


def default_baseline(df: pd.DataFrame) -> str | None:
    """sdpa-flash where it has an OK row, else the backend with the most OK rows (ties: first by name)."""
    ok = df.loc[df["status"] == "OK", "backend"].astype(str)
    if PREFERRED_BASELINE in set(ok):
        return PREFERRED_BASELINE
    counts = ok.value_counts()
    return sorted(counts[counts == counts.max()].index)[0] if len(counts) else None


def slices(data: SiteData, modes: tuple[str, ...]) -> list[tuple[dict, pd.DataFrame]]:
    """(slice key, its workloads) for every slice of these modes, in mode order then by axes."""
    w = data.workloads[data.workloads["mode"].isin(modes)]
    out = []
    for key, g in w.groupby(SLICE_KEY, sort=True, dropna=False):
        out.append((dict(zip(SLICE_KEY, key)), g))
    return sorted(out, key=lambda kg: (data.labels.index(kg[0]["label"]), kg[0]["device_name"],
                                       MODE_ORDER.get(kg[0]["mode"], 9), -int(bool(kg[0]["causal"]))))


def in_slice(frame: pd.DataFrame, key: dict) -> pd.DataFrame:
    """The rows of `frame` (lines, winners) that belong to the slice `key`."""
    mask = pd.Series(True, index=frame.index)
    for k, v in key.items():
        col = frame["q_len"] == frame["kv_len"] if k == "square" else frame[k]
        mask &= col.astype(object).eq(v) if not pd.isna(v) else col.isna()
    return frame[mask]


def slice_text(key: dict) -> str:
    """Every field that is fixed in a slice, as one line of text."""
    mask = f"causal ({key['causal_align']})" if key["causal"] else "no mask"
    lengths = "decode: Nq = 1" if key["mode"] == "decode" else ("Nq = Nkv" if key["square"] else "Nq ≠ Nkv")
    return (f"store {key['label']}, {key['device_name']}; {key['mode']}, {mask}, {key['dtype']} "
            f"(accumulation {key['accum']}), Hq = {key['q_heads']}, Hkv = {key['kv_heads']}, D = {key['head_dim']}, "
            f"Dv = {key['head_dim_v']}, dropout {key['dropout']:g}, {key['layout']}, launch {key['launch']}, "
            f"L2 {key['l2']}, {lengths}; batch × length as plotted")


def cells(workloads: pd.DataFrame) -> list[tuple[int, int]]:
    """The batch × length grid of a slice: every combination of the batches and lengths it holds."""
    return [(b, n) for b in sorted(workloads["batch"].unique()) for n in sorted(workloads["kv_len"].unique())]


def _blank_status(data: SiteData, key: dict, wl: pd.DataFrame) -> dict[str, dict[tuple, tuple[str, str]]]:
    """backend -> (batch, length) -> (status, reason) of its cells without an OK line in the slice (the
    slice's blanks cut once, not once per backend)."""
    b = data.blanks[(data.blanks["label"] == key["label"]) & (data.blanks["device_name"] == key["device_name"])]
    b = b.merge(wl[["workload_key", *CELL]], on="workload_key")
    out: dict = {}
    for r in b.itertuples(index=False):
        out.setdefault(r.backend, {})[(r.batch, r.kv_len)] = (r.status, r.reason or r.status)
    return out


def speedup_frame(data: SiteData, key: dict, wl: pd.DataFrame) -> pd.DataFrame:
    """Per backend and cell of the slice: speedup over the baseline, or why the cell is blank (the backend's
    own status, NO BASELINE when the baseline has no OK line there, NOT MEASURED outside the store's grid)."""
    lines = speedups(in_slice(data.lines, key), data.baseline, contest_columns(BY))
    measured = {(r.batch, r.kv_len) for r in wl.itertuples(index=False)}
    out, blanks = [], _blank_status(data, key, wl)
    have_of: dict = {}
    for r in lines.itertuples(index=False):
        have_of.setdefault(r.backend, {})[(r.batch, r.kv_len)] = r.speedup
    for backend in sorted(set(lines["backend"]) | set(_attempted(data, key, wl))):
        have, blank = have_of.get(backend, {}), blanks.get(backend, {})
        for c in cells(wl):
            speedup, status = None, NOT_MEASURED
            if c in measured and c in have:
                speedup, status = (None, "NO BASELINE") if pd.isna(have[c]) else (have[c], "")
            elif c in measured:
                status = blank.get(c, (NOT_MEASURED, ""))[0]
            out.append({"backend": backend, "batch": c[0], "kv_len": c[1], "speedup": speedup, "status": status})
    return pd.DataFrame(out, columns=["backend", "batch", "kv_len", "speedup", "status"])


def _attempted(data: SiteData, key: dict, wl: pd.DataFrame) -> list[str]:
    d = data.df[(data.df["label"] == key["label"]) & data.df["workload_key"].isin(wl["workload_key"])]
    return sorted(d["backend"].dropna().astype(str).unique())


def fastest_frame(data: SiteData, key: dict, wl: pd.DataFrame) -> pd.DataFrame:
    """Per cell of the slice: the fastest contestant, its time, separated, noisy; or why there is none."""
    won = in_slice(data.won, key)
    by_cell = {(r.batch, r.kv_len): r for r in won.itertuples(index=False)}
    measured = {(r.batch, r.kv_len) for r in wl.itertuples(index=False)}
    out = []
    for c in cells(wl):
        r = by_cell.get(c)
        status = "" if r is not None else ("NO OK CONTESTANT" if c in measured else NOT_MEASURED)
        out.append({"batch": c[0], "kv_len": c[1], "best": r.backend if r is not None else None,
                    "median_us": r.median_us if r is not None else None,
                    "runner_up": r.runner_up if r is not None else None,
                    "ratio": r.ratio if r is not None else None,
                    "separated": bool(r.separated) if r is not None else False,
                    "noisy": isinstance(r.noise, str) if r is not None else False, "status": status})
    return pd.DataFrame(out)
