"""Per attempt, what re-measures it (issue 42.4): the `attnbench run` command, the YAML grid block of its
workload (every axis, so the block names exactly its workload key) and the versions it ran under."""
from __future__ import annotations

import shlex

import pandas as pd

from ..workloads import Workload
from ..workloads.axes import AXES

# `attnbench run`'s options (cli/commands/run.py; analysis sits below cli, so tests/test_repro.py checks these
# two tables against run's own argparse parser): name -> how many values it takes (None: an optional one).
# Those that choose what is measured or where rows go: the repro gives its own.
_SELECTING = {"--grid": 1, "--config": 1, "--where": 1, "--seqlen": 1, "--modes": 1, "--dtype": 1, "--causal": 1,
              "--backends": 1, "--db": 1, "--tag": 1, "--repeats": 1, "--devices": 1, "--address": 1,
              "--executor": 1, "--replicate": 0, "--retry-failed": 0, "--take-over-claims": 0, "--dry-run": 0,
              "--fresh-inputs": 0, "-v": 0, "--verbose": 0, "-h": 0, "--help": 0}
# Those that shape a measurement: kept.
MEASURING = {"--seed": 1, "--inputs": 1, "--tol": 1, "--max-time": 1, "--min-time": 1, "--plugin": 1,
             "--timeout": 1, "--strict-isolation": 0, "--device": 1, "--compile-cache": 1, "--exclusive": 0,
             "--counters": None}
VERSION_COLUMNS = ("device_name", "torch_version", "backend_version", "cuda_runtime", "cudnn_version",
                   "driver_version", "attnbench_sha")


def kept_options(argv: str | None) -> list[str]:
    """The stored `attnbench run` command line's options that shape a measurement (MEASURING), in order; none
    when the stored command is not `run` (rows written by `referee`, `selftest`, `model`), and no word that
    run does not accept (-vv, a stray positional)."""
    words = shlex.split(argv or "")[1:]  # the program's name first
    while words and words[0].startswith("-"):  # attnbench's own options before the command (-v, -vv)
        words = words[1:]
    if not words or words[0] != "run":
        return []
    words, out, i = words[1:], [], 0
    while i < len(words):
        name, inline = words[i].split("=", 1)[0], "=" in words[i]
        arity = MEASURING.get(name, _SELECTING.get(name, 0))
        if arity is None:  # an optional value: the next word when it is not an option
            arity = int(not inline and i + 1 < len(words) and not words[i + 1].startswith("-"))
        take = words[i:i + 1 + (0 if inline else arity)]
        if name in MEASURING:
            out += take
        i += len(take)
    return out


def workload_of(row: dict) -> Workload:
    """The row's workload from its axis columns (a boolean axis is stored 0/1, an integer one may read as float)."""
    return Workload.from_dict({a.name: a.type(_plain(row[a.name])) for a in AXES
                               if a.name in row and _present(row[a.name])})


def yaml_block(w: Workload) -> str:
    """The workload as one block of a YAML grid (docs/grids.md): every axis at its value."""
    import yaml

    doc = {"name": f"repro-{w.key()[:8]}", "workloads": [{a.name: getattr(w, a.name) for a in AXES
                                                           if getattr(w, a.name) is not None}]}
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=False).strip()


def options(row: dict, run: dict) -> list[str]:
    """The command's measuring options: the run's kept options, and --device where it gave none."""
    opts = kept_options(run.get("argv"))
    if not any(o.split("=", 1)[0] == "--device" for o in opts):
        opts += ["--device", "cpu" if str(row.get("device_name", "")).upper().startswith("CPU") else "cuda"]
    return opts


def command(row: dict, run: dict, w: Workload) -> str:
    return _command(w.key(), str(row["backend"]), shlex.join(options(row, run)))


def _command(key: str, backend: str, opts: str) -> str:
    """shlex.join of the command's words (a workload key is hex: no quoting), `opts` already joined."""
    return (f"attnbench run --config repro-{key[:8]}.yaml --backends {shlex.quote(backend)} --repeats 1 "
            f"--tag repro-{key[:8]} --db repro.sqlite" + (f" {opts}" if opts else ""))


def versions(row: dict, run: dict) -> str:
    prov = run.get("provenance") or {}
    parts = [f"{c}={_plain(row[c])}" for c in VERSION_COLUMNS if c in row and _present(row[c])]
    libs = prov.get("libraries") or {}
    parts += [f"{k}={v}" for k, v in sorted(libs.items()) if v and k != "torch"]
    return " ".join(parts)


def repro_frame(df: pd.DataFrame, runs: list[dict]) -> pd.DataFrame:
    """One row per attempt: attempt_key, backend, status, workload_key, the label, command, yaml, versions.
    Each distinct workload's block and key, each run's options and each versions line are made once (a
    study's 13k failed attempts are ~500 workloads of ~15 runs: one YAML dump per row took ~14 s)."""
    by_id = {r.get("run_id"): r for r in runs}
    names = [a.name for a in AXES if a.name in df.columns]
    versions_of = [c for c in VERSION_COLUMNS if c in df.columns]
    cols = list(dict.fromkeys([c for c in ("attempt_key", "backend", "status", "run_id") if c in df.columns]
                              + names + versions_of))
    blocks: dict = {}  # the workload's present axis values -> (key, label, YAML block)
    joined: dict = {}  # (run_id, on CPU) -> the command's options, quoted and joined
    ran_under: dict = {}
    out = []
    for row in df[cols].to_dict("records"):
        values = tuple((n, row[n]) for n in names if _present(row[n]))
        got = blocks.get(values)
        if got is None:
            w = workload_of(row)
            got = blocks[values] = (w.key(), w.label(), yaml_block(w))
        key, label, block = got
        run_id = row.get("run_id")
        cpu = str(row.get("device_name", "")).upper().startswith("CPU")
        opts = joined.get((run_id, cpu))
        if opts is None:
            opts = joined[(run_id, cpu)] = shlex.join(options(row, by_id.get(run_id, {})))
        seen = (run_id, *(row[c] if _present(row[c]) else None for c in versions_of))
        line = ran_under.get(seen)
        if line is None:
            line = ran_under[seen] = versions(row, by_id.get(run_id, {}))
        out.append({"attempt_key": row.get("attempt_key"), "backend": row["backend"], "status": row.get("status"),
                    "workload_key": key, "workload": label,
                    "command": _command(key, str(row["backend"]), opts),
                    "yaml": block, "versions": line})
    return pd.DataFrame(out, columns=["attempt_key", "backend", "status", "workload_key", "workload", "command",
                                      "yaml", "versions"])


def _present(v) -> bool:
    return v is not None and not (isinstance(v, float) and v != v)


def _plain(v):
    """numpy scalars as Python values (a stored bool column reads back as 0/1)."""
    return v.item() if hasattr(v, "item") else v
