"""The overview page: the stores, each device and build with its provenance and measured ceilings, attempts
per status, headline numbers and the methodology in brief."""
from __future__ import annotations

from dataclasses import asdict

import pandas as pd

from ....analysis.outcomes import device_counts, status_counts
from ....analysis.overview import on_devices, run_overview
from ....analysis.sections.winners import ALL_SIDES
from ....status import ORDER
from ..context import Context
from ..markup import Col, cards, e, note, num, pct, table
from ..summary_figures import status_bars

FILE, TITLE = "index.html", "Overview"
MODE_NAMES = {"all": "all modes", "train_fwd_bwd": "fwd+bwd", "train_fwd": "fwd"}


def _sources(ctx: Context) -> str:
    cols = [Col("label", "store"), Col("path", "file"), Col("attempts", "attempts", numeric=True),
            Col("devices", "devices"), Col("torch_versions", "torch"), Col("tags", "tags")]
    rows = [{**asdict(s), **{k: ", ".join(getattr(s, k)) for k in ("devices", "torch_versions", "tags")}}
            for s in ctx.data.analysis.sources.rows]
    return table(ctx.table_id(), cols, rows, "The stores this site is built from, one label each")


def _headlines(ctx: Context, overviews: dict) -> str:
    status: dict[str, int] = {}
    for o in overviews.values():
        for k, v in o["status"].items():
            status[k] = status.get(k, 0) + v
    total = sum(status.values())
    items = [(f"{status.get('OK', 0):,}", "OK attempts", f"correct, ran a declared kernel, timed; of {total:,} "
                                                         f"attempts in {len(overviews)} store(s)")]
    sep = ctx.data.analysis.winners.separated
    side = ALL_SIDES if any(s.side == ALL_SIDES for s in sep) else (sep[0].side if sep else None)
    where = "over all stores" if side == ALL_SIDES else f"store {side}"
    for s in [s for s in sep if s.side == side and s.mode != "all"]:
        mode = MODE_NAMES.get(s.mode, s.mode)
        items.append((f"{s.separated}/{s.contested}", f"separated {mode} winners",
                      f"lead ≥ 1.10× and bootstrap lower bound > 1 ({pct(s.fraction)}), {where}"))
    for p in [p for p in ctx.data.analysis.pairs.rows if p.mode == "all"][:3]:
        floor = "noise floor: one GPU model and toolkit" if p.noise_floor else "across stores"
        items.append((f"{p.changed}/{p.shared}", f"winner changes, {p.a} vs {p.b}",
                      f"{p.changed_separated} of {p.separated} separated on both; {floor}"))
    for label, o in overviews.items():
        if o.get("wall_over_timed"):
            items.append((f"×{o['wall_over_timed']:.1f}", f"sweep wall time over timed samples ({label})",
                          f"{o['sweep_wall_s']:.0f} s of run{on_devices(o)} for {o['timed_s']:.1f} s of samples"))
    return cards(items)


def rate(v: float) -> str:
    """A ceiling in a table cell: whole units with thousands separators from 100 up (3,999 GB/s, 763 TFLOP/s),
    three significant digits below (50.7, 0.0523: a CPU's matmul ceiling)."""
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def _builds(ctx: Context) -> str:
    rows, ceil_rows = [], []
    for label, runs in ctx.data.runs.items():
        for r in runs:
            p = r.get("provenance") or {}
            dev, libs = p.get("device") or {}, p.get("libraries") or {}
            if p.get("imported"):
                rows.append({"label": label, "run_id": r["run_id"], "device": r.get("device_name"),
                             "grid": "provenance unknown: no runs export was read beside this store"})
                continue
            cap = dev.get("capability")
            rows.append({"label": label, "run_id": r["run_id"], "device": dev.get("name") or r.get("device_name"),
                         "cc": ".".join(map(str, cap)) if cap else None, "sms": dev.get("sm_count"),
                         "mem": dev.get("total_memory", 0) / 2 ** 30 if dev.get("total_memory") else None,
                         "l2": dev.get("l2_bytes", 0) / 2 ** 20 if dev.get("l2_bytes") else None,
                         "driver": dev.get("driver"), "torch": p.get("torch"), "cuda": p.get("cuda_runtime"),
                         "cudnn": p.get("cudnn"), "triton": libs.get("triton"), "grid": r.get("grid"),
                         "source": (p.get("source_sha256") or "")[:12] or None,
                         "git": (p.get("git_sha") or "")[:12] + ("+dirty" if p.get("git_dirty") else ""),
                         "started": r.get("started_at"), "finished": r.get("finished_at") or "interrupted"})
            c = p.get("ceilings") or {}
            if c:
                ceil_rows.append({"label": label, "run_id": r["run_id"], "device": dev.get("name"), **c})
    cols = [Col("label", "store"), Col("run_id", "run"), Col("device", "device"), Col("cc", "CC"),
            Col("sms", "SMs", numeric=True), Col("mem", "memory GiB", lambda v: f"{v:.0f}", numeric=True),
            Col("l2", "L2 MiB", lambda v: f"{v:.0f}", numeric=True), Col("driver", "driver"), Col("torch", "torch"),
            Col("cuda", "CUDA"), Col("cudnn", "cuDNN"), Col("triton", "Triton"), Col("grid", "grid"),
            Col("source", "source sha256", title="digest of the package's Python files that ran"),
            Col("git", "git sha"), Col("started", "started (UTC)"), Col("finished", "finished (UTC)")]
    out = table(ctx.table_id(), cols, rows, "Devices and builds: every run of every store, with its provenance")
    f = rate  # a CPU's matmul ceiling is a fraction of a TFLOP/s: never "0"
    ccols = [Col("label", "store"), Col("run_id", "run"), Col("device", "device"),
             Col("copy_gbps", "copy GB/s", f, numeric=True, title="device-to-device copy, bytes read + written"),
             Col("read_gbps", "read GB/s", f, numeric=True, title="fastest of three float32 reductions, read only: "
                 "decode's ceiling"),
             Col("dram_peak_gbps", "DRAM GB/s", f, numeric=True, title="theoretical: NVML bus width x max memory "
                 "clock x 2; no row reads faster (docs/method/ceilings.md)"),
             Col("datasheet_tflops_bf16", "bf16 datasheet TFLOP/s", f, numeric=True,
                 title="dense tensor peak at the datasheet's SM clock; rows are judged at their own sampled clock"),
             *[Col(f"matmul_tflops_{d}", f"{d} matmul TFLOP/s", f, numeric=True) for d in ("bf16", "fp16", "fp32")],
             Col("host_op_us", "host µs / eager op", lambda v: f"{v:.2f}", numeric=True,
                 title="the host's time to issue one small eager op: the pace of host-bound eager rows")]
    return out + table(ctx.table_id(), ccols, ceil_rows,
                       "Measured ceilings of each run: what % of ceiling divides by (matmul rate of the row's dtype; "
                       "read bandwidth for decode)")


def _statuses(ctx: Context, overviews: dict) -> str:
    out = []
    for label in ctx.data.labels:
        d = ctx.data.df[ctx.data.df["label"] == label]
        counts = status_counts(d)
        if counts.empty:
            out.append(note(f"Store {label} holds no attempts."))
            continue
        frame = counts.reset_index().melt(id_vars="backend", var_name="status", value_name="attempts")
        frame = frame[frame["attempts"] > 0].reset_index(drop=True)
        title = f"Attempts per backend and status, store {label}"
        statuses = [s for s in ORDER if s in counts.columns]
        caption = ("Every attempt is one row with one status: " + ", ".join(
            f"{s} {overviews[label]['status'].get(s, 0):,}" for s in statuses) + ". Nothing is left out: an "
            "unsupported or failed attempt is counted here and listed with its reason on the tables page.")
        out.append(ctx.figs.add(status_bars(frame, title), frame, f"{label}-status", title,
                                f"store {label}, every attempt of every device, workload and repeat", caption))
    return "".join(out)


def _wall(ctx: Context, overviews: dict) -> str:
    """Where each store's sweep wall went (analysis/overview.py: wall_by_phase), one table."""
    rows = []
    for label, o in overviews.items():
        wall = o.get("sweep_device_s") or 0.0  # wall × devices: what the phases' seconds add up to
        for name, sec in o.get("wall_by_phase") or []:
            rows.append({"label": label, "phase": name, "seconds": round(sec, 1),
                         "share": round(sec / wall, 3) if wall else None})
    if not rows:
        return ""
    cols = [Col("label", "store"), Col("phase", "phase"), Col("seconds", "seconds", numeric=True),
            Col("share", "share of the wall", numeric=True)]
    late = [f"store {e(label)}: {o['late_samples']['samples']:,} in {o['late_samples']['rows']:,} OK rows"
            for label, o in overviews.items() if (o.get("late_samples") or {}).get("rows")]
    late_note = ("<p>Graph samples dropped, not timed, because the device reached them before the host had "
            "queued them (<code>late_samples</code>, methodology 4.4): " + "; ".join(late) + ".</p>\n") if late else ""
    return ("<section>\n<h2>Where the sweep's wall went</h2>\n"
            + table(ctx.table_id(), cols, rows, "Timed samples against warm-up, each gate's phases, the time "
                    "between phases and what no attempt holds (worker starts, provenance, releases)")
            + late_note + _device_shares(ctx) + "</section>\n")


def _device_shares(ctx: Context) -> str:
    """How each store's devices shared its attempts (analysis/outcomes.py: device_counts), for the stores
    whose attempts ran on two devices or more; nothing otherwise."""
    rows = []
    for label in ctx.data.labels:
        for (name, index, uuid), r in device_counts(ctx.data.df[ctx.data.df["label"] == label]).iterrows():
            rows.append({"label": label, "device": f"{int(index)} {name}", "uuid": uuid or None,
                         "attempts": int(r["attempts"]), "ok": int(r["OK"]), "wall": round(float(r["wall_s"]), 1),
                         "share": round(float(r["share"]), 3) if pd.notna(r["share"]) else None})
    if not rows:
        return ""
    cols = [Col("label", "store"), Col("device", "device (index, model)"), Col("uuid", "UUID"),
            Col("attempts", "attempts", numeric=True), Col("ok", "OK", numeric=True),
            Col("wall", "attempt wall s", numeric=True), Col("share", "share of the attempts' wall", numeric=True)]
    return table(ctx.table_id(), cols, rows, "How the devices of a sweep over several shared its attempts "
                 "(attempts planned out of a sharded plan ran nowhere and are left out)")


def methodology_brief(ctx: Context) -> str:
    d = ctx.data.analysis.definitions
    return (
        "<section>\n<h2>Methodology in brief</h2>\n"
        "<p>Each attempt (workload × backend × process repeat) ran in an isolated worker, was checked against a "
        "float64 reference before it was timed, had the kernels it launched identified by the profiler, and ended "
        "as exactly one row with a status. Only OK rows carry times.</p>\n<ul>\n"
        f"<li><b>Time</b>: {e(d.time)}; <b>spread</b>: {e(d.spread)}.</li>\n"
        f"<li><b>Separated</b> lead: {e(d.separated)}; {e(d.bootstrap)}.</li>\n"
        f"<li><b>Transfer cost</b>: {e(d.cost)}.</li>\n"
        "<li><b>Throughput</b>: FLOP and byte models of the workload over the median time; % of ceiling divides "
        "by the run's measured matmul rate of the dtype, or for decode by its copy bandwidth.</li>\n</ul>\n"
        '<p>The long form: <a href="methodology.html">Methodology</a> (the rules and the project\'s docs, '
        "copied into this site).</p>\n</section>\n")


def applies(data) -> bool:
    return not data.df.empty


def body(ctx: Context) -> str:
    overviews = {label: run_overview(ctx.data.df[ctx.data.df["label"] == label].reset_index(drop=True), runs)
                 for label, runs in ctx.data.runs.items()}
    cv = []
    for label, o in overviews.items():
        for launch, c in sorted(o["cv_by_launch"].items()):
            cv.append(f"{label} {launch}: median {num(c.get('median'), '.1%')}, p90 {num(c.get('p90'), '.1%')} over "
                      f"{c['pairs']} workload × backend")
    return (_headlines(ctx, overviews) + "<section>\n<h2>Stores</h2>\n" + _sources(ctx) + "</section>\n"
            + "<section>\n<h2>Devices, builds and measured ceilings</h2>\n" + _builds(ctx) + "</section>\n"
            + "<section>\n<h2>Attempts per status</h2>\n" + _statuses(ctx, overviews)
            + (note("Agreement of process repeats (coefficient of variation of per-repeat medians): " + "; ".join(cv))
               if cv else "") + "</section>\n" + _wall(ctx, overviews) + methodology_brief(ctx))

