"""`attnbench show` in the terminal: rich tables of winners and outcomes, and the run overview line."""
from __future__ import annotations

import pandas as pd
from rich.table import Table

from .columns import workload_columns

KERNEL_NOTE = ("name (kernel): that backend spent most of its device time in this library attention kernel "
               "(dispatch probe), e.g. torch.compile rewriting plain attention into SDPA")
CAVEAT_NOTE = {
    "host-bound": "clear (host-bound): the winner or the runner-up is an eager row whose median is more than "
                  "1.5x its kernels' device time: the lead is the host's Python and launch path, not the kernel's",
    "clock": "clear (clock): the two rows ran at SM clocks further apart than the lead",
}
_RIGHT = frozenset({"median µs", "p95 µs", "kernel µs", "throughput", "% ceiling", "×"})


def _result_columns(best: pd.DataFrame) -> tuple[str, ...]:
    # kernel time comes from the CUDA profiler: a column of dashes on CPU would only cost width
    kernel = "kernel_us" in best.columns and best["kernel_us"].notna().any()
    return ("best", "median µs", "p95 µs", *(("kernel µs",) if kernel else ()), "throughput", "% ceiling",
            "runner-up", "×", "clear")


def _clear(r) -> str:
    if not r.get("clear"):
        return "no"
    c = r.get("caveat")
    return f"yes ({c})" if isinstance(c, str) else "yes"


def ran(backend: str, kernel) -> str:
    """A backend's name, with the library attention kernel it ran when its name does not say so."""
    return f"{backend} ({kernel})" if isinstance(kernel, str) and kernel else backend


def _labels(r) -> tuple[str, str]:
    """The winner and runner-up as printed ('-' when there is no runner-up)."""
    runner_up = r.get("runner_up")
    return (ran(r["best"], r.get("best_kernel")),
            ran(runner_up, r.get("runner_up_kernel")) if pd.notna(runner_up) else "-")


def names_a_kernel(best: pd.DataFrame) -> bool:
    """Whether some winner or runner-up is printed with the library kernel it ran (KERNEL_NOTE applies)."""
    for _, r in best.iterrows():
        winner, runner_up = _labels(r)
        if winner != r["best"] or runner_up not in ("-", r.get("runner_up")):
            return True
    return False


def fastest_table(best: pd.DataFrame, source) -> Table:
    """best_per_workload's frame as a table: the workload, its winner and how far ahead it is."""
    t = Table(title=f"Fastest backend per workload ({source}; median of per-repeat medians; clear = "
                    "≥10% ahead of the runner-up and the 95% bootstrap lower bound of that ratio > 1)")
    workload = workload_columns(best)
    t.add_column("device")
    for c in workload:
        t.add_column(c.title(), justify="right" if c.right else "left")
    results = _result_columns(best)
    for c in results:
        t.add_column(c, justify="right" if c in _RIGHT else "left")
    for _, r in best.iterrows():
        pct, ratio, kernel = r.get("pct_ceiling"), r.get("ratio"), r.get("kernel_us")
        winner, runner_up = _labels(r)
        kernel_cell = (f"{kernel:.1f}" if pd.notna(kernel) else "-",) if "kernel µs" in results else ()
        t.add_row(str(r["device_name"]), *(c.text(r) for c in workload), winner,
                  f"{r['median_us']:.1f}", f"{r['p95_us']:.1f}", *kernel_cell, f"{r['value']:.3g} {r['metric']}",
                  f"{pct:.0f}%" if pd.notna(pct) else "-", runner_up, f"{ratio:.2f}" if pd.notna(ratio) else "-",
                  _clear(r))
    return t


def overview_line(o: dict) -> str:
    """attempts per status; sweep wall over timed device time; agreement of repeats per launch mode."""
    parts = [f"{o['attempts']} attempts (" + ", ".join(f"{k} {v}" for k, v in sorted(o["status"].items())) + ")"]
    if o.get("wall_over_timed"):
        parts.append(f"sweep wall {o['sweep_wall_s']:.0f} s for {o['timed_s']:.1f} s of timed samples "
                     f"(×{o['wall_over_timed']:.1f})")
    for launch, c in o.get("cv_by_launch", {}).items():
        parts.append(f"{launch}: CV of per-repeat medians {100 * c['median']:.1f}% median, "
                     f"{100 * c['p90']:.1f}% p90 over {c['pairs']} backend×workload")
    return "; ".join(parts)


def status_table(counts: pd.DataFrame) -> Table:
    """status_counts' frame: attempts per backend (rows) and status (columns)."""
    t = Table(title="Attempts per backend and status")
    t.add_column("backend")
    for c in counts.columns:
        t.add_column(str(c), justify="right")
    for name, row in counts.iterrows():
        t.add_row(str(name), *(str(int(v)) for v in row.values))
    return t


def show(best: pd.DataFrame, overview: dict, counts: pd.DataFrame | None, source, attempts: int) -> list:
    """Everything `show` prints, in order: the winners (or why there are none) with the kernel note
    when it applies, the run overview, and the status table when `counts` is given."""
    parts: list = []
    if best.empty:
        parts.append(f"no OK contestant rows in {source} ({attempts} attempts stored)")
    else:
        parts.append(fastest_table(best, source))
        if names_a_kernel(best):
            parts.append(KERNEL_NOTE)
        if "caveat" in best.columns:
            shown = {c for c, clear in zip(best["caveat"], best["clear"]) if clear and isinstance(c, str)}
            parts.extend(CAVEAT_NOTE[c] for c in sorted(shown))
    parts.append(overview_line(overview))
    if counts is not None:
        parts.append(status_table(counts))
    return parts
