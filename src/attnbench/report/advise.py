"""`advise` rendered: the recommendation, how sure it is, and what it costs on the other stores."""
from __future__ import annotations

from rich.text import Text

from .texttable import TextTable, num, to_rich, workload_text

_ABBREV = {"batch": "B", "q_len": "Nq", "kv_len": "Nkv", "q_heads": "Hq", "kv_heads": "Hkv", "head_dim": "D",
           "head_dim_v": "Dv"}


def _differs(differs: list[dict]) -> str:
    return ", ".join(f"{_ABBREV.get(d['field'], d['field'])} {d['measured']} (asked {d['wanted']})" for d in differs)


def _measured_at(differs: list[dict]) -> str:
    """Where the advised time was measured: "measured", or "measured at B16 Hkv32" for the nearest."""
    if not differs:
        return "measured"
    return "measured at " + " ".join(f"{_ABBREV[d['field']]}{d['measured']}" if d["field"] in _ABBREV
                                     else f"{d['field']}={d['measured']}" for d in differs)


def _lead(a: dict) -> str:
    if a["runner_up"] is None:
        return "the only contestant measured: no lead to judge"
    verdict = "separated" if a["separated"] else "not separated"
    method = {"none": "cannot be established: one sample per repeat and fewer than 3 repeats",
              "pooled-samples": "pooled-samples bootstrap, weaker: fewer than 3 repeats"}.get(a["separation"])
    return (f"lead {verdict}: runner-up {a['runner_up']} {num(a['runner_up_us'], '.1f')} µs, "
            f"{num(a['ratio'], '.2f')}x (95% lower bound {num(a['ratio_l95'], '.2f')})"
            + (f"; {method}" if method else ""))


def terminal(advice: dict) -> list:
    """What `advise` prints: plain text (names from the stores are never read as markup) and tables."""
    return [Text(p) if isinstance(p, str) else p for p in _parts(advice)]


def _parts(advice: dict) -> list:
    parts: list = [f"workload: {workload_text(advice['wanted'])}"]
    if not advice["advice"]:
        parts.append(f"no OK contestant in store {advice['home']}: nothing to advise")
        return parts
    for a in advice["advice"]:
        where = f"{a['label']} ({a['device_name']})"
        if a["exact"]:
            parts.append(f"on {where}: measured")
        else:
            parts.append(f"on {where}: not measured; nearest measured: {workload_text(a['workload'])} "
                         f"(differs: {_differs(a['differs'])})")
        flags = [f for f, on in (("host-bound", a["host_bound"]), ("clock-low", a["clock_low"])) if on]
        kernel = f" ({a['kernel']})" if a.get("kernel") else ""
        # the nearest workload's time is what it measured there, not a forecast for the one asked
        parts.append(f"use {a['backend']}{kernel}: {num(a['median_us'], '.1f')} µs {_measured_at(a['differs'])} (p5 "
                     f"{num(a['p5_us'], '.1f')}, p95 {num(a['p95_us'], '.1f')}, {a['repeats']} repeats)"
                     + (f" [{', '.join(flags)}]" if flags else ""))
        parts.append(_lead(a))
        others = [e for e in advice["elsewhere"] if e["for"] == a["device_name"]]
        if others:
            t = TextTable(f"{a['backend']} elsewhere (cost: its time over the fastest there)",
                          ["store", "device", "cost", "fastest there", "µs", "note"], right=frozenset({2, 4}))
            for e in others:
                note = "nearest: " + ", ".join(f"{_ABBREV.get(d['field'], d['field'])} {d['measured']}"
                                               for d in e["differs"]) if e["differs"] else "-"
                t.add(e["label"], e["device_name"], "unavailable" if e["unavailable"] else num(e["cost"], ".2f"),
                      e["fastest"], num(e["fastest_us"], ".1f"), note)
            parts.append(to_rich(t))
    return parts
