"""The argument parser of every subcommand, and UsageError (bad input: one line, exit 2)."""
from __future__ import annotations

import argparse

from .. import __version__
from ..status import ORDER
from ..workloads.axes import NAMES as AXIS_NAMES
from ..workloads.grids import GRIDS

DEFAULT_DB = "attnbench.sqlite"
EPILOG = f"""Every attempt (workload × backend × repeat) becomes exactly one row with a status:
{", ".join(ORDER[:-1])} or {ORDER[-1]}.
Typical use:
  attnbench run                       # the smoke grid on CPU, the quick grid on a CUDA device
  attnbench run --grid quick --repeats 3
  attnbench run --devices all         # every GPU of this host
  attnbench run --executor ray --address auto   # every GPU of a Ray cluster
  attnbench show --db attnbench.sqlite
Bad input exits with code 2 and writes nothing."""


class UsageError(Exception):
    """Bad input: one line, exit code 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2, no usage dump
        raise UsageError(message)


def _csv(s: str) -> list[str]:
    items = [x.strip() for x in s.split(",") if x.strip()]
    if not items:  # an empty list would silently mean "no filter": everything
        raise argparse.ArgumentTypeError(f"{s!r} names nothing")
    return items


def build_parser() -> Parser:
    p = Parser(prog="attnbench", description="Truthful attention-kernel benchmarks.", epilog=EPILOG,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"attnbench {__version__}")
    p.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND", parser_class=Parser)

    r = sub.add_parser("run", help="measure a grid of workloads over the available backends (resumes)",
                       description="Plan grid × backends × repeats, check each attempt against float64, "
                                   "probe the kernels it ran, time it, and store one row per attempt. "
                                   "Running the same command again resumes: finished attempts are skipped.")
    r.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                   help="more logging, workers included (-vv for debug)")
    src = r.add_mutually_exclusive_group()
    src.add_argument("--grid", help=f"named grid: {', '.join(GRIDS)} (default: smoke on CPU, quick on CUDA)")
    src.add_argument("--config", metavar="FILE.yaml", help="a YAML grid (see docs/grids.md)")
    r.add_argument("--backends", type=_csv, help="comma list of backend names (default: all)")
    r.add_argument("--modes", type=_csv, help="keep only these modes (train_fwd,train_fwd_bwd,prefill,decode)")
    r.add_argument("--device", help="cpu, cuda or cuda:N (default: cuda if present, else cpu)")
    r.add_argument("--devices", metavar="all|0,1,...",
                   help="run on several devices at once, one warm worker set per device pinned to host cores of "
                        "its own, each pulling whole (repeat, workload) groups: all (every visible GPU), CUDA indices "
                        "(0,1), or cpu:0,cpu:1 (fake CPU devices, for tests and laptops); the plan is sharded "
                        "(attempt keys as on one device) unless --replicate")
    r.add_argument("--replicate", action="store_true",
                   help="with --devices: every device runs the whole plan, its attempts keyed by the device's UUID "
                        "(their comparison is the method's noise floor)")
    r.add_argument("--executor", choices=("local", "ray"), default="local",
                   help="where attempts run: local (default: worker processes on this host, --device or --devices) "
                        "or ray (one Ray actor per GPU of a Ray cluster, each with its own warm workers; the plan is "
                        "sharded per GPU model, or run whole on every GPU with --replicate; rows are written here, "
                        "an actor lost mid-attempt has its attempts run again; needs pip install 'attnbench[ray]'). "
                        "With ray, --devices is all (default) or cpu:0,cpu:1 (fake CPU devices)")
    r.add_argument("--address", metavar="ADDR",
                   help="with --executor ray: the Ray cluster to join (auto: the one `ray start` runs on this host; "
                        "HOST:PORT or ray://HOST:10001: a head, which must answer within 5 s); default: start a "
                        "local Ray instance for this run")
    r.add_argument("--db", default=DEFAULT_DB, help=f"SQLite store (default: ./{DEFAULT_DB})")
    r.add_argument("--repeats", type=int, default=3,
                   help="process-level repeats of every attempt (default 3: the fewest from which a lead's "
                        "separation can be judged over repeats, not only over one process's samples)")
    r.add_argument("--plugin", action="append", default=[], metavar="FILE.py",
                   help="load backends from a Python file (BACKENDS list or backends()); repeatable")
    r.add_argument("--seqlen", type=_csv, help="keep only these KV lengths, e.g. 1k,4k")
    r.add_argument("--where", action="append", metavar="AXIS=V1,V2",
                   help="keep only workloads whose AXIS is one of the values; repeatable; AXIS is any workload "
                        f"field ({', '.join(AXIS_NAMES)}), e.g. --where launch=graph --where batch=1,8")
    r.add_argument("--causal", choices=("true", "false", "both"), default="both", help="keep causal, non-causal or both")
    r.add_argument("--dtype", type=_csv, help="keep only these dtypes, e.g. bf16,fp16")
    r.add_argument("--timeout", type=float, default=300.0, metavar="S",
                   help="seconds per attempt, compile included, before the worker is killed (default 300)")
    r.add_argument("--tag", default="default", help="sweep label; a new tag starts a new sweep in the same store")
    r.add_argument("--seed", type=int, default=0, help="input seed (default 0)")
    r.add_argument("--tol", type=float, default=None,
                   help="max error ratio against the same-dtype unfused reference, for every dtype (default: "
                        "per dtype from the measured spread of correct kernels: fp32 16, bf16 and fp16 3; "
                        "fp8_e4m3 2, provisional; "
                        "docs/methodology.md)")
    r.add_argument("--inputs", choices=("normal", "outliers", "large-logits"), default="normal",
                   help="distribution of the inputs that are checked first and timed: normal N(0,1) (default), "
                        "outliers N(0,1)+N(0,100)·Bernoulli(0.001), or large-logits (logits with std ~30); the "
                        "correctness check always also runs the other two")
    r.add_argument("--max-time", type=float, default=None, metavar="S",
                   help="timing budget per attempt after warm-up (default 0.5 s on CUDA, 0.3 s on CPU)")
    r.add_argument("--min-time", type=float, default=None, metavar="S",
                   help="sample every attempt for at least S seconds of timed calls, even once its median has "
                        "converged (more samples of the same block; the budget grows to 2·S if smaller). Default: "
                        "none, the rule stops at convergence. Longer windows see sustained clocks and power, and "
                        "make the sweep's wall mostly samples (docs/methodology.md 4.5)")
    r.add_argument("--strict-isolation", action="store_true",
                   help="a fresh process for every attempt of compile-based backends (slower; default: "
                        "one process per backend and repeat, compiler state reset before each attempt)")
    r.add_argument("--compile-cache", metavar="DIR",
                   help="where torch.compile, Triton and JAX keep compiled code (kept across runs, so cold starts "
                        "after the first are cache hits); default: the sweep's own cache beside the store "
                        "(DB.compile-cache), empty when the sweep starts, kept if the run is interrupted so that "
                        "the resumed run loads what it compiled, and removed once every attempt has a row: the "
                        "first repeat's cold_start_us includes compilation")
    r.add_argument("--dry-run", action="store_true",
                   help="print the plan's counts and an ETA (median wall_s per backend and mode of earlier OK rows "
                        "in --db, else 10 s an attempt) and exit (starts workers to read the device; writes nothing)")
    r.add_argument("--retry-failed", action="store_true",
                   help="on resume, run again the attempts of this tag that ended TIMEOUT, CRASH or ERROR "
                        "(their rows are replaced)")

    b = sub.add_parser("backends", help="list backends: family, role, availability and version",
                       description="List every backend a run could use (built-ins, entry-point plugins and "
                                   "--plugin files): its family, role, whether it is usable here and why not, "
                                   "its library version, devices and isolation.")
    b.add_argument("--plugin", action="append", default=[], metavar="FILE.py",
                   help="also load backends from this Python file; repeatable")
    b.add_argument("--json", action="store_true",
                   help="print JSON instead of a table (with capabilities and declared kernel families)")

    e = sub.add_parser("env", help="print the provenance a run would record",
                       description="Collect, as JSON, what a run records about where it runs: device, driver, "
                                   "toolkit, library versions, source revision, timer overhead and the measured "
                                   "ceilings (copy and read bandwidth, matmul rate per dtype).")
    e.add_argument("--device", help="cpu, cuda or cuda:N (default: cuda if present, else cpu)")
    e.add_argument("--no-ceilings", action="store_true", help="skip measuring copy bandwidth and matmul rate")

    s = sub.add_parser("show", help="best backend per workload: time, TFLOP/s or GB/s, %% of ceiling",
                       description="The fastest contestant per device and workload (median of per-repeat "
                                   "medians), its throughput and share of the measured ceiling, the runner-up "
                                   "and whether the lead is clear; then the run overview. Opens the store "
                                   "read-only.")
    s.add_argument("--db", default=DEFAULT_DB, help=f"the store to read (default: ./{DEFAULT_DB})")
    s.add_argument("--all", action="store_true", help="include accuracy references in the contest")
    s.add_argument("--status", action="store_true", help="also print attempts per backend and status, where the sweep's wall went, and (several devices) attempts and wall per device")
    s.add_argument("--where", action="append", metavar="AXIS=V1,V2",
                   help="keep only workloads whose AXIS is one of the values; repeatable (see run --where)")
    s.add_argument("--backend", dest="backends", type=_csv, metavar="NAMES",
                   help="keep only these backends (comma list)")
    s.add_argument("--rank", action="store_true", help="every backend of every workload, fastest first")
    s.add_argument("--failures", action="store_true",
                   help="every attempt that did not end OK, with its status and reason")
    s.add_argument("--format", choices=("table", "csv", "md", "json"), default="table",
                   help="table (default; compact below 160 columns) or the same results as csv, md or json")
    s.add_argument("--wide", action="store_true", help="every column even on a narrow terminal")
    s.add_argument("--tag", dest="tags", action="append", metavar="TAG",
                   help="keep only attempts whose sweep tag (run --tag) is TAG; repeatable (any of them); "
                        "a tag no attempt has is an error")

    x = sub.add_parser("export", help="write the attempts (or runs) table to jsonl, csv or parquet; "
                                      "a name ending in .gz is gzip-compressed (jsonl, csv)",
                       description="Write a table of a store to a file, every column of docs/schema.md, raw "
                                   "samples included, so a result stands alone. The file appears complete or "
                                   "not at all; an export never overwrites a store.")
    x.add_argument("--db", default=DEFAULT_DB, help=f"the store to read (default: ./{DEFAULT_DB})")
    x.add_argument("--format", choices=("jsonl", "csv", "parquet"), help="default: from the --out name")
    x.add_argument("--out", required=True, metavar="FILE",
                   help="the file to write, e.g. results.jsonl.gz (its suffix gives the format)")
    x.add_argument("--table", choices=("attempts", "runs", "model_rows"), default="attempts",
                   help="runs: one row per invocation with its provenance (device, toolkit, ceilings); "
                        "model_rows: the rows of `attnbench model`")
    x.add_argument("--tag", dest="tags", action="append", metavar="TAG",
                   help="keep only rows (attempts, or runs with --table runs) whose sweep tag is TAG; repeatable "
                        "(any of them); a tag no row of the table has is an error and nothing is written")

    i = sub.add_parser("import", help="read an export back into a store (existing attempts and runs are kept)",
                       description="Add the rows of an export to a store (created if absent). Every row is "
                                   "validated first (statuses, JSON columns, what each status must carry); "
                                   "one bad row and nothing is written. Attempts already in the store are kept.")
    i.add_argument("file", help="an export of attnbench (jsonl, csv or parquet, optionally .gz)")
    i.add_argument("--db", default=DEFAULT_DB, help=f"the store to add to (default: ./{DEFAULT_DB})")
    i.add_argument("--format", choices=("jsonl", "csv", "parquet", "table"),
                   help="default: from the file name; table: another tool's results as CSV (docs: "
                        "attnbench.store.table_import)")
    i.add_argument("--table", choices=("attempts", "runs", "model_rows"), default="attempts",
                   help="which table the file holds (default attempts; runs: an export made with --table runs)")

    from .comparison_args import add_comparison_commands  # analyze, compare, advise

    add_comparison_commands(sub)

    from .model_cmd import add_model_command  # model: attention inside decoder steps

    add_model_command(sub)

    from .report_cmd import REPORT_HELP

    h = sub.add_parser("report", help="an offline HTML site and publication figures (SVG, PDF, data) of stores",
                       description="Build a static site from one or more stores or exports: each device and\n"
                                   "build with its ceilings, attempts per status, prefill/training and decode\n"
                                   "figures, portability across the stores, and the correctness, dispatch and\n"
                                   "outcome tables. It renders what the analysis computes; nothing is fetched.",
                       epilog=REPORT_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    h.add_argument("stores", nargs="+", metavar="STORE", help="an attnbench store or export, or LABEL=STORE")
    h.add_argument("--out", required=True, metavar="DIR", help="the directory to write the site to")
    h.add_argument("--baseline", metavar="BACKEND",
                   help="the backend speedup heatmaps divide by (default: sdpa-flash where it ran OK, else the "
                        "backend with the most OK rows)")
    h.add_argument("--title", help="the site's title (default: the store labels)")
    return p
