"""`attnbench show` in the terminal: rich tables of winners and outcomes, and the run overview line."""
from __future__ import annotations

import pandas as pd
from rich import box
from rich.markup import escape
from rich.table import Table

from ..analysis.ceilings import flag_lines
from ..analysis.overview import on_devices
from .columns import ALWAYS, workload_columns

KERNEL_NOTE = ("name (kernel): that backend spent most of its device time in this library attention kernel "
               "(dispatch probe), e.g. torch.compile rewriting plain attention into SDPA")
CAVEAT_NOTE = {
    "host-bound": "clear (host-bound), host: ahead by the rule, but the winner or the runner-up is an eager row "
                  "whose median is more than 1.5x its kernels' device time: the lead is the host's Python and "
                  "launch path, not the kernel's",
    "clock": "clear (clock), clock: ahead by the rule, but the two rows ran at SM clocks further apart than the "
             "lead",
}
_RIGHT = frozenset({"median µs", "p95 µs", "kernel µs", "throughput", "% ceiling", "×"})


def _result_columns(best: pd.DataFrame) -> tuple[str, ...]:
    # kernel time comes from the CUDA profiler: a column of dashes on CPU would only cost width
    kernel = "kernel_us" in best.columns and best["kernel_us"].notna().any()
    bound = "bound" in best.columns and best["bound"].notna().any()  # issue 39: rows with counters
    return ("best", "median µs", "p95 µs", *(("kernel µs",) if kernel else ()), "throughput", "% ceiling",
            "runner-up", "×", "clear", *(("bound",) if bound else ()))


def _clear(r) -> str:
    if not r.get("clear"):
        return "noisy" if r.get("separated") and isinstance(r.get("noise"), str) else "no"
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


WIDE_COLUMNS = 160  # a terminal at least this wide gets every column; narrower ones the compact table
CEILING_NOTE = {
    "decode": "% ceiling of decode rows is of the measured read bandwidth (the fastest of three reductions; "
              "the copy's, bytes read + written, where a store has none): a kernel streaming better can exceed "
              "100%, up to the DRAM's theoretical bandwidth (runner/gates.py)",
    "cpu": "% ceiling on a CPU is of one 512^3 matmul per dtype, a rough figure: a kernel computing in a "
           "faster precision than its inputs can exceed it",
}


def _cells(r, workload, results) -> list[str]:
    pct, ratio, kernel = r.get("pct_ceiling"), r.get("ratio"), r.get("kernel_us")
    winner, runner_up = _labels(r)
    value = {"best": winner, "median µs": f"{r['median_us']:.1f}", "p95 µs": f"{r['p95_us']:.1f}",
             "kernel µs": f"{kernel:.1f}" if pd.notna(kernel) else "-",
             "throughput": f"{r['value']:.3g} {r['metric']}", "% ceiling": f"{pct:.0f}%" if pd.notna(pct) else "-",
             "runner-up": runner_up, "×": f"{ratio:.2f}" if pd.notna(ratio) else "-", "clear": _clear(r),
             "bound": r["bound"] if isinstance(r.get("bound"), str) else "-"}
    return [c.text(r) for c in workload] + [value[c] for c in results]


def fastest_table(best: pd.DataFrame, source, wide: bool = True, width: int = 100) -> Table:
    """best_per_workload's frame as a table: the workload, its winner and how far ahead it is.
    wide=False (a narrow terminal, a CI log: fits 100 columns) writes each workload as one short
    label of the fields that differ between rows, states the rest once in the caption, and drops p95
    and kernel time; names are never cut."""
    order = [c for c in ("device_name", "mode", "launch", "causal", "dtype", "head_dim", "batch", "kv_len", "q_len")
             if c in best.columns]
    best = best.sort_values(order, kind="stable") if len(best) else best  # a reader scans by workload
    if not wide:
        return _compact_table(best, source, width)
    workload = workload_columns(best)
    results = _result_columns(best)
    t = Table(title=f"Fastest backend per workload ({escape(str(source))}; median of per-repeat medians; clear = "
                    "≥10% ahead of the runner-up and the 95% bootstrap lower bound of that ratio > 1)")
    t.add_column("device")
    for c in workload:
        t.add_column(c.title(), justify="right" if c.right else "left")
    for c in results:
        t.add_column(c, justify="right" if c in _RIGHT else "left")
    for _, r in best.iterrows():
        t.add_row(escape(str(r["device_name"])), *(escape(x) for x in _cells(r, workload, results)))
    return t


_MODE = {"train_fwd": "fwd", "train_fwd_bwd": "fwd+bwd", "prefill": "prefill", "decode": "decode"}


def _short(n) -> str:
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else str(n)


def _label_parts(r, extra) -> dict[str, str]:
    """Short text of each workload field, keyed by what it names; `extra`: the table's columns of
    further axes (head_dim_v, layout, l2, ...) that differ between its rows."""
    mask = "causal" + ("-tl" if r["causal_align"] == "top_left" else "") if r["causal"] else "full"
    # decode has one query token: its length is the cache's
    same = r["q_len"] == r["kv_len"] or r["mode"] == "decode"
    n = _short(r["kv_len"]) if same else f"{_short(r['q_len'])}/{_short(r['kv_len'])}"
    parts = {"mode": _MODE.get(r["mode"], r["mode"]), "B": f"B{r['batch']}", "N": f"N{n}",
             "H": f"H{r['q_heads']}/{r['kv_heads']}", "D": f"D{r['head_dim']}", "dtype": str(r["dtype"]),
             "mask": mask, "launch": str(r["launch"])}
    for c in extra:
        parts[c.title()] = f"{c.title()}={c.text(r)}"
    return parts


def workload_label(r) -> str:
    """A row's workload in one short line (mode B N H D dtype mask launch)."""
    return " ".join(_label_parts(r, []).values())


def _rate(r) -> str:
    v = r["value"]
    if r["metric"] == "TFLOP/s":
        return f"{v:.3g} TF/s"
    return f"{v:.3g} GB/s" if v < 1000 else f"{v / 1000:.3g} TB/s"


def _compact_table(best: pd.DataFrame, source, width: int) -> Table:
    extra = [c for c in workload_columns(best) if c not in ALWAYS]
    labels = [_label_parts(r, extra) for _, r in best.iterrows()]
    keys = list(dict.fromkeys(k for lab in labels for k in lab))
    same = [k for k in keys if len({lab.get(k) for lab in labels}) == 1] if len(labels) > 1 else []
    devices = sorted(set(best["device_name"].astype(str)))
    shared = ([devices[0]] if len(devices) == 1 else []) + [labels[0][k] for k in same]
    t = Table(title=f"Fastest backend per workload ({escape(str(source))})", box=None, pad_edge=False,
              header_style="bold underline",
              padding=(0, 0, 0, 1),
              caption=("every row: " + escape(" ".join(shared)) + "; " if shared else "")
              + "median of per-repeat medians; clear: ≥10% ahead and 95% bootstrap bound > 1")
    if len(devices) > 1:
        t.add_column("device")
    t.add_column("workload")
    names = {"best": [_labels(r)[0] for _, r in best.iterrows()], "runner-up": [_labels(r)[1] for _, r in best.iterrows()]}
    bound = "bound" in best.columns and best["bound"].notna().any()  # issue 39: the winner's bound, from counters
    for c in ("best", "µs", "rate", "%", "×", "runner-up", "clear", *(("bound",) if bound else ())):
        # a name keeps its whole width (the workload label wraps instead); it folds only past 30 characters
        t.add_column(c, justify="right" if c in ("µs", "rate", "%", "×") else "left", overflow="fold",
                     no_wrap=c not in names and c != "rate",  # "49.3 GB/s" may break at its space
                     min_width=min(30, max(map(len, names[c]))) if c in names else (5 if c == "clear" else None))
    for (_, r), lab in zip(best.iterrows(), labels):
        pct, ratio = r.get("pct_ceiling"), r.get("ratio")
        winner, runner_up = _labels(r)
        t.add_row(*([escape(str(r["device_name"]))] if len(devices) > 1 else []),
                  escape(" ".join(v for k, v in lab.items() if k not in same)), escape(winner), f"{r['median_us']:.1f}",
                  _rate(r), f"{pct:.0f}%" if pd.notna(pct) else "-", f"{ratio:.2f}" if pd.notna(ratio) else "-",
                  escape(runner_up), _clear(r).replace("yes (host-bound)", "host").replace("yes (clock)", "clock"),
                  *((r["bound"] if isinstance(r.get("bound"), str) else "-",) if bound else ()))
    # the workload label is the one column that wraps: it gets what the others leave of the width
    # (rich's own share-out can leave a table one column wider than the terminal)
    others = sum(max([len(str(c.header))] + [len(str(x)) for x in c._cells]) + 1 for c in t.columns[1:])
    t.columns[0].max_width = max(10, width - others - 1)
    return t


def noise_notes(best: pd.DataFrame, most: int = 8) -> list[str]:
    """For each lead withheld as noisy: which line's numbers cannot carry it, and why."""
    if "noise" not in best.columns or "separated" not in best.columns:
        return []
    noisy = best[best["separated"].fillna(False).astype(bool) & best["noise"].notna()]
    if noisy.empty:
        return []
    lines = [f"noisy: {len(noisy)} lead(s) pass the separation rule on numbers too noisy to carry them, so "
             "clear is withheld (analysis/stats.py NOISY_*):"]
    for _, r in noisy.head(most).iterrows():
        lines.append(escape(f"  {r['mode']} B{r['batch']} N{_short(r['kv_len'])} {r['launch']}: {r['noise']}"))
    if len(noisy) > most:
        lines.append(f"  ... and {len(noisy) - most} more (show --format json holds every reason)")
    return ["\n".join(lines)]


# dtypes judged by the fp8 contract (measure/correctness.py: CONTRACT; issue 40); torch-free import
PROVISIONAL_DTYPES = ("fp8_e4m3",)
PROVISIONAL_NOTE = ("fp8_e4m3 rows: judged by the fp8 contract, output RMS error within 1.5x its declared "
                    "quantisation scheme's emulated error (check_detail fp8, column fp8_ratio; docs/method/fp8.md)")


def ceiling_notes(best: pd.DataFrame, device_types: dict) -> list[str]:
    """Why a shown % ceiling can exceed 100%, for the cases the table holds."""
    over = best[pd.to_numeric(best.get("pct_ceiling"), errors="coerce") > 100] if len(best) else best
    notes = []
    if len(over) and (over["mode"] == "decode").any():
        notes.append(CEILING_NOTE["decode"])
    if len(over) and any(device_types.get(d) == "cpu" for d in over["device_name"]):
        notes.append(CEILING_NOTE["cpu"])
    return notes


def overview_line(o: dict) -> str:
    """attempts per status; sweep wall over timed device time; agreement of repeats per launch mode."""
    parts = [f"{o['attempts']} attempts (" + ", ".join(f"{k} {v}" for k, v in sorted(o["status"].items())) + ")"]
    if o.get("wall_over_timed"):
        parts.append(f"sweep wall {o['sweep_wall_s']:.0f} s{on_devices(o)} for {o['timed_s']:.1f} s of timed samples "
                     f"(×{o['wall_over_timed']:.1f})")
    elif o.get("ok_rows_without_samples"):
        parts.append(f"sweep wall over timed unknown: {o['ok_rows_without_samples']} OK rows hold no samples")
    for launch, c in o.get("cv_by_launch", {}).items():
        parts.append(f"{launch}: CV of per-repeat medians {100 * c['median']:.1f}% median, "
                     f"{100 * c['p90']:.1f}% p90 over {c['pairs']} backend×workload")
    return "; ".join(parts)


def status_table(counts: pd.DataFrame) -> Table:
    """status_counts' frame: attempts per backend (rows) and status (columns)."""
    t = Table(title="Attempts per backend and status")
    t.add_column("backend", overflow="fold")
    for c in counts.columns:
        t.add_column(escape(str(c)), justify="right")
    for name, row in counts.iterrows():
        t.add_row(escape(str(name)), *(str(int(v)) for v in row.values))
    return t


def device_table(devices: pd.DataFrame) -> Table:
    """device_counts' frame: attempts, OK rows, attempt wall and its share per device (index, model,
    UUID's start)."""
    t = Table(title="Attempts per device")
    for c in ("device", "attempts", "OK", "attempt wall s", "share"):
        t.add_column(c, justify="left" if c == "device" else "right", overflow="fold")
    for (name, index, uuid), r in devices.iterrows():
        label = f"{int(index)} {name}" + (f" {uuid[:12]}…" if uuid else "")
        t.add_row(escape(label), str(int(r["attempts"])), str(int(r["OK"])), f"{r['wall_s']:.1f}",
                  f"{100 * r['share']:.0f}%" if pd.notna(r["share"]) else "")
    return t


def ranking_table(ranked: pd.DataFrame) -> Table:
    """Every backend of every workload, fastest first within each (per_backend's frame)."""
    t = Table(title="Every backend per workload, fastest first", box=box.SIMPLE_HEAD)
    for c in ("device", "workload", "#", "backend", "median µs", "× best"):
        t.add_column(c, overflow="fold", justify="right" if c in ("#", "median µs", "× best") else "left")
    for (device, key), grp in ranked.groupby(["device_name", "workload_key"], sort=False):
        grp = grp.sort_values("median_us")
        first = grp.iloc[0]
        label = workload_label(first)
        for i, (_, r) in enumerate(grp.iterrows()):
            t.add_row(escape(str(device)) if i == 0 else "", escape(label) if i == 0 else "", str(i + 1),
                      escape(str(r["backend"])), f"{r['median_us']:.1f}", f"{r['median_us'] / first['median_us']:.2f}")
    return t


def show(best: pd.DataFrame, overview: dict, counts: pd.DataFrame | None, source, attempts: int,
         wide: bool = True, device_types: dict | None = None, width: int = 100,
         devices: pd.DataFrame | None = None, load: str = "") -> list:
    """Everything `show` prints, in order: the winners (or why there are none) with the notes that
    apply (`load`, the hosts' load when the runs started, where noisy or host-bound leads are explained),
    the run overview, and the status table when `counts` is given (with the per-device table
    when `devices` has rows)."""
    parts: list = []
    if best.empty:
        parts.append(f"no OK contestant rows in {escape(str(source))} ({attempts} attempts stored)")
    else:
        parts.append(fastest_table(best, source, wide, width))
        parts.extend(ceiling_notes(best, device_types or {}))
        if "dtype" in best.columns and best["dtype"].isin(list(PROVISIONAL_DTYPES)).any():
            parts.append(PROVISIONAL_NOTE)
        if names_a_kernel(best):
            parts.append(KERNEL_NOTE)
        shown: set = set()
        if "caveat" in best.columns:
            shown = {c for c, clear in zip(best["caveat"], best["clear"]) if clear and isinstance(c, str)}
            parts.extend(CAVEAT_NOTE[c] for c in sorted(shown))
        noisy = noise_notes(best)
        parts.extend(noisy)
        if load and (noisy or "host-bound" in shown):
            parts.append(escape(f"host {load} (1-minute load average, provenance host_load_1_5_15): work of "
                                "other processes on the host lands in eager rows' samples"))
    parts.append(escape(overview_line(overview)))
    if counts is not None:
        parts.append(status_table(counts))
        if devices is not None and not devices.empty:
            parts.append(device_table(devices))
        if overview.get("wall_by_phase"):
            parts.append(phase_table(overview["wall_by_phase"], overview.get("sweep_device_s") or 0.0,
                                     overview.get("devices", 1)))
        late = overview.get("late_samples") or {}
        if late.get("rows"):
            parts.append(f"{late['samples']} graph samples in {late['rows']} OK rows were dropped, not timed: the "
                         "device reached them before the host had queued them (late_samples; "
                         "docs/methodology.md 4.4)")
    parts.extend(escape(x) for x in flag_lines(overview))  # issue 39.4-39.5: beside other work, above a ceiling
    return parts


def phase_table(phases: list[tuple[str, float]], wall: float, devices: int = 1) -> Table:
    """Where the sweep's wall went (analysis/overview.wall_by_phase), seconds and share of the wall
    (of the device time, wall × devices, when several devices ran at once)."""
    t = Table(title="Where the sweep's wall went" + (f" (× {devices} devices)" if devices > 1 else ""))
    t.add_column("phase")
    t.add_column("seconds", justify="right")
    t.add_column("share", justify="right")
    for name, sec in phases:
        t.add_row(escape(name), f"{sec:.1f}", f"{100 * sec / wall:.0f}%" if wall else "")
    return t
