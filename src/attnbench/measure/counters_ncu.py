"""The Nsight Compute collector: `ncu` around a replay of the attempt's step in a process of its own
(measure/counters_replay.py), profiling only the calls inside the replay's NVTX range; its CSV parsed."""
from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .counters_base import METRICS, SETS, Unreadable

NCU_ENV = "ATTNBENCH_NCU"  # the ncu to run; default: ncu on PATH, else the CUDA toolkit's
CANDIDATES = ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/ncu")
TIMEOUT_S = 240.0  # ncu's start, the replay process's imports and compiles, and every replay pass
RANGE = "attnbench-replay"  # the replay's NVTX push/pop range (measure/counters_replay.py)
# ncu's launch columns of the raw page, each kernel's identity
ID_COLUMNS = {"ID": "id", "Kernel Name": "name", "Grid Size": "grid", "Block Size": "block"}
# unit -> factor to the base unit of what METRICS stores (bytes, nanoseconds, %, Hz)
_UNITS = {"byte": 1.0, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12,
          "nsecond": 1.0, "usecond": 1e3, "msecond": 1e6, "second": 1e9, "ns": 1.0, "us": 1e3, "ms": 1e6,
          "hz": 1.0, "khz": 1e3, "mhz": 1e6, "ghz": 1e9, "cycle/second": 1.0, "cycle/nsecond": 1e9,
          "cycle/usecond": 1e6, "%": 1.0}


def find_ncu() -> str | None:
    named = os.environ.get(NCU_ENV)
    if named:
        return named if Path(named).exists() else None
    return shutil.which("ncu") or next((c for c in CANDIDATES if Path(c).exists()), None)


def _number(text: str, unit: str) -> float | None:
    """A CSV cell as a number in METRICS' base unit: thousands separators dropped; n/a and empty are None."""
    t = (text or "").strip().replace(",", "")
    if not t or t.lower() in ("n/a", "nan", "-"):
        return None
    try:
        v = float(t)
    except ValueError:
        return None
    return v * _UNITS.get((unit or "").strip().lower(), 1.0)


def parse_csv(text: str) -> list[dict]:
    """Kernels of `ncu --csv --page raw` output (one row per profiled kernel, a units row under the header; lines
    of ncu's own (==PROF==, ==WARNING==) and of the profiled process are skipped): each as a dict of METRICS
    names present (base units) plus name, grid and block. Columns it does not know are ignored."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    head = next((i for i, r in enumerate(rows) if "Kernel Name" in r and "ID" in r), None)
    if head is None:
        return []
    header = rows[head]
    body = rows[head + 1:]
    units = body.pop(0) if body and not (body[0][0] if body[0] else "").strip() else [""] * len(header)
    by_metric = {m: f for f, m in METRICS.items()}
    kernels = []
    for r in body:
        if len(r) != len(header) or not r[0].strip():
            continue
        k: dict = {}
        for i, col in enumerate(header):
            if col in ID_COLUMNS:
                k[ID_COLUMNS[col]] = r[i]
            elif col in by_metric:
                k[by_metric[col]] = _number(r[i], units[i] if i < len(units) else "")
        kernels.append(k)
    return kernels


_UNKNOWN = re.compile(r"Failed to find metric (?:regex:\^?)?([A-Za-z0-9_]+)")


def classify(rc: int, out: str, err: str) -> str:
    """Why a profiled replay gave no counters, in one line."""
    both = out + "\n" + err
    if "ERR_NVGPUCTRPERM" in both:
        return ("counters not permitted: ERR_NVGPUCTRPERM (the driver lets only admin processes read GPU "
                "performance counters: RmProfilingAdminOnly=1)")
    failed = next((ln for ln in both.splitlines() if ln.startswith("==REPLAY-ERROR==")), None)
    if failed:
        return f"the replay of the step failed: {failed.removeprefix('==REPLAY-ERROR==').strip()[:240]}"
    for pattern, why in ((r"replay.*(fail|error)|Failed to (profile|replay)", "the profiler could not replay a "
                                                                               "kernel of the step"),
                         (r"No kernels were profiled", "the profiler saw no kernel in the replayed step")):
        m = re.search(pattern, both, re.IGNORECASE)
        if m:
            line = next((ln for ln in both.splitlines() if re.search(pattern, ln, re.IGNORECASE)), "")
            return f"{why}: {line.strip()[:200]}"
    errs = [ln.strip() for ln in both.splitlines() if ln.startswith("==ERROR==") or "Error" in ln]
    last = errs[-1] if errs else next((ln.strip() for ln in reversed(both.splitlines()) if ln.strip()), "")
    return f"ncu exited {rc}: {last[:240]}" if rc else f"no counters in ncu's output: {last[:240]}"


class NcuCollector:
    """Runs `ncu` around `python -m attnbench.measure.counters_replay SPEC`: the same replay for every backend,
    plugin and launch mode, in a process of its own so that the profiler never touches the worker's."""

    name = "ncu"

    def __init__(self, ncu: str | None = None, timeout_s: float = TIMEOUT_S):
        self.ncu = ncu
        self.timeout_s = timeout_s

    def command(self, ncu: str, metrics: list[str], spec_path: str) -> list[str]:
        # --clock-control none: the kernels run at the clocks the timed calls saw, not locked to base (1.35 GHz on
        # the H200 under ncu's default), so the shares describe the row as it was timed
        # application-only: the compiler's worker processes (flex, compile) launch no kernel worth following
        return [ncu, "--csv", "--page", "raw", "--print-units", "base", "--clock-control", "none",
                "--target-processes", "application-only", "--nvtx", "--nvtx-include", f"{RANGE}/",
                "--metrics", ",".join(metrics), sys.executable, "-m", "attnbench.measure.counters_replay", spec_path]

    def collect(self, spec: dict, metric_set: str) -> list[dict]:
        device = spec.get("device", "cpu")
        if not device.startswith("cuda"):
            raise Unreadable(f"counters need a CUDA device; this attempt ran on {device}")
        ncu = self.ncu or find_ncu()
        if not ncu:
            raise Unreadable("no collector: Nsight Compute (ncu) is not installed (or set $ATTNBENCH_NCU)")
        metrics = [METRICS[f] for f in SETS[metric_set]]
        env = dict(os.environ)
        here = str(Path(__file__).resolve().parents[2])  # the folder attnbench is imported from
        env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
        with tempfile.TemporaryDirectory(prefix="attnbench-counters-") as tmp:
            path = Path(tmp) / "spec.json"
            path.write_text(json.dumps(spec))
            for _ in range(3):  # a metric this ncu does not know is dropped (named in the log), then once more
                try:
                    p = subprocess.run(self.command(ncu, metrics, str(path)), capture_output=True, text=True,
                                       timeout=self.timeout_s, env=env)
                except subprocess.TimeoutExpired:
                    raise Unreadable(f"the profiled replay took more than {self.timeout_s:g} s") from None
                except OSError as e:
                    raise Unreadable(f"no collector: {ncu} cannot be run ({e.strerror})") from None
                unknown = set(_UNKNOWN.findall(p.stdout + p.stderr))
                kept = [m for m in metrics if m.split(".")[0] not in unknown]
                if unknown and kept and len(kept) < len(metrics):
                    metrics = kept
                    continue
                break
        kernels = parse_csv(p.stdout)
        if not kernels:
            raise Unreadable(classify(p.returncode, p.stdout, p.stderr))
        return kernels
