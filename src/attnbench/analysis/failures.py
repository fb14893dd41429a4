"""The attempts that did not end OK, grouped by status and reason (the numbers in a reason aside)."""
from __future__ import annotations

import re

import pandas as pd

# a library's refusal repeats one sentence with each workload's sizes in it ("Query.sizes(): [8, 32, 1, 128]",
# "predicted 392.0 GiB"): with its numbers masked, one cause is one group
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def reason_kind(reason) -> str:
    """A reason with every number replaced by '#': the key attempts that failed alike share."""
    return _NUMBER.sub("#", str(reason)) if isinstance(reason, str) else "(no reason given)"


def reason_groups(failed: pd.DataFrame, label) -> list[dict]:
    """One record per (status, reason kind), most attempts first: count, status, attempts per backend
    (most first), the first reason as stored, and the distinct workloads (`label(row)`) in store order."""
    if failed.empty:
        return []
    kinds = failed["reason"].map(reason_kind)
    out = []
    for (status, _), grp in failed.groupby([failed["status"].astype(str), kinds], sort=False):
        backends = grp["backend"].astype(str).value_counts()
        out.append({"attempts": int(len(grp)), "status": status,
                    "backends": list(zip(backends.index.tolist(), backends.astype(int).tolist())),
                    "reason": grp["reason"].iloc[0],
                    "workloads": list(dict.fromkeys(label(r) for _, r in grp.iterrows()))})
    return sorted(out, key=lambda g: -g["attempts"])  # stable: equal counts keep the store's order
