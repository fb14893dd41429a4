"""`attnbench model`'s table: one compact table per model and dtype (80 columns), failures and gaps under it."""
from __future__ import annotations

import numpy as np
from rich.console import Console

from .texttable import TextTable, num, pct, to_rich

BELOW_NOISE = "<noise"
NOISE_NOTE = (f"{BELOW_NOISE}: the step with attention removed differs from the step by less than the step's own "
              "spread (half its samples' interquartile range), or is slower: attention's share by difference is "
              "not measurable there (a negative share is noise, not a speedup)")


def _samples(r: dict) -> list[float]:
    """The step's samples of a model row as the store reads it (store/model_rows.rows decodes JSON)."""
    s = r.get("samples_us")
    return [float(x) for x in s] if isinstance(s, list) else []


def share_below_noise(r: dict) -> bool:
    """Whether a row's share by difference, (T - T_noop) / T, is within noise: T - T_noop is negative (the
    step without attention cannot be slower but for noise), or no larger than half the interquartile range
    of the step's samples (their median is T; the no-op step's spread is not stored, and is assumed alike)."""
    step, noop = r.get("median_us"), r.get("noop_us")
    if step is None or noop is None or r.get("share_diff") is None:
        return False
    diff = step - noop
    if diff < 0:
        return True
    s = _samples(r)
    if len(s) < 2:
        return False  # no spread to judge by: the share stands as measured
    q1, q3 = np.percentile(s, [25, 75])
    return diff <= (q3 - q1) / 2


def _share(r: dict) -> str:
    """The f cell: by profiler / by difference (BELOW_NOISE where the difference is within noise)."""
    return f"{pct(r['share_profiler'])}/{BELOW_NOISE if share_below_noise(r) else pct(r['share_diff'])}"


def label(r: dict) -> str:
    """A row's step in words: prefill B1 N8192, decode B32 kv8192 graph."""
    from ..model.steps import StepSpec

    return StepSpec(r["step"], r["batch"], r["seqlen"], r["launch"]).label()


def render(rows: list[dict], con: Console) -> None:
    """Rows as compact tables (80 columns), one per model and dtype, failures and gaps listed under."""
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["config"], r["layers"], r["dtype"]), []).append(r)
    for (config, layers, dtype), group in groups.items():
        _render(group, f"{config} × {layers} layers, {dtype}", con)


def _render(rows: list[dict], title: str, con: Console) -> None:
    from ..model.amdahl import AGREE

    t = TextTable(title,
                  ["step", "backend", "ms", "tok/s", "f", "s", "pred", "meas"], right=frozenset(range(2, 8)))
    failed, noisy = [], False
    for r in rows:
        if r["status"] != "OK":
            failed.append(f"{label(r)} {r['backend']}: {r['status']}: {r['reason']}")
            t.add(label(r), r["backend"], r["status"], "", "", "", "", "")
            continue
        noisy = noisy or share_below_noise(r)
        t.add(label(r), r["backend"], num(r["median_us"] / 1e3, ".3g"), _si(r["tokens_per_s"]), _share(r),
              num(r["kernel_speedup"]), num(r["predicted_speedup"]), num(r["measured_speedup"]))
    con.print(to_rich(t))
    con.print("ms: median step time; f: attention's share of the row's step, by profiler / by difference;"
              " s: kernel-level speedup over the baseline (--kernel-db); pred: 1/((1-f)+f/s) with "
              "the baseline's f; meas: measured step speedup", highlight=False, markup=False, style="dim")
    if noisy:
        con.print(NOISE_NOTE, highlight=False, markup=False, style="dim")
    for line in failed:
        con.print(line, highlight=False, markup=False)
    gaps = [r for r in rows if r.get("gap") is not None and r["backend"] != r.get("baseline")]
    off = [r for r in gaps if abs(r["gap"]) > AGREE]
    if gaps:
        con.print(f"{len(gaps) - len(off)} of {len(gaps)} predictions within {AGREE:.0%} of the measured speedup",
                  highlight=False)
    for r in off:
        con.print(f"{label(r)} {r['backend']}: gap {r['gap']:+.1%}: {r['explain']['why']}", highlight=False,
                  markup=False)


def _si(x: float) -> str:
    """12345 -> 12.3k."""
    for div, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if x >= div:
            return f"{x / div:.3g}{unit}"
    return f"{x:.3g}"
