"""`attnbench model`: attention inside decoder steps, its share, and the Amdahl prediction beside the
measured end-to-end speedup. Arguments, validation (all before anything is written), progress, table."""
from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from .. import console
from ..files import writable, write_whole
from ..usage import UsageError, csv_list

NAME = "model"
HELP = "attention inside a decoder's train / prefill / decode step; share and Amdahl prediction"
FORMATTER = argparse.RawDescriptionHelpFormatter
DEFAULT_BACKENDS = {"cpu": ("sdpa-flash", "sdpa-math", "reference"),
                    "cuda": ("sdpa-flash", "sdpa-cudnn", "sdpa-efficient", "flex")}
DESCRIPTION = """\
Build a Llama-style decoder (RMSNorm, RoPE, GQA attention, SwiGLU MLP; random
weights, from hidden states to hidden states, nothing downloaded) from a
config of public shape facts, and measure whole steps with each backend's
attention: train (forward + backward + AdamW), prefill (the KV cache filled)
and decode (one token per sequence, the cache append included; eager and, on
CUDA, CUDA graph). Each step is checked against the float64 model first.
Attention's share f of the step is read two ways (profiler kernel families;
the step with attention replaced by a no-op), and the Amdahl prediction 1 /
((1 - f) + f / s), from the kernel-level speedup s that `attnbench run` stored
for the same attention shape (--kernel-db), is set beside the measured speedup
over the baseline. One row per step x backend in the store's model_rows table
(docs/model.md)."""
EPILOG = """\
configs: tiny (CPU default), llama3.1-8b, llama3.1-70b, qwen2.5-7b,
  mistral-7b (sliding window 4096)
examples:
  attnbench model                 # tiny, every step, on CPU in seconds
  attnbench model --config llama3.1-8b --layers 4 --steps prefill \\
      --seqlen 8k,32k --batch 1 --kernel-db kernels.sqlite
  attnbench model --config llama3.1-8b --layers 4 --steps decode \\
      --seqlen 8k --batch 32 --kernel-grid k.yaml   # for attnbench run
  attnbench model --db m.sqlite --show
"""



def add_arguments(m) -> None:
    m.add_argument("--config", default="tiny", help="model config (default tiny; see below)")
    m.add_argument("--layers", type=int, help="decoder layers to build, 1 to the config's own count (default: all of them)")
    m.add_argument("--steps", type=csv_list, default=["train", "prefill", "decode"],
                   help="comma list of train, prefill, decode (default: all)")
    m.add_argument("--backends", type=csv_list, help="comma list (default on CPU: " + ",".join(DEFAULT_BACKENDS["cpu"])
                   + "; on CUDA: " + ",".join(DEFAULT_BACKENDS["cuda"]) + "); the baseline always runs")
    m.add_argument("--baseline", default="sdpa-flash", help="the backend speedups are against (default sdpa-flash)")
    m.add_argument("--seqlen", type=csv_list, help="tokens per sequence (decode: cache length), e.g. 8k,32k "
                                               "(default: 64 for tiny, else 4k)")
    m.add_argument("--batch", type=csv_list, help="sequences per step, comma list (default: 2 for tiny, else 1)")
    m.add_argument("--launch", type=csv_list, help="decode launch: eager, graph (default: eager on CPU, both on CUDA)")
    m.add_argument("--dtype", choices=("fp32", "bf16", "fp16"), help="default fp32 on CPU, bf16 on CUDA")
    m.add_argument("--device", help="cpu, cuda or cuda:N (default: cuda if present, else cpu)")
    m.add_argument("--db", default="attnbench.sqlite", help="store to write model_rows to (default ./attnbench.sqlite)")
    m.add_argument("--kernel-db", metavar="PATH", help="store holding `attnbench run` rows of the same attention "
                                                       "shapes (default: --db)")
    m.add_argument("--kernel-grid", metavar="FILE.yaml", help="write the attention workloads of these steps as a "
                                                              "YAML grid for `attnbench run --config` and exit")
    m.add_argument("--plugin", action="append", default=[], metavar="FILE.py", help="load backends from a file")
    m.add_argument("--tag", default="default", help="sweep label (resume skips rows of the same tag)")
    m.add_argument("--seed", type=int, default=0, help="weight and input seed (default 0)")
    m.add_argument("--tol", type=float, help="error ratio bound against the same-dtype reference model "
                                             "(default: per dtype, as attnbench run)")
    m.add_argument("--max-time", type=float, metavar="S", help="timing budget per step after warm-up")
    m.add_argument("--timeout", type=float, default=600.0, metavar="S",
                   help="seconds a step x backend may take, first step and checks included, before its worker is "
                        "killed and the row is TIMEOUT (default 600)")
    m.add_argument("--compile-cache", metavar="DIR",
                   help="compiler cache of compile-based backends' workers, kept for later runs (as attnbench run's; "
                        "default: a fresh one for this run)")
    m.add_argument("--show", action="store_true", help="print the table of the rows already in --db (of --tag) and "
                                                       "exit; measures nothing, opens the store read-only")


def _lengths(values, what: str) -> list[int]:
    from ...workloads.axes import parse_size

    out = [parse_size(v) for v in values]
    if any(v < 1 for v in out):
        raise UsageError(f"--{what} values must be positive, got {values}")
    return out


def plan(args, device: str):
    """(config, step specs, dtype) from the arguments; UsageError on anything impossible."""
    from ...model.configs import ConfigError, get_config
    from ...model.steps import STEPS, StepSpec, validate

    try:
        cfg = get_config(args.config, args.layers)
    except ConfigError as e:
        raise UsageError(str(e)) from None
    bad = [s for s in args.steps if s not in STEPS]
    if bad:
        raise UsageError(f"unknown step {bad[0]!r}; steps: {', '.join(STEPS)}")
    launches = args.launch or (["eager", "graph"] if device != "cpu" else ["eager"])
    bad = [x for x in launches if x not in ("eager", "graph")]
    if bad:
        raise UsageError(f"unknown launch {bad[0]!r}: use eager or graph")
    tiny = cfg.name == "tiny"
    seqlens = _lengths(args.seqlen or ["64" if tiny else "4k"], "seqlen")
    batches = _lengths(args.batch or ["2" if tiny else "1"], "batch")
    specs = []
    for step in dict.fromkeys(args.steps):
        for b in batches:
            for n in seqlens:
                for launch in (launches if step == "decode" else ["eager"]):
                    spec = StepSpec(step, b, n, launch)
                    why = validate(spec)
                    if why:
                        raise UsageError(why)
                    specs.append(spec)
    dtype = args.dtype or ("fp32" if device == "cpu" else "bf16")
    return cfg, specs, dtype


def write_kernel_grid(path: Path, cfg, specs, dtype) -> int:
    """The YAML grid of the attention workloads the steps call (one per spec), for attnbench run."""
    import yaml

    from ...model.steps import attention_workload

    keep = ("mode", "batch", "q_len", "kv_len", "q_heads", "kv_heads", "head_dim", "head_dim_v", "dtype", "causal",
            "launch")
    ws = list(dict.fromkeys(attention_workload(cfg, s, dtype) for s in specs))
    body = {"name": f"model-{cfg.name}", "workloads": [{k: getattr(w, k) for k in keep} for w in ws]}
    write_whole(path, yaml.safe_dump(body, sort_keys=False))  # a full disk: one line, nothing half-written
    return len(ws)


def run(args) -> int:
    from ...backends.registry import select
    from ...measure.timing import TimingConfig
    from ...runner.conduct import conduct
    from ...runner.executors.local import LocalConfig, LocalExecutor
    from ...runner.jobs_model import ModelRequest
    from ...runner.options import check_device, default_device
    from ...store import model_rows
    from ...store.db import Store

    if args.show:
        return _show(args)
    device = check_device(args.device or default_device())
    cfg, specs, dtype = plan(args, device)
    if args.kernel_grid:
        path = writable(args.kernel_grid, "--kernel-grid")  # never a store, its -wal/-shm/-journal or a directory
        n = write_kernel_grid(path, cfg, specs, dtype)
        console.err.print(f"wrote {n} attention workloads to {path}")
        return 0
    for name, v in (("--tol", args.tol), ("--max-time", args.max_time), ("--timeout", args.timeout)):
        if v is not None and not (v > 0 and v != float("inf")):
            raise UsageError(f"{name} must be positive and finite, got {v:g}")
    if not args.tag.strip():
        raise UsageError("--tag is empty")
    names = list(args.backends or DEFAULT_BACKENDS["cpu" if device == "cpu" else "cuda"])
    if args.baseline not in names:
        names.insert(0, args.baseline)
    backends = select(names, args.plugin)
    db = Path(args.db)
    if not args.db.strip() or not db.parent.exists():
        raise UsageError(f"directory of --db does not exist: {db.parent}")
    cache = Path(args.compile_cache) if args.compile_cache else None
    if cache is not None and ((cache.exists() and not cache.is_dir()) or not cache.parent.exists()):
        raise UsageError(f"--compile-cache {cache} is not a directory that exists or can be made")
    kernel_frame = _kernel_frame(args, db)  # a bad --kernel-db is refused before the store is opened
    req = ModelRequest(cfg, specs, backends, args.baseline, device, dtype, args.seed, args.tag, kernel_frame,
                       shlex.join(["attnbench"] + list(args.argv)))
    log = db.with_name(db.name + ".log")
    executor = LocalExecutor(LocalConfig(plugins=[str(Path(p).resolve()) for p in args.plugin],
                                         timeout_s=args.timeout, seed=args.seed, tol=args.tol,
                                         timing=TimingConfig.for_device(device, args.max_time), log_path=str(log),
                                         compile_cache=str(cache.resolve()) if cache else None,
                                         ceilings=False),  # only attempts' gates read them
                             device)
    store = Store(db)
    try:
        console.err.print(f"{cfg.name}: {cfg.layers} layers, {dtype}, {len(specs)} steps × {len(backends)} backends "
                          f"on {device}; library output goes to {log.name}")
        with console.err.status("starting") as spinner:
            report = conduct(executor, store, req, _Progress(spinner))
        order = {a.key: i for i, a in enumerate(report.attempts)}
        rows = sorted(model_rows.rows(store.con, "WHERE run_id=?", (report.run_id,)), key=lambda r: order[r["row_key"]])
    finally:
        store.close()
    render(rows, console.out)
    return 0


def render(rows: list[dict], con: Console) -> None:
    """The rows' tables (report/model_table.py)."""
    from ...report.model_table import render as tables

    tables(rows, con)


class _Progress:
    """What the run is doing on the spinner; each row's line as it is written."""

    def __init__(self, spinner):
        self.spinner = spinner

    def starting(self, device: str) -> None:
        self.spinner.update(f"starting workers and reading the device ({device})")

    def begin(self, total: int, resumed: int, retried: int) -> None:
        if resumed:
            self.spinner.update(f"{resumed} of {total} rows already stored, skipped")

    def attempt(self, job, where: str | None = None) -> None:
        self.spinner.update(escape(f"{job.spec.label()}: {job.backend.name}"))  # a plugin's name is text

    def row(self, row: dict) -> None:
        console.err.print(_row_line(row), highlight=False, markup=False)

    def forecast(self, remaining) -> None:
        pass


def _show(args) -> int:
    from ...store import model_rows
    from ...store.db import Store

    store = Store(args.db, readonly=True)
    try:
        rows = model_rows.rows(store.con, "WHERE tag=?", (args.tag,))
    finally:
        store.close()
    if not rows:
        raise UsageError(f"no model rows of tag {args.tag!r} in {args.db}")
    render(rows, console.out)
    return 0


def _kernel_frame(args, db: Path):
    from ...store.db import Store

    path = Path(args.kernel_db) if args.kernel_db else db
    if not args.kernel_db and not path.is_file():
        return None  # nothing measured yet in the default store: no prediction, not an error
    ks = Store(path, readonly=True)
    try:
        return ks.dataframe()
    finally:
        ks.close()


def _row_line(r: dict) -> str:
    from ...report.model_table import label as step_label

    label = step_label(r)
    if r["status"] != "OK":
        return f"{label:<22} {r['backend']:<15} {r['status']}: {r['reason']}"
    return f"{label:<22} {r['backend']:<15} OK {r['median_us'] / 1e3:9.3f} ms/step"
