"""How attempts ended: counts per backend and status."""
from __future__ import annotations

import pandas as pd


def status_counts(df: pd.DataFrame) -> pd.DataFrame:
    """Attempts per backend and status (the run-outcome table)."""
    if df.empty:
        return pd.DataFrame()
    return df.pivot_table(index="backend", columns="status", values="attempt_key", aggfunc="count",
                          fill_value=0)
