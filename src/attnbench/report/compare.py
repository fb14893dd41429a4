"""`compare` rendered: the lines that regressed, were lost or are slower without separation, and the verdict."""
from __future__ import annotations

from .texttable import TextTable, num, to_rich, varying_text

MAX_LINES = 20  # the terminal lists this many lines per table; --json holds every one


def _flags(r: dict) -> str:
    return ", ".join(f for f, on in (("host-bound", r["host_bound"]), ("clock-low", r["clock_low"])) if on) or "-"


def _interval(r: dict) -> str:
    if r["verdict"] == "lost":
        return "now " + "/".join(r["new_status"])
    return f"{r['ratio']:.2f} ({r['lo']:.2f}-{r['hi']:.2f})" if r["lo"] is not None else f"{r['ratio']:.2f} (none)"


def lines_table(title: str, rows: list[dict]) -> TextTable:
    shown = rows[:MAX_LINES]
    texts, common = varying_text(shown)
    flagged = any(r["host_bound"] or r["clock_low"] for r in shown)
    t = TextTable(title + (f" (first {MAX_LINES} of {len(rows)})" if len(rows) > MAX_LINES else "")
                  + (f"; every row: {common}" if common else ""),
                  ["workload", "backend", "µs base > new", "ratio (95%)", *(["flags"] if flagged else [])],
                  right=frozenset({2}))
    for r, text in zip(shown, texts):
        t.add(text, r["backend"], f"{num(r['base_us'], '.1f')} > {num(r['new_us'], '.1f')}", _interval(r),
              *([_flags(r)] if flagged else []))
    return t


def terminal(rows: list[dict], summary: dict, base, new, threshold: float) -> list:
    """What `compare` prints: the lost and regressed lines, the slower ones without separation, the
    counts and the verdict that sets the exit code."""
    parts: list = [f"compare {base} -> {new}: {summary['compared']} workload x backend lines OK in both; a "
                   f"regression is a ratio >= {threshold:g} whose 95% interval lies above 1"]
    bad = [r for r in rows if r["verdict"] in ("lost", "regressed")]
    if bad:
        parts.append(to_rich(lines_table("Regressed or lost", bad)))
    slower = [r for r in rows if r["verdict"] == "slower"]
    if slower:
        parts.append(to_rich(lines_table(f"Slower by >= {threshold:g}x, not separated", slower)))
    parts.append(", ".join(f"{k.replace('_', ' ')} {summary[k]}" for k in
                           ("regressed", "lost", "slower", "same", "faster", "improved", "missing", "new")))
    if summary["not_separable"]:
        parts.append(f"{summary['not_separable']} slower lines cannot be separated at all: one sample per repeat "
                     "and fewer than 3 repeats")
    if summary["regressed"] or summary["lost"]:
        parts.append(f"REGRESSED: {summary['regressed']} line(s) slower beyond {threshold:g}x with separation, "
                     f"{summary['lost']} no longer OK (exit 3)")
    else:
        parts.append(f"OK: nothing regressed beyond {threshold:g}x with separation, nothing lost")
    return parts
