"""Which workload axes a results table shows and how, derived from the axes: a new field needs no edit."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pandas as pd

from ..workloads.axes import NAMES, axis, varying


@dataclass(frozen=True)
class WorkloadColumn:
    """One table column showing one or more workload axes of a row."""

    axes: tuple[str, ...]
    header: str = ""  # empty: the short header of its one axis
    cell: Callable[[dict], str] | None = None  # None: the text of its one axis' value
    right: bool = False  # right-justified

    def title(self) -> str:
        return self.header or axis(self.axes[0]).short

    def text(self, row) -> str:
        return self.cell(row) if self.cell else str(row[self.axes[0]])


def _mask(row) -> str:
    return f"causal-{row['causal_align']}" if row["causal"] else "none"


# Shown in every table, in this order; the alignment only means something under a causal mask and
# the head counts read best as one GQA ratio, so those pairs share a column.
ALWAYS = (
    WorkloadColumn(("mode",)),
    WorkloadColumn(("batch",), right=True),
    WorkloadColumn(("q_len",), right=True),
    WorkloadColumn(("kv_len",), right=True),
    WorkloadColumn(("q_heads", "kv_heads"), "H q/kv", lambda r: f"{r['q_heads']}/{r['kv_heads']}"),
    WorkloadColumn(("head_dim",), "D"),
    WorkloadColumn(("dtype",)),
    WorkloadColumn(("causal", "causal_align"), "mask", _mask),
    WorkloadColumn(("launch",)),
)
SHOWN_ALWAYS = frozenset(a for c in ALWAYS for a in c.axes)


def _null_as_none(rows: pd.DataFrame) -> list[dict]:
    # NaN != NaN: two missing values would otherwise count as two different values
    return rows.astype(object).where(rows.notna(), None).to_dict(orient="records")


def workload_columns(rows: pd.DataFrame) -> list[WorkloadColumn]:
    """The always-shown columns, then one column per other axis whose values differ among `rows`
    (head_dim_v, layout, l2, ... : constant ones would only repeat the same value on every line)."""
    others = [n for n in NAMES if n not in SHOWN_ALWAYS]
    present = [n for n in others if n in rows.columns]
    extra = varying(_null_as_none(rows[present]), present) if len(rows) else []
    return [*ALWAYS, *(WorkloadColumn((n,), right=axis(n).type in (int, float)) for n in extra)]
