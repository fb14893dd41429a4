"""How attempts ended: counts per backend and status."""
from __future__ import annotations

import pandas as pd


def status_counts(df: pd.DataFrame) -> pd.DataFrame:
    """Attempts per backend and status (the run-outcome table)."""
    if df.empty:
        return pd.DataFrame()
    return df.pivot_table(index="backend", columns="status", values="attempt_key", aggfunc="count",
                          fill_value=0)


def device_counts(df: pd.DataFrame) -> pd.DataFrame:
    """Per device that ran attempts (model, index, UUID): attempts, OK rows, the attempts' summed wall
    and its share of all of theirs, to see how a sweep over several devices shared its work. Rows without a device (attempts
    planned out of a sharded plan: they ran nowhere) are left out. Empty unless two devices or more
    ran attempts."""
    if df.empty or "device_index" not in df.columns:
        return pd.DataFrame()
    ran = df[df["device_index"].notna()]
    ran = ran.assign(device_uuid=ran["device_uuid"].fillna("") if "device_uuid" in ran.columns else "",
                     ok=ran["status"] == "OK", wall=pd.to_numeric(ran["wall_s"], errors="coerce"))
    g = ran.groupby(["device_name", "device_index", "device_uuid"], sort=True)
    out = pd.DataFrame({"attempts": g.size(), "OK": g["ok"].sum(), "wall_s": g["wall"].sum()})
    if len(out) < 2:
        return pd.DataFrame()
    total = out["wall_s"].sum()
    return out.assign(share=out["wall_s"] / total if total else float("nan"))
