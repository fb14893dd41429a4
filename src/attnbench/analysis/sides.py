"""The sides a comparison is made across (--by), and which contests of two sides are the same question.

A *contest* is one store label × device model × workload (× the --by value when that is none of
these): its lines compete, its winner is the fastest. A *side* is a value of the --by column.
Contests of two sides answer the same question when their workloads match on every semantic field
(the --by axis excepted when it is a workload axis) and on the columns the comparison holds fixed:

- across stores, device models or GPUs (label, device_name, device_uuid): nothing else is held,
  since another GPU is usually another store with its own toolkit;
- across toolkits or sweep tags (torch_version, tag): the device model is held;
- across launch modes or L2 states (launch, l2): store and device model are held, the same sweep's
  eager and graph rows being the comparison.
"""
from __future__ import annotations

import pandas as pd

from ..workloads.axes import NAMES
from .frames import per_backend
from .winners import contests

BY_CHOICES = ("label", "device_name", "device_uuid", "torch_version", "launch", "l2", "tag")
UNKNOWN = "-"  # the side of rows whose --by column is NULL (e.g. no UUID recorded)
_HELD = {"label": (), "device_name": (), "device_uuid": (), "torch_version": ("device_name",),
         "tag": ("device_name",), "launch": ("label", "device_name"), "l2": ("label", "device_name")}


def held_columns(by: str) -> tuple[str, ...]:
    return _HELD[by]


def contest_columns(by: str) -> list[str]:
    return list(dict.fromkeys(["label", "device_name", by, "workload_key"]))


def with_side(df: pd.DataFrame, by: str) -> pd.DataFrame:
    """The attempts with `side`, the --by value as text (UNKNOWN where NULL); GPU UUIDs shortened to
    the shortest prefix that still tells them apart (at least "GPU-" and 8 hex digits, as
    nvidia-smi users know them), so that tables fit a terminal."""
    side = df[by].astype(object).where(df[by].notna(), UNKNOWN).astype(str)
    if by == "device_uuid":
        side = side.map(short_uuids(set(side)))
    return df.assign(side=side)


def short_uuids(uuids: set[str], least: int = 12) -> dict[str, str]:
    """Each UUID's shortest prefix of at least `least` characters that no other UUID shares."""
    out = {}
    for u in uuids:
        n = min(least, len(u))
        while n < len(u) and any(o != u and o.startswith(u[:n]) for o in uuids):
            n += 1
        out[u] = u[:n]
    return out


def match_key(frame: pd.DataFrame, by: str) -> pd.Series:
    """Per row, the text that is equal for rows of two sides answering the same question."""
    parts = [frame[c].astype(object).where(frame[c].notna(), UNKNOWN).astype(str) for c in held_columns(by)]
    if by in NAMES:  # a workload axis: every other axis must match
        other = [n for n in NAMES if n != by]
        parts.append(pd.util.hash_pandas_object(frame[other].astype(str), index=False).astype(str))
    else:
        parts.append(frame["workload_key"].astype(str))
    key = parts[0]
    for p in parts[1:]:
        key = key + "|" + p
    return key


def side_lines(df: pd.DataFrame, by: str) -> pd.DataFrame:
    """per_backend over the attempts (with_side's frame), one line per contest × backend, with `side`
    and `match`."""
    lines = per_backend(df, contest_columns(by) + ["side"])
    if lines.empty:
        return lines.assign(match=pd.Series(dtype=str))
    return lines.assign(match=match_key(lines, by))


def side_contests(lines: pd.DataFrame, by: str, include_references: bool = False) -> pd.DataFrame:
    """contests() of the lines: one row per contest with its side and match key."""
    if lines.empty:
        return pd.DataFrame()
    return contests(lines, contest_columns(by) + ["side", "match"], include_references)
