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
        out.append(SourceFacts(
            label=label, path=str(b.paths.get(label, "")), attempts=int(len(d)),
            devices=sorted(d["device_name"].dropna().astype(str).unique().tolist()),
            torch_versions=sorted(d["torch_version"].dropna().astype(str).unique().tolist()),
            tags=sorted(d["tag"].dropna().astype(str).unique().tolist()), host_cpus=cpus,
            host_op_us=[min(paces), max(paces)] if paces else None, runs=len(ids), runs_paced=paced))
    return Sources(out)
