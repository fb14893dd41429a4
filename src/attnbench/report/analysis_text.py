"""The sections of `analyze` as text: one TextTable (or lines) per section, shared by the terminal and
Markdown renderers (report/analyze.py)."""
from __future__ import annotations

from .texttable import TextTable, load_text, num, pct, workload_text

MODE_SHORT = {"train_fwd_bwd": "fwd+bwd", "train_fwd": "fwd"}
PAIR_NOTE = ("floor: one device model and one toolkit on both sides, so its changes are the method's noise "
             "floor; n<5: too few separated workloads to read as a rate")


def _mode(m: str) -> str:
    return MODE_SHORT.get(m, m)


def _methods(m: dict) -> str:
    short = {"paired-repeats": "paired", "pooled-samples": "pooled", "none": "none"}
    # ", " between methods: a narrow column wraps between them, never inside "paired 19"
    return ", ".join(f"{short.get(k, k)} {v}" for k, v in sorted(m.items())) or "-"


def sources_lines(a, names: dict | None = None) -> list[str]:
    """The stores, their devices, toolkits, host pace and host load at start; the hosts' spread (host_pace)
    when it matters. `names`: the short names the tables give the stores (a narrow terminal)."""
    out = [f"analyze by {a.by}: {len(a.sources.rows)} store(s); time = median of per-repeat medians"]
    for s in a.sources.rows:
        pace = s.host_op_us
        host = (f", host {pace[0]:.2f} us/op" if pace[0] == pace[1] else
                f", host {pace[0]:.2f}-{pace[1]:.2f} us/op") if pace else ""
        load = load_text(s.host_load, s.host_cpu_count)
        alias = f"{names[s.label]} = " if names and a.by == "label" and s.label in names else ""
        out.append(f"  {alias}{s.label}: {s.attempts} attempts, {', '.join(s.devices) or 'no device'}, "
                   f"torch {', '.join(s.torch_versions) or '?'}{host}" + (f", {load}" if load else ""))
        if pace and s.runs_paced < s.runs:  # the others' hosts are unknown
            out.append(f"    host pace from {s.runs_paced} of its {s.runs} runs (the others did not record it)")
    note = a.host_pace
    if note:
        out.append(f"  the hosts differ {note.spread:.2f}x in eager-op pace ({note.min_us:.2f}-"
                   f"{note.max_us:.2f} us/op):")
        out.append(f"  {note.host_bound_rows} host-bound eager rows compare hosts as much as devices"
                   + (" (and a loaded host's eager rows are noisy: see each store's load at start)"
                      if any(s.host_load for s in a.sources.rows) else ""))
    if names and a.by != "label":
        out.append(f"  the tables name each {a.by} by letter: "
                   + "; ".join(f"{alias} = {side}" for side, alias in names.items()))
    return out


def _namer(names: dict | None):
    """A side's name in a table: its short alias when `names` gives one (a narrow terminal), else itself."""
    return (lambda side: names.get(side, side)) if names else (lambda side: side)


def winners_table(a, names: dict | None = None) -> TextTable:
    n_ = _namer(names)
    # a contest of imported medians (one sample per repeat, < 3 repeats) has no bootstrap: say so in words
    none = any(s.methods.get("none") for s in a.winners.separated)
    t = TextTable("Separated winners (>= 1.10x ahead, 95% bootstrap lower bound > 1)"
                  + ("; bootstrap none: one sample per repeat and fewer than 3 repeats, separation cannot be "
                     "established" if none else ""),
                  ["side", "mode", "contested", "separated", "bootstrap", "flagged"], right=frozenset({2, 3}))
    for s in a.winners.separated:
        flags = ", ".join(f"{n} {k}" for k, n in (("host-bound", s.host_bound), ("clock-low", s.clock_low)) if n)
        t.add(n_(s.side), _mode(s.mode), s.contested, f"{s.separated} ({pct(s.fraction)})", _methods(s.methods),
              flags or "-")
    return t


def transfer_table(a, all_modes_only: bool = False, names: dict | None = None) -> TextTable:
    n_ = _namer(names)
    pooled = a.transfer.pooled  # every ordered pair pooled, after the pairs
    t = TextTable("Transfer cost: time of the source's winner on the target over the target's fastest"
                  + (f"; (all): the {pooled[0].pairs} ordered pairs pooled" if pooled else ""),
                  ["from", "to", "mode", "n", "unav", "median", "p95", "sep n", "median", "p95"],
                  right=frozenset(range(3, 10)))
    rows = [*a.transfer.rows, *pooled]
    modes = {(r.source, r.target, r.mode) for r in rows}
    for r in rows:
        if all_modes_only and r.mode != "all" and (r.source, r.target, "all") in modes:
            continue
        x, s = r.all, r.separated
        t.add(n_(r.source), n_(r.target), _mode(r.mode), x.n, x.unavailable, num(x.median, ".3f"), num(x.p95, ".3f"),
              s.n, num(s.median, ".3f"), num(s.p95, ".3f"))
    return t


def pairs_table(a, names: dict | None = None) -> TextTable:
    n_ = _namer(names)
    t = TextTable("Winner changes (shared workloads; sep: separated on both sides)",
                  ["a", "b", "mode", "shared", "changed", "sep n", "changed", "note"], right=frozenset(range(3, 7)))
    for r in a.pairs.rows:
        notes = [n for n, on in (("floor", r.noise_floor), ("n<5", r.too_small)) if on]
        t.add(n_(r.a), n_(r.b), _mode(r.mode), r.shared, f"{r.changed} ({pct(r.rate)})", r.separated,
              f"{r.changed_separated} ({pct(r.rate_separated)})", "; ".join(notes) or "-")
    return t


def noise_floor_lines(a) -> list[str]:
    """Per pair of sides that differ by nothing the analysis can name: its change rate and transfer cost."""
    out = []
    transfer = {(r.source, r.target, r.mode): r for r in a.transfer.rows}
    floors = a.pairs.noise_floor
    overall = {(p.a, p.b) for p in floors if p.mode == "all"}
    for p in floors:
        if p.mode != "all" and (p.a, p.b) in overall:
            continue
        costs = [transfer.get((x, y, p.mode)) for x, y in ((p.a, p.b), (p.b, p.a))]
        p95 = " / ".join(num(c.all.p95, ".3f") for c in costs if c)
        out.append(f"noise floor ({p.a} vs {p.b}: one device model, one toolkit): the winner changes on "
                   f"{pct(p.rate)} of {p.shared} workloads, {pct(p.rate_separated)} of {p.separated} "
                   f"separated ones; transfer cost p95 {p95}")
    return out


def changes_table(a, limit: int) -> TextTable:
    changes = a.pairs.changes
    t = TextTable(f"Changed winners ({len(changes)}; first {min(len(changes), limit)})",
                  ["pair", "workload", "winner a", "winner b", "separated", "cost a on b"])
    for c in changes[:limit]:
        t.add(f"{c['a']} / {c['b']}", workload_text(c), c["winner_a"], c["winner_b"],
              f"{'yes' if c['separated_a'] else 'no'} / {'yes' if c['separated_b'] else 'no'}",
              num(c["cost_a_on_b"], ".3f", "unavailable"))
    return t


def outcomes_table(a) -> TextTable:
    statuses = a.outcomes.statuses()
    t = TextTable("Outcomes: attempts per status", ["side", "device", "backend", *statuses],
                  right=frozenset(range(3, 3 + len(statuses))))
    seen = getattr(getattr(a, "dispatch", None), "rows", None) or []
    unchecked = {(r.side, r.backend) for r in seen if getattr(r, "unchecked", 0)}  # issue 42.2
    for r in a.outcomes.rows:
        t.add(r["side"], r["device_name"], r["backend"] + ("?" if (r["side"], r["backend"]) in unchecked else ""),
              *(int(r.get(s) or 0) for s in statuses))
    return t


def dispatch_table(a) -> TextTable:
    marked = any(getattr(r, "unchecked", 0) for r in a.dispatch.rows)  # issue 42.2
    t = TextTable("Dispatch: kernel families seen" + (f"; {UNCHECKED_NOTE}" if marked else ""),
                  ["side", "backend", "reached", "families", "mismatch", "probed"], right=frozenset({2, 4, 5}))
    for r in a.dispatch.rows:
        t.add(r.side, r.backend + ("?" if getattr(r, "unchecked", 0) else ""), r.reached,
              ", ".join(r.families) or "-", f"{r.mismatch_pct:.0f}%", f"{r.probed_pct:.0f}%")
    return t


UNCHECKED_NOTE = "name?: dispatch unchecked (no kernel families declared: its OK rows' kernels were not checked)"


def correctness_table(a) -> TextTable:
    t = TextTable("Correctness of OK rows against float64",
                  ["side", "backend", "dtype", "checked", "max abs err", "min cosine", "max err ratio"],
                  right=frozenset({3, 4, 5, 6}))
    for r in a.correctness.rows:
        t.add(r.side, r.backend, r.dtype, f"{r.checked}/{r.rows}", num(r.max_abs_err, ".2e"), num(r.min_cosine, ".6f"),
              num(r.max_err_ratio, ".2f"))
    return t


def efficiency_table(a) -> TextTable:
    t = TextTable("Efficiency of the winners (% of the measured ceiling; % of the dense peak at the sampled SM "
                  "clock; roofline from the FLOP/byte model)",
                  ["side", "mode", "winners", "metric", "median % ceiling", "median % clock peak",
                   "median % roofline", "memory-bound"], right=frozenset({2, 4, 5, 6, 7}))
    for r in a.efficiency.summary:
        t.add(r.side, _mode(r.mode), r.winners, r.metric, num(r.median_pct_ceiling, ".0f"),
              num(r.median_pct_clock_peak, ".0f"), num(r.median_roofline_pct, ".0f"), r.memory_bound)
    return t


def off_roofline_lines(a, most: int = 10) -> list[str]:
    """Lines off the roofline (analysis/ceilings.py: far below both ceilings while another backend is far
    faster on the same workload), each with its faster alternative; rows measured beside other GPU work."""
    from ..analysis.ceilings import OFF_ROOF_FACTOR, OFF_ROOF_PCT

    eff = a.efficiency
    out = []
    rows = list(eff.off_roofline)
    if rows:
        out.append(f"Off the roofline (below {OFF_ROOF_PCT:g}% of both the clock peak and the read ceiling, while "
                   f"another backend is >= {OFF_ROOF_FACTOR:g}x faster on the same workload):")
        for r in rows[:most]:
            out.append(f"  {r['side']}: {r['backend']} {_mode(r['mode'])} B{r['batch']} Nq{r['q_len']} "
                       f"Nkv{r['kv_len']} {r['dtype']} {r['launch']}: {num(r['pct_compute'], '.1f')}% compute, "
                       f"{num(r['pct_read'], '.1f')}% read; {r['faster']} is {r['lead']:.1f}x faster")
        if len(rows) > most:
            out.append(f"  ... and {len(rows) - most} more (--json: efficiency.off_roofline)")
    for side, n in sorted((eff.shared or {}).items()):
        out.append(f"{side}: {n} OK rows measured while another process was on their GPU (gpu_shared)")
    return out


def side_lines(a) -> list[str]:
    """One line per side: attempts per status, worst error ratio, median % of ceiling per mode (from the
    outcomes, correctness and efficiency sections)."""
    out = []
    status: dict[str, dict] = {}
    for r in a.outcomes.rows:
        d = status.setdefault(r["side"], {})
        for k, v in r.items():
            if k not in ("side", "device_name", "backend", "attempts") and v:
                d[k] = d.get(k, 0) + int(v)
    worst: dict[str, float] = {}
    for r in a.correctness.rows:
        if r.max_err_ratio is not None:
            worst[r.side] = max(worst.get(r.side, 0.0), r.max_err_ratio)
    eff: dict[str, list[str]] = {}
    for r in a.efficiency.summary:
        if r.median_pct_ceiling is not None:
            eff.setdefault(r.side, []).append(f"{r.mode} {r.median_pct_ceiling:.0f}%")
    unchecked: dict[str, list[str]] = {}  # issue 42.2: OK rows no dispatch check stands behind
    for r in getattr(getattr(a, "dispatch", None), "rows", None) or []:
        if getattr(r, "unchecked", 0):
            unchecked.setdefault(r.side, []).append(f"{r.backend}? {r.unchecked}")
    for side, d in status.items():
        out.append(f"{side}: " + ", ".join(f"{k} {v}" for k, v in sorted(d.items()))
                   + (f" (dispatch unchecked: {', '.join(unchecked[side])})" if side in unchecked else "")
                   + f"; worst error ratio {num(worst.get(side), '.2f', 'not checked')}"
                   + (f"; winners' median % of ceiling: {', '.join(eff[side])}" if side in eff else ""))
    return out
