"""Section `host_pace`: whether the stores' hosts issue eager ops at paces far enough apart to matter."""
from __future__ import annotations

from dataclasses import asdict, dataclass

import pandas as pd

from .basis import Basis

NAME = "host_pace"
HOST_PACE_SPREAD = 1.1  # runs whose hosts issue eager ops this much apart: host-bound eager rows compare hosts


@dataclass(frozen=True)
class HostPace:
    """The spread of the hosts' eager-op paces, and the host-bound eager OK rows, whose times are the host's
    as much as the device's (methodology 4.7)."""

    spread: float  # max over min pace
    min_us: float
    max_us: float
    host_bound_rows: int

    def to_json(self) -> dict:
        return asdict(self)


def compute(b: Basis, done: dict) -> HostPace | None:
    """None unless the runs' hosts issue eager ops more than HOST_PACE_SPREAD apart."""
    paces = [p for s in done["sources"].rows if s.host_op_us for p in s.host_op_us]
    if len(paces) < 2 or max(paces) < HOST_PACE_SPREAD * min(paces):
        return None
    df = b.df
    hb = pd.to_numeric(df.get("host_bound", pd.Series(dtype=float)), errors="coerce").fillna(0).astype(bool)
    rows = int(((df["status"] == "OK") & hb).sum())
    return HostPace(spread=max(paces) / min(paces), min_us=min(paces), max_us=max(paces), host_bound_rows=rows)
