"""Runs the selftest: every class's kernel through conduct() on the local executor, as `attnbench run` does,
into a temporary store; one verdict per class."""
from __future__ import annotations

import contextlib
import os
import platform
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..runner.conduct import RunRequest, conduct
from ..runner.options import make_executor, run_options
from ..runner.session import RunSession
from ..store.db import Store
from . import kernels
from . import classes
from .classes import CACHED_CONTROL, CONTROL, Case, Verdict, cases_for, judge

KERNELS = str(Path(kernels.__file__).resolve())


@dataclass
class Result:
    device: str  # as asked: cpu, cuda, cuda:N
    device_name: str
    verdicts: list[Verdict]
    skipped: list[Case]  # the classes this device cannot mean, each with its reason
    control: str  # the honest kernel's status and reason
    wall_s: float
    fresh_inputs: bool  # whether the cache classes' timed calls saw fresh input values (issue 42.2's axis)
    versions: dict = field(default_factory=dict)

    @property
    def caught(self) -> int:
        return sum(v.caught for v in self.verdicts)

    @property
    def ok(self) -> bool:
        """At least one class run, every class caught, and the honest kernel OK (else the gates refuse correct work
        and 'caught' is empty)."""
        return bool(self.verdicts) and self.caught == len(self.verdicts) and self.control.startswith("OK")

    def to_json(self) -> dict:
        return {"device": self.device, "device_name": self.device_name, "caught": self.caught,
                "classes": len(self.verdicts), "detection_rate": round(self.caught / max(len(self.verdicts), 1), 4),
                "passed": self.ok, "control": self.control, "wall_s": round(self.wall_s, 2),
                "fresh_inputs": self.fresh_inputs, "versions": self.versions,
                "verdicts": [v.to_json() for v in self.verdicts],
                "gpu_only": [{"class": c.name, "why": c.gpu_only} for c in self.skipped]}


def run(device: str | None = None, timeout_s: float = 120.0, seed: int = 0, only: list[str] | None = None,
        observer=None) -> Result:
    """Every class the device can mean (or those named in `only`), through the normal gates in the normal workers;
    the attempts' store is temporary (the selftest's rows are no sweep's)."""
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="attnbench-selftest-") as tmp:
        db = Path(tmp) / "selftest.sqlite"
        options = run_options(device=device, db=str(db), repeats=1, timeout_s=timeout_s, seed=seed,
                              plugins=[KERNELS])
        dtype = "cuda" if options.device.startswith("cuda") else "cpu"
        cases = [c for c in cases_for(dtype) if not only or c.name in only]
        if not cases:  # every class named is one this device cannot mean: a pass with nothing run is no pass
            raise ValueError(f"--only: {', '.join(only)} cannot run on {options.device} (GPU only)")
        table = kernels.CUDA if dtype == "cuda" else kernels.CPU
        controls = [CONTROL] + ([CACHED_CONTROL] if any(c.cache for c in cases) else [])
        backends = _backends(controls + [c.backend for c in cases])
        workloads = list(dict.fromkeys(w for b in backends for w in b.only if w in table.values()))
        req = RunRequest(options.label, workloads, backends, 1, "selftest", seed, "normal", "selftest",
                         f"attnbench selftest --device {options.device}")
        ledger = Path(tmp) / "ledger.jsonl"
        session = RunSession(options.db, Path(options.log_path), options.cache)
        try:
            with _env(kernels.LEDGER, str(ledger)):  # spawned workers inherit it
                executor = make_executor(options)
                conduct(executor, session.store, req, observer)
            session.finished(0)
            rows = _rows(session.store)
            device_name, versions = _device(session.store)
            counts = _ledger(ledger)
        except BaseException:
            session.failed(bad_input=False)
            raise
        finally:
            session.close()
    control = rows.get(CONTROL)
    verdicts = [judge(c, rows.get(c.backend), rows.get(CACHED_CONTROL) if c.cache else control, counts.get(c.backend))
                for c in cases]
    shown = _controls(rows, controls)
    skipped = [c for c in classes.CASES if dtype not in c.devices and (not only or c.name in only)]
    return Result(options.device, device_name, verdicts, skipped, shown, time.monotonic() - began,
                  True, versions)


def _controls(rows: dict, names: list[str]) -> str:
    """"OK" when every honest kernel is OK, else what each that is not got."""
    bad = [f"{n}: {rows[n]['status']} {rows[n].get('reason') or ''}".strip() if n in rows else f"{n}: no row"
           for n in names if n not in rows or rows[n]["status"] != "OK"]
    return "; ".join(bad) if bad else "OK"


@contextlib.contextmanager
def _env(name: str, value: str):
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def _ledger(path: Path) -> dict[str, dict]:
    """Each cache kernel's count of its calls and of those its memo answered (its last attempt's)."""
    import json

    out = {}
    if path.exists():
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            out[entry.pop("backend")] = entry
    return out


def _backends(names: list[str]):
    from ..backends.registry import load_plugin_file

    by_name = {b.name: b for b in load_plugin_file(KERNELS)}
    return [by_name[n] for n in dict.fromkeys(names)]


def _rows(store: Store) -> dict[str, dict]:
    """The run's row of each kernel that ran (planned-out UNSUPPORTED rows are other classes' workloads)."""
    out = {}
    for r in store.attempts():
        if r["status"] == "UNSUPPORTED" and (r.get("reason") or "").startswith("selftest: another"):
            continue
        out[r["backend"]] = r
    return out


def _device(store: Store) -> tuple[str, dict]:
    """The device's name and what the run recorded of the software under test (runs.provenance)."""
    import json

    row = store.con.execute("SELECT device_name, provenance FROM runs ORDER BY rowid DESC LIMIT 1").fetchone()
    if row is None:
        return platform.processor() or "cpu", {}
    prov = json.loads(row[1] or "{}")
    device = prov.get("device") or {}
    found = {"attnbench": prov.get("attnbench_version"), "git_sha": prov.get("git_sha"), "torch": prov.get("torch"),
             "cuda": prov.get("cuda_runtime"), "cudnn": prov.get("cudnn"),
             "triton": (prov.get("libraries") or {}).get("triton"), "driver": device.get("driver"),
             "uuid": device.get("uuid"), "python": prov.get("python")}
    return row[0] or "", {k: v for k, v in found.items() if v is not None}
