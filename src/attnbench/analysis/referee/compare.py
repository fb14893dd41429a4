"""Published figures against attnbench's own rows of the same workloads: ratio, interval overlap and a verdict.

The comparison reads a frame of attempts (a store's, as store/sources.py loads it), never measures: `attnbench
referee` measures first, then calls `compare` on what the store holds (docs/method/referee.md has the rules)."""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from ...workloads.cost import bound, flops, io_bytes
from ..frames import per_backend
from .published import Published, cudnn_version, gpu_key

AGREE_RATIO = 1.10  # within 10 % either way (and overlapping intervals) the published figure is reproduced
CONVENTION_TOLERANCE = 0.005  # a publisher's FLOP or byte count within 0.5 % of attnbench's is not a difference
AGREES, FASTER, SLOWER, CANNOT = "agrees", "faster here", "slower here", "cannot compare"


@dataclass(frozen=True)
class Comparison:
    """One published figure against one attnbench backend's line of the same workload."""

    published: Published
    backend: str
    status: str | None  # our rows' status: OK, or the status of the last row when none is OK; None: no row
    reason: str | None  # why not OK, as stored
    ours_ms: float | None = None  # the line's time (analysis/stats.py: median of repeat medians)
    ours_lo_ms: float | None = None  # its spread: p5 of the best repeat ...
    ours_hi_ms: float | None = None  # ... to p95 of the worst
    repeats: int = 0
    device: str | None = None
    ratio: float | None = None  # published time / our time: above 1 the kernel runs faster here
    verdict: str = CANNOT
    why: str = ""  # what decided the verdict, one line
    unit: str = "TFLOP/s"  # the unit of the figures below: TFLOP/s, or GB/s for decode
    published_figure: float | None = None  # the published time in attnbench's FLOP (or byte) model
    ours_figure: float | None = None
    ours_figure_lo: float | None = None
    ours_figure_hi: float | None = None
    amount_ratio: float | None = None  # publisher's FLOPs (bytes) / attnbench's for the same workload
    differences: list[str] = field(default_factory=list)  # toolkit facts of both sides, one line
    clock_mhz: float | None = None  # our rows' median SM clock while timed (the publisher states none)
    power_w: float | None = None  # ... and board power
    held_back: str | None = None  # why our clock was held back, when a repeat says so (throttle, clock low)
    kernel_ms: float | None = None  # our call's kernels' device time (the dispatch probe's profiler), as the
    # cudnn-frontend suites time (theirs: the attention kernels only); None where it was not read (CPU)


def verdict(published_ms: float, ours_ms: float, lo_ms: float, hi_ms: float,
            spread_ms: tuple[float, float] | None = None) -> tuple[str, str]:
    """agrees when the times are within 10 % either way and our p5-p95 interval overlaps the published one (a
    point when only a figure is published); else faster or slower here, by the ratio's side."""
    ratio = published_ms / ours_ms
    p_lo, p_hi = spread_ms or (published_ms, published_ms)
    overlap = lo_ms <= p_hi and p_lo <= hi_ms
    within = max(ratio, 1 / ratio) <= AGREE_RATIO
    if within and overlap:
        return AGREES, f"{ratio:.2f}x, within 10 % and overlapping"
    side = FASTER if ratio > 1 else SLOWER
    if within:
        return side, f"{ratio:.2f}x: within 10 % but our p5-p95 does not reach the published time"
    return side, f"{ratio:.2f}x: beyond 10 %"


def compare(rows: list[Published], attempts: pd.DataFrame, device: str | None = None) -> list[Comparison]:
    """Every mapped published figure against each of its backends' lines in `attempts` (OK rows timed; other
    statuses reported), on `device` (a device_name) when given, else the device matching the published GPU."""
    df = attempts
    if device is not None and not df.empty:
        df = df[df["device_name"] == device]
    lines = per_backend(df) if not df.empty else pd.DataFrame(columns=["workload_key", "backend"])
    out = []
    for p in rows:
        if p.workload is None:
            continue
        key = p.workload.key()
        for b in p.backends:
            mine = df[(df["workload_key"] == key) & (df["backend"] == b)] if not df.empty else df
            line = lines[(lines["workload_key"] == key) & (lines["backend"] == b)]
            out.append(_one(p, b, mine, line))
    return out


def _one(p: Published, backend: str, mine: pd.DataFrame, line: pd.DataFrame) -> Comparison:
    w = p.workload
    by_bytes = bound(w) == "bytes"
    amount = float(io_bytes(w) if by_bytes else flops(w))
    scale = 1e6 if by_bytes else 1e9  # amount / ms -> GB/s or TFLOP/s
    unit = "GB/s" if by_bytes else "TFLOP/s"
    base = dict(unit=unit, published_figure=amount / p.time_ms / scale,
                amount_ratio=p.publisher_amount / amount if p.publisher_amount else None)
    if mine.empty:
        return Comparison(p, backend, None, None, why="not measured here (run without --no-run)", **base)
    if line.empty:  # no OK row: the last row's status and reason
        last = mine.iloc[-1]
        return Comparison(p, backend, str(last["status"]), _text(last.get("reason")),
                          why=f"ours {last['status']}: {_text(last.get('reason')) or 'no reason stored'}", **base)
    if len(line) > 1:  # several devices: the one that ran the published GPU's model, else the first
        match = line[[gpu_key(d) == gpu_key(p.gpu) for d in line["device_name"]]]
        line = match if not match.empty else line
    ln = line.iloc[0]
    ours, lo, hi = ln["median_us"] / 1e3, ln["p5_us"] / 1e3, ln["p95_us"] / 1e3
    device = str(ln["device_name"])
    ok = mine[(mine["status"] == "OK") & (mine["device_name"] == device)]
    ratio = p.time_ms / ours
    v, why = verdict(p.time_ms, ours, lo, hi, p.spread_ms)
    if p.gpu is None:
        v, why = CANNOT, "the publisher's GPU is not stated (--gpu NAME)"
    elif gpu_key(p.gpu) != gpu_key(device):
        v, why = CANNOT, f"published on {p.gpu}, measured on {device}: the ratio is shown, not judged"
    return Comparison(p, backend, "OK", None, ours, lo, hi, int(ln["repeats"]), device, ratio, v, why,
                      ours_figure=amount / ours / scale, ours_figure_lo=amount / hi / scale,
                      ours_figure_hi=amount / lo / scale, differences=differences(p, ok),
                      kernel_ms=_num(ln.get("kernel_us")) and _num(ln.get("kernel_us")) / 1e3,
                      clock_mhz=_median(ok, "sm_clock_mhz"), power_w=_median(ok, "power_w"), held_back=held_back(ok),
                      **{k: base[k] for k in ("unit", "published_figure", "amount_ratio")})


def _num(v) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if f == f and f > 0 else None


def _text(v) -> str | None:
    return v if isinstance(v, str) and v else None


def _median(rows: pd.DataFrame, col: str) -> float | None:
    if col not in rows.columns:
        return None
    v = pd.to_numeric(rows[col], errors="coerce").median()
    return None if v != v else float(v)


def _first(rows: pd.DataFrame, col: str):
    if col not in rows.columns:
        return None
    vals = [v for v in rows[col] if v is not None and v == v and v != ""]
    return vals[0] if vals else None


def differences(p: Published, ok: pd.DataFrame) -> list[str]:
    """The toolkit known from both sides, each side said once."""
    ours_cudnn = cudnn_version(_first(ok, "cudnn_version"))
    theirs = ", ".join(f"{k} {v}" for k, v in p.toolkit.items()) or "toolkit not stated"
    mine = [f"cuDNN {ours_cudnn}" if ours_cudnn else None, f"torch {_first(ok, 'torch_version')}"
            if _first(ok, "torch_version") else None,
            f"{ok['backend'].iloc[0]} {_first(ok, 'backend_version')}" if _first(ok, "backend_version") else None]
    return [f"published: {theirs}; here: {', '.join(m for m in mine if m) or 'toolkit not recorded'}"]


def held_back(ok: pd.DataFrame) -> str | None:
    """Why our rows ran below full clock, when they say so: the throttle reasons, or a clock read low."""
    throttle = _first(ok, "throttle")
    if throttle and str(throttle) not in ("0", "none", "[]", "{}"):
        return f"throttled ({throttle})"
    return "SM clock below its maximum while timed" if _median(ok, "clock_low") else None
