"""The measured device ceilings each device model is judged against."""
from __future__ import annotations


def ceilings_by_device(runs: list[dict]) -> dict[str, dict]:
    """Latest measured ceilings per device model (copy GB/s, matmul TFLOP/s per dtype)."""
    out: dict[str, dict] = {}
    for r in runs:  # runs come oldest first; later runs overwrite
        c = (r.get("provenance") or {}).get("ceilings")
        if c and r.get("device_name"):
            out[r["device_name"]] = c
    return out
