"""How a store's sweep went: outcomes, wall time against timed device time, agreement of repeats."""
from __future__ import annotations

import pandas as pd

from .ceilings import row_flags
from .stats import json_dict, json_list


def _seconds(start, end) -> float | None:
    if not start or not end:
        return None
    seconds = (pd.Timestamp(end) - pd.Timestamp(start)).total_seconds()
    return seconds if seconds >= 0 else None  # rows imported from elsewhere can predate the run row


def repeat_cv(df: pd.DataFrame) -> pd.Series:
    """Coefficient of variation (sample std / mean) of the per-repeat medians, one value per
    (device, workload, backend) with OK rows in two or more repeats."""
    ok = df[(df["status"] == "OK") & df["median_us"].notna()]
    g = ok.groupby(["device_name", "workload_key", "backend"])["median_us"]
    cv = g.std(ddof=1) / g.mean()
    return cv[g.count() >= 2].dropna()


def run_devices(run: dict) -> int:
    """The devices a run measured on at once: its provenance's `devices` (--devices, Ray), else 1."""
    prov = run.get("provenance") or {}
    return max(len(prov.get("devices") or []), 1) if isinstance(prov, dict) else 1


def timed_seconds(rows: pd.DataFrame) -> pd.Series:
    """Each row's timed device time in seconds (its samples x calls per sample), NaN where the row
    holds no samples (not OK, or slimmed away)."""
    out = []
    for s, k in zip(rows.get("samples_us", []), rows.get("calls_per_sample", [])):
        samples = json_list(s)
        out.append(sum(samples) * (int(k) if pd.notna(k) else 1) / 1e6 if samples else float("nan"))
    return pd.Series(out, index=rows.index, dtype=float)


def run_overview(df: pd.DataFrame, runs: list[dict]) -> dict:
    """How a store's sweep went: attempts per status; sweep wall time (each run's start-up, from its
    command's start to the run's, then the run's start to finish, or to its last row if interrupted;
    runs written before start-ups were recorded count from the run's start) and device time (each
    run's wall × the devices it ran on at once) over the summed timed device time (every sample ×
    its calls); and how well repeats agree (CV of per-repeat medians over workload × backend). Only
    runs with at least one attempt in `df` count: the wall time of a run whose rows were filtered out
    (another tag) or that wrote nothing new (a finished resume) was not spent on these attempts.
    `wall_over_timed` is device time over timed samples: on one device the wall's, on several what
    the sweep cost each device for its samples; None when an OK row holds no samples (a store slimmed
    to resume from), as its timed share is unknown."""
    out: dict = {"attempts": int(len(df)),
                 "status": {k: int(v) for k, v in df["status"].value_counts().items()} if len(df) else {}}
    wall = device_s = startup_s = 0.0
    devices = 1
    for r in runs:
        mine = df.loc[df["run_id"] == r["run_id"], "created_at"] if len(df) else ()
        if not len(mine):
            continue
        up = float((r.get("provenance") or {}).get("startup_s") or 0.0)
        seconds = (_seconds(r.get("started_at"), r.get("finished_at") or mine.max()) or 0.0) + up
        n = run_devices(r)
        wall += seconds
        device_s += seconds * n
        startup_s += up * n
        devices = max(devices, n)
    out["sweep_wall_s"] = wall
    out["sweep_device_s"] = device_s
    out["devices"] = devices
    ok = df[df["status"] == "OK"] if len(df) else df
    per_row = timed_seconds(ok)
    # OK rows whose samples were dropped (a store slimmed to resume from): their time is unknown
    unsampled = list(per_row.index[per_row.isna()])
    timed = float(per_row.sum())
    out["timed_s"] = timed
    out["ok_rows_without_samples"] = len(unsampled)
    out["wall_over_timed"] = device_s / timed if timed > 0 and not unsampled else None
    out["startup_s"] = startup_s
    out["wall_by_phase"] = wall_by_phase(df, device_s, timed, startup_s, df.index.isin(unsampled))
    # graph samples the host was late to queue (dropped, not timed; measure/timing.py: GraphSampler)
    late = pd.to_numeric(ok.get("late_samples", pd.Series(dtype=float)), errors="coerce").fillna(0)
    out["late_samples"] = {"samples": int(late.sum()), "rows": int((late > 0).sum())}
    out.update(row_flags(ok))  # OK rows beside other work on their GPU, or above a ceiling (analysis/ceilings.py)
    cv = repeat_cv(df) if len(df) else pd.Series(dtype=float)
    out["cv"] = _cv_stats(cv)
    # eager samples carry the host's launch cost, graph samples device time only: report them apart
    out["cv_by_launch"] = {}
    if len(cv):
        launch_of = df.groupby(["device_name", "workload_key"])["launch"].first()
        launch = launch_of.loc[cv.index.droplevel("backend")].to_numpy()  # aligned with cv
        for name in sorted(set(launch)):
            out["cv_by_launch"][name] = _cv_stats(cv[launch == name])
    return out


def on_devices(o: dict) -> str:
    """' on 2 devices (240 device-s)' for an overview of a sweep on several devices at once, else ''."""
    return f" on {o['devices']} devices ({o['sweep_device_s']:.0f} device-s)" if o.get("devices", 1) > 1 else ""


# the phases an attempt's wall_s is split into (runner/attempt.py), as `show --status` names them
PHASE_LABELS = {"cold_call": "first call (compiles)", "hard": "hard-input checks", "inputs": "inputs, references",
                "probe": "dispatch probes", "recheck": "recheck after timing", "check": "first check",
                "memory": "peak memory", "prepare": "prepare"}


def _phase_sums(frame: pd.DataFrame) -> dict[str, float]:
    """Each phase's seconds summed over the rows (phases_s: JSON text, or a dict after an import)."""
    sums: dict[str, float] = {}
    for p in frame["phases_s"].dropna():
        for k, v in json_dict(p).items():
            sums[k] = sums.get(k, 0.0) + float(v)
    return sums


def wall_by_phase(df: pd.DataFrame, wall: float, timed: float, startup: float = 0.0,
                  unsampled=None) -> list[tuple[str, float]]:
    """Where a sweep's wall (its device time: wall × devices, run_overview) went, largest first: the
    timed samples; the rest of the timing phase
    (warm-up, and blocks, telemetry and syncs between samples); each gate's summed phase seconds
    (every attempt, whatever its status); what attempts spent between their phases (the input
    fingerprints, memory handed back, the worker's messages); the runs' start-up (the interpreter, the
    first workers, provenance and ceilings, the plan); and what no attempt holds after it (later worker
    starts and stops, releases between workloads, messages and the store). Empty when no row has
    phases."""
    if not len(df) or "phases_s" not in df or not df["phases_s"].notna().any():
        return []
    sums = _phase_sums(df)
    # `unsampled` (a mask on df): OK rows whose samples were dropped (a store slimmed to resume from);
    # their timing phase cannot be split into samples, warm-up and the time between, so it is a line of its own
    unsampled = pd.Series(False if unsampled is None else unsampled, index=df.index)
    ok = df[(df["status"] == "OK") & ~unsampled]
    warm = float(pd.to_numeric(ok.get("warmup_us"), errors="coerce").fillna(0).sum()) / 1e6 if len(ok) else 0.0
    phased = sum(sums.values())
    timing = sums.pop("timing", 0.0)
    blind = _phase_sums(df[unsampled]).get("timing", 0.0) if unsampled.any() else 0.0
    out = [("timed samples", timed), ("warm-up", warm), ("timing, between samples", max(timing - blind - timed - warm, 0.0))]
    if blind:
        out.append(("timing, samples not kept", blind))
    out += [(PHASE_LABELS.get(k, k), v) for k, v in sums.items()]
    held = float(pd.to_numeric(df.get("wall_s"), errors="coerce").fillna(0).sum())
    # input fingerprints between phases, the memory handed back after each attempt, the worker's messages
    out.append(("in attempts, between phases", max(held - phased, 0.0)))
    if startup:
        out.append(("start-up before the run", startup))
    if wall:
        out.append(("outside attempts", max(wall - startup - held, 0.0)))
    return sorted(out, key=lambda kv: -kv[1])


def _cv_stats(cv: pd.Series) -> dict:
    if not len(cv):
        return {"pairs": 0}
    return {"pairs": int(len(cv)), "median": float(cv.median()), "p90": float(cv.quantile(0.9)),
            "max": float(cv.max())}
