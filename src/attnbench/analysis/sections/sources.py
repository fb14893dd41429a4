"""Section `sources`: each store's attempts, devices, toolkits, tags and host pace."""
from __future__ import annotations

from dataclasses import dataclass

from .basis import Basis, RowList

NAME = "sources"


@dataclass(frozen=True)
class SourceFacts:
    """One store (label) as the analysis saw it."""

    label: str
    path: str  # the file it was read from ('' when unknown)
    attempts: int
    devices: list[str]  # device models, sorted
    torch_versions: list[str]
    tags: list[str]  # sweep tags (run --tag)
    host_cpus: list[str]  # host CPU models of the runs with rows here
    host_op_us: list[float] | None  # [min, max] host µs to issue one small eager op; None: not recorded
    runs: int  # runs with rows here
    runs_paced: int  # of those, the runs that recorded their host pace
    # [min, max] over those runs of the host's 1-minute load average when each started (provenance
    # host_load_1_5_15), and the most logical CPUs a host had (provenance host_cpus); None: not recorded. A load near
    # or above the CPU count is why host-bound eager rows come out noisy.
    host_load: list[float] | None = None
    host_cpu_count: int | None = None


@dataclass(frozen=True)
class Sources(RowList):
    rows: list[SourceFacts]  # one per label, in argument order


def run_host(run: dict) -> tuple[set[str], list[float]]:
    """One run's host CPU models (provenance `host_cpu`) and paces (ceilings `host_op_us`: host µs to
    issue one small eager op), where recorded: the run's own, and each of its devices' (`devices`:
    several GPUs, or a Ray cluster's nodes, each measured where it runs)."""
    prov = run.get("provenance") or {}
    cpus, paces = set(), []
    if not isinstance(prov, dict):
        return cpus, paces
    for where in (prov, *(d for d in prov.get("devices") or [] if isinstance(d, dict))):
        if where.get("host_cpu"):
            cpus.add(str(where["host_cpu"]))
        pace = (where.get("ceilings") or {}).get("host_op_us")
        if pace:
            paces.append(float(pace))
    return cpus, paces


def run_load(run: dict) -> tuple[list[float], list[int]]:
    """One run's 1-minute load averages at its start and its hosts' CPU counts, where recorded (the run's own
    provenance and each of its devices', as run_host)."""
    prov = run.get("provenance") or {}
    loads, cpus = [], []
    if not isinstance(prov, dict):
        return loads, cpus
    for where in (prov, *(d for d in prov.get("devices") or [] if isinstance(d, dict))):
        load = where.get("host_load_1_5_15")
        if isinstance(load, (list, tuple)) and load and isinstance(load[0], (int, float)):
            loads.append(float(load[0]))
        if isinstance(where.get("host_cpus"), int):
            cpus.append(where["host_cpus"])
    return loads, cpus


def compute(b: Basis, done: dict) -> Sources:
    out = []
    df = b.df
    for label in b.runs:
        d = df[df["label"] == label]
        ids = set(d["run_id"])
        hosts = [run_host(r) for r in b.runs[label] if r.get("run_id") in ids]
        cpus = sorted(set().union(*(c for c, _ in hosts)))
        paces = [p for _, ps in hosts for p in ps]
        paced = sum(1 for _, ps in hosts if ps)  # runs from before it was recorded have none
        loads = [run_load(r) for r in b.runs[label] if r.get("run_id") in ids]
        load1 = [x for ls, _ in loads for x in ls]
        cpus_n = [n for _, ns in loads for n in ns]
        out.append(SourceFacts(
            label=label, path=str(b.paths.get(label, "")), attempts=int(len(d)),
            devices=sorted(d["device_name"].dropna().astype(str).unique().tolist()),
            torch_versions=sorted(d["torch_version"].dropna().astype(str).unique().tolist()),
            tags=sorted(d["tag"].dropna().astype(str).unique().tolist()), host_cpus=cpus,
            host_op_us=[min(paces), max(paces)] if paces else None, runs=len(ids), runs_paced=paced,
            host_load=[min(load1), max(load1)] if load1 else None, host_cpu_count=max(cpus_n) if cpus_n else None))
    return Sources(out)
