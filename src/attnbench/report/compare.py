"""`compare` rendered: the lines that regressed, were lost or are slower (within their between-run floor, or
not gated), and the verdict."""
from __future__ import annotations

from ..analysis.regress import FLOORS, NOT_GATED
from .texttable import TextTable, num, to_rich, varying_text

MAX_LINES = 20  # the terminal lists this many lines per table; --json holds every one


def _interval(r: dict) -> str:
    if r["verdict"] == "lost":
        return "now " + "/".join(r["new_status"])
    return f"{r['ratio']:.2f} ({r['lo']:.2f}-{r['hi']:.2f})" if r["lo"] is not None else f"{r['ratio']:.2f} (none)"


def _gate(r: dict) -> str:
    if r["gate"] is None:
        return "-"
    return f"not gated: {r['gate']}" if r["floor"] is None else f"{r['gate']}, floor {r['floor']:.2f}"


def lines_table(title: str, rows: list[dict]) -> TextTable:
    shown = rows[:MAX_LINES]
    texts, common = varying_text(shown)
    # what every shown row shares goes in the caption: one device model (several: a column, so two
    # GPUs' lines never read alike), one gate
    devices = list(dict.fromkeys(str(r.get("device_name")) for r in shown))
    gates = list(dict.fromkeys(_gate(r) for r in shown))
    common = " ".join(x for x in (devices[0] if len(devices) == 1 else "", common,
                                  gates[0] if len(gates) == 1 and gates[0] != "-" else "") if x)
    many_devices, many_gates = len(devices) > 1, len(gates) > 1
    t = TextTable(title + (f" (first {MAX_LINES} of {len(rows)})" if len(rows) > MAX_LINES else "")
                  + (f"; every row: {common}" if common else ""),
                  [*(["device"] if many_devices else []), "workload", "backend", "µs base > new", "ratio (95%)",
                   *(["gate"] if many_gates else [])],
                  right=frozenset({3 if many_devices else 2}))
    for r, text in zip(shown, texts):
        t.add(*([str(r.get("device_name"))] if many_devices else []), text, r["backend"],
              f"{num(r['base_us'], '.1f')} > {num(r['new_us'], '.1f')}", _interval(r),
              *([_gate(r)] if many_gates else []))
    return t


def _rule(threshold: float) -> str:
    floors = ", ".join(f"{k} {v:g}" for k, v in FLOORS.items())
    return (f"a regression is a ratio >= {threshold:g} whose 95% interval lies above its class's between-run "
            f"floor ({floors}); host-bound, clock-low and <3-repeat lines are reported, not gated")


def terminal(rows: list[dict], summary: dict, base, new, threshold: float) -> list:
    """What `compare` prints: the lost and regressed lines, the slower ones (within their floor, then not
    gated), the counts and the verdict that sets the exit code."""
    parts: list = [f"compare {base} -> {new}: {summary['compared']} workload x backend lines OK in both; "
                   + _rule(threshold)]
    bad = [r for r in rows if r["verdict"] in ("lost", "regressed")]
    if bad:
        parts.append(to_rich(lines_table("Regressed or lost", bad)))
    slower = [r for r in rows if r["verdict"] == "slower" and r["gate"] not in NOT_GATED]
    if slower:
        parts.append(to_rich(lines_table(f"Slower by >= {threshold:g}x, within the between-run floor", slower)))
    loose = [r for r in rows if r["verdict"] == "slower" and r["gate"] in NOT_GATED]
    if loose:
        parts.append(to_rich(lines_table(f"Slower by >= {threshold:g}x, not gated", loose)))
    parts.append(", ".join(f"{k.replace('_', ' ')} {summary[k]}" for k in
                           ("regressed", "lost", "slower", "same", "faster", "improved", "missing", "new")))
    ungated = {k: v for k, v in summary["not_gated"].items() if v}
    if ungated:
        parts.append(f"{sum(ungated.values())} of {summary['compared']} compared lines not gated ("
                     + ", ".join(f"{k} {v}" for k, v in ungated.items()) + "): their between-run drift is the "
                     "host's or the clock's, unmeasured, or unseen with fewer than 3 repeats a side")
        if sum(ungated.values()) == summary["compared"]:
            parts.append("no compared line is gated: only a lost line can fail this comparison")
    if summary["not_separable"]:
        parts.append(f"{summary['not_separable']} slower lines cannot be separated at all: one sample per repeat "
                     "and fewer than 3 repeats")
    if summary["regressed"] or summary["lost"]:
        parts.append(f"REGRESSED: {summary['regressed']} line(s) slower beyond {threshold:g}x and their between-run "
                     f"floor, {summary['lost']} no longer OK (exit 3)")
    else:
        parts.append(f"OK: nothing regressed beyond {threshold:g}x and its between-run floor, nothing lost")
    return parts
