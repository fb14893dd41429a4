"""`analyze` rendered: a short terminal summary and a Markdown report of the sections analysis computed."""
from __future__ import annotations

from .texttable import TextTable, num, pct, to_markdown, workload_text

MAX_CHANGES = 40  # changed workloads listed in the Markdown report; the JSON holds them all
SHORT_PAIRS = 6  # above this many ordered pairs the terminal shows transfer over all modes only


def sources_lines(result: dict) -> list[str]:
    out = [f"analyze by {result['by']}: {len(result['sources'])} store(s); time = median of per-repeat medians"]
    for s in result["sources"]:
        pace = s.get("host_op_us")
        host = (f", host {pace[0]:.2f} us/op" if pace[0] == pace[1] else
                f", host {pace[0]:.2f}-{pace[1]:.2f} us/op") if pace else ""
        out.append(f"  {s['label']}: {s['attempts']} attempts, {', '.join(s['devices']) or 'no device'}, "
                   f"torch {', '.join(s['torch_versions']) or '?'}{host}")
        if pace and s.get("runs_paced", 0) < s.get("runs", 0):  # the others' hosts are unknown
            out.append(f"    host pace from {s['runs_paced']} of its {s['runs']} runs (the others did not record it)")
    note = result.get("host_pace")
    if note:
        out.append(f"  the hosts differ {note['spread']:.2f}x in eager-op pace ({note['min_us']:.2f}-"
                   f"{note['max_us']:.2f} us/op):")
        out.append(f"  {note['host_bound_rows']} host-bound eager rows compare hosts as much as devices")
    return out


MODE_SHORT = {"train_fwd_bwd": "fwd+bwd", "train_fwd": "fwd"}
PAIR_NOTE = ("floor: one device model and one toolkit on both sides, so its changes are the method's noise "
             "floor; n<5: too few separated workloads to read as a rate")


def _mode(m: str) -> str:
    return MODE_SHORT.get(m, m)


def _methods(m: dict) -> str:
    short = {"paired-repeats": "paired", "pooled-samples": "pooled", "none": "none"}
    return " ".join(f"{short.get(k, k)} {v}" for k, v in sorted(m.items())) or "-"


def winners_table(result: dict) -> TextTable:
    t = TextTable("Separated winners (>= 1.10x ahead, 95% bootstrap lower bound > 1)",
                  ["side", "mode", "contested", "separated", "bootstrap", "flagged"], right=frozenset({2, 3}))
    for s in result["winners"]["separated"]:
        flags = ", ".join(f"{n} {k}" for k, n in (("host-bound", s["host_bound"]), ("clock-low", s["clock_low"])) if n)
        t.add(s["side"], _mode(s["mode"]), s["contested"], f"{s['separated']} ({pct(s['fraction'])})",
              _methods(s["methods"]), flags or "-")
    return t


def transfer_table(result: dict, all_modes_only: bool = False) -> TextTable:
    t = TextTable("Transfer cost: time of the source's winner on the target over the target's fastest",
                  ["from", "to", "mode", "n", "unav", "median", "p95", "sep n", "median", "p95"],
                  right=frozenset(range(3, 10)))
    modes = {(r["source"], r["target"], r["mode"]) for r in result["transfer"]}
    for r in result["transfer"]:
        if all_modes_only and r["mode"] != "all" and (r["source"], r["target"], "all") in modes:
            continue
        a, s = r["all"], r["separated"]
        t.add(r["source"], r["target"], _mode(r["mode"]), a["n"], a["unavailable"], num(a["median"], ".3f"),
              num(a["p95"], ".3f"), s["n"], num(s["median"], ".3f"), num(s["p95"], ".3f"))
    return t


def pairs_table(result: dict) -> TextTable:
    t = TextTable("Winner changes (shared workloads; sep: separated on both sides)",
                  ["a", "b", "mode", "shared", "changed", "sep n", "changed", "note"], right=frozenset(range(3, 7)))
    for r in result["pairs"]["rows"]:
        notes = [n for n, on in (("floor", r["noise_floor"]), ("n<5", r["too_small"])) if on]
        t.add(r["a"], r["b"], _mode(r["mode"]), r["shared"], f"{r['changed']} ({pct(r['rate'])})", r["separated"],
              f"{r['changed_separated']} ({pct(r['rate_separated'])})", "; ".join(notes) or "-")
    return t


def noise_floor_lines(result: dict) -> list[str]:
    out = []
    transfer = {(r["source"], r["target"], r["mode"]): r for r in result["transfer"]}
    floors = result["pairs"]["noise_floor"]
    overall = {(p["a"], p["b"]) for p in floors if p["mode"] == "all"}
    for p in floors:
        if p["mode"] != "all" and (p["a"], p["b"]) in overall:
            continue
        costs = [transfer.get((x, y, p["mode"])) for x, y in ((p["a"], p["b"]), (p["b"], p["a"]))]
        p95 = " / ".join(num(c["all"]["p95"], ".3f") for c in costs if c)
        out.append(f"noise floor ({p['a']} vs {p['b']}: one device model, one toolkit): the winner changes on "
                   f"{pct(p['rate'])} of {p['shared']} workloads, {pct(p['rate_separated'])} of {p['separated']} "
                   f"separated ones; transfer cost p95 {p95}")
    return out


def side_lines(result: dict) -> list[str]:
    """One line per side: attempts per status, worst error ratio, median % of ceiling per mode."""
    out = []
    status: dict[str, dict] = {}
    for r in result["outcomes"]:
        d = status.setdefault(r["side"], {})
        for k, v in r.items():
            if k not in ("side", "device_name", "backend", "attempts") and v:
                d[k] = d.get(k, 0) + int(v)
    worst: dict[str, float] = {}
    for r in result["correctness"]:
        if r["max_err_ratio"] is not None:
            worst[r["side"]] = max(worst.get(r["side"], 0.0), r["max_err_ratio"])
    eff: dict[str, list[str]] = {}
    for r in result["efficiency"]["summary"]:
        if r["median_pct_ceiling"] is not None:
            eff.setdefault(r["side"], []).append(f"{r['mode']} {r['median_pct_ceiling']:.0f}%")
    for side, d in status.items():
        out.append(f"{side}: " + ", ".join(f"{k} {v}" for k, v in sorted(d.items()))
                   + f"; worst error ratio {num(worst.get(side), '.2f', 'not checked')}"
                   + (f"; winners' median % of ceiling: {', '.join(eff[side])}" if side in eff else ""))
    return out


def terminal(result: dict) -> list:
    """What `analyze` prints: stores, separated fractions, transfer costs, winner changes, the noise
    floor, and a line per side; the tables of every section are in --json and --md."""
    from .texttable import to_rich

    parts: list = ["\n".join(sources_lines(result))]
    parts.append(to_rich(winners_table(result)))
    if result["transfer"]:
        pairs = {(r["source"], r["target"]) for r in result["transfer"]}
        parts.append(to_rich(transfer_table(result, all_modes_only=len(pairs) > SHORT_PAIRS)))
        parts.append("n: matched workloads; unav: the source's winner has no OK row on the target; sep: "
                     "those whose source winner is separated")
        parts.append(to_rich(pairs_table(result)))
        parts.append(PAIR_NOTE)
    else:
        parts.append("no workload was measured on two sides: nothing to transfer")
    parts.extend(noise_floor_lines(result))
    parts.extend(side_lines(result))
    return parts


def markdown(result: dict) -> str:
    """The readable report (--md): every summary table, the changed winners, and the side tables."""
    out = ["# attnbench analyze", "", *(f"- {x.strip()}" for x in sources_lines(result)), ""]
    out.append(to_markdown(winners_table(result)))
    out.append(to_markdown(transfer_table(result)))
    out.append(to_markdown(pairs_table(result)))
    out.append(PAIR_NOTE + "\n")
    out.extend(f"{x}\n" for x in noise_floor_lines(result))
    changes = result["pairs"]["changes"]
    t = TextTable(f"Changed winners ({len(changes)}; first {min(len(changes), MAX_CHANGES)})",
                  ["pair", "workload", "winner a", "winner b", "separated", "cost a on b"])
    for c in changes[:MAX_CHANGES]:
        t.add(f"{c['a']} / {c['b']}", workload_text(c), c["winner_a"], c["winner_b"],
              f"{'yes' if c['separated_a'] else 'no'} / {'yes' if c['separated_b'] else 'no'}",
              num(c["cost_a_on_b"], ".3f", "unavailable"))
    out.append(to_markdown(t))
    out.extend(to_markdown(x) for x in (outcomes_table(result), dispatch_table(result), correctness_table(result),
                                        efficiency_table(result)))
    return "\n".join(out)


def outcomes_table(result: dict) -> TextTable:
    rows = result["outcomes"]
    statuses = sorted({k for r in rows for k in r} - {"side", "device_name", "backend", "attempts"})
    t = TextTable("Outcomes: attempts per status", ["side", "device", "backend", *statuses],
                  right=frozenset(range(3, 3 + len(statuses))))
    for r in rows:
        t.add(r["side"], r["device_name"], r["backend"], *(int(r.get(s) or 0) for s in statuses))
    return t


def dispatch_table(result: dict) -> TextTable:
    t = TextTable("Dispatch: kernel families seen", ["side", "backend", "reached", "families", "mismatch", "probed"],
                  right=frozenset({2, 4, 5}))
    for r in result["dispatch"]:
        t.add(r["side"], r["backend"], r["reached"], ", ".join(r["families"]) or "-", f"{r['mismatch_pct']:.0f}%",
              f"{r['probed_pct']:.0f}%")
    return t


def correctness_table(result: dict) -> TextTable:
    t = TextTable("Correctness of OK rows against float64",
                  ["side", "backend", "dtype", "checked", "max abs err", "min cosine", "max err ratio"],
                  right=frozenset({3, 4, 5, 6}))
    for r in result["correctness"]:
        t.add(r["side"], r["backend"], r["dtype"], f"{r['checked']}/{r['rows']}", num(r["max_abs_err"], ".2e"),
              num(r["min_cosine"], ".6f"), num(r["max_err_ratio"], ".2f"))
    return t


def efficiency_table(result: dict) -> TextTable:
    t = TextTable("Efficiency of the winners (% of the measured ceiling; roofline from the FLOP/byte model)",
                  ["side", "mode", "winners", "metric", "median % ceiling", "median % roofline", "memory-bound"],
                  right=frozenset({2, 4, 5, 6}))
    for r in result["efficiency"]["summary"]:
        t.add(r["side"], _mode(r["mode"]), r["winners"], r["metric"], num(r["median_pct_ceiling"], ".0f"),
              num(r["median_roofline_pct"], ".0f"), r["memory_bound"])
    return t
