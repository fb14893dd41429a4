"""Unrelated concurrent work: the other processes on an attempt's GPU (NVML), its utilisation and the host's load
average, read before and after each attempt (runner/attempt.py) and by `run --exclusive` before a run starts."""
from __future__ import annotations

import os

# A reading's "why" when it has no PIDs: the row's concurrency columns are empty for that reason, never guessed.
NO_GPU = "no NVML on a CPU device"


def _parent(pid: int) -> int | None:
    """The parent PID of `pid` in this PID namespace (Linux /proc), None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def ours(pid: int, roots: set[int]) -> bool:
    """Whether `pid` is one of `roots` or descends from one (up to 8 generations): the run's supervisor and the
    workers it spawned (an idle sibling worker holds a CUDA context but runs nothing while this attempt runs)."""
    for _ in range(8):
        if pid in roots:
            return True
        parent = _parent(pid)
        if not parent or parent == pid:
            return False
        pid = parent
    return False


def read(device: str, roots: set[int] | None = None, holds_context: bool = True) -> dict:
    """One reading: `pids` of NVML compute (and graphics) processes on the GPU other than the run's own (`roots`
    and their descendants; default: this process and its parent, the supervisor), `util` (GPU utilisation %,
    NVML's last sample period), `load` (the host's 1-minute load average) and, when the PIDs cannot be told, `why`.
    `holds_context`: this process has a CUDA context on the GPU, so NVML must list it; when it does not, NVML's
    PIDs are of another PID namespace (a container) and which are ours is unknown: every PID is reported, `why`
    says so, and shared() cannot tell. Never raises."""
    out: dict = {"load": _load()}
    if not device.startswith("cuda"):
        return {**out, "why": NO_GPU}
    roots = roots if roots is not None else {os.getpid(), os.getppid()}
    try:
        import pynvml as nv

        from .nvml import handle_for

        h = handle_for(device)
        listed: dict[int, int | None] = {}
        for fn in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
            if hasattr(nv, fn):
                for p in getattr(nv, fn)(h):
                    listed[int(p.pid)] = getattr(p, "usedGpuMemory", None)
        out["util"] = float(nv.nvmlDeviceGetUtilizationRates(h).gpu)
    except Exception as e:  # noqa: BLE001  (no pynvml, no driver, a call it does not support)
        return {**out, "why": f"NVML could not list the GPU's processes: {type(e).__name__}: {e}"}
    if holds_context and os.getpid() not in listed:
        if not listed:  # this process holds a context, so NVML cannot see processes here (container, MIG, rights)
            return {**out, "why": "NVML lists no process on the GPU, not even this one: it cannot see them here"}
        out["pids"] = sorted(listed)
        out["why"] = (f"NVML lists PIDs of another PID namespace ({os.getpid()} is not among them): the run's own "
                      "processes are among them and cannot be told apart")
        return out
    out["pids"] = sorted(p for p in listed if not ours(p, roots))
    return out


def _load() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def _pids_text(r: dict) -> str | None:
    return ",".join(str(p) for p in r["pids"]) if "pids" in r else None


def shared(r: dict) -> bool | None:
    """Whether a reading saw another process on the GPU; None when it could not tell: no PIDs read, or PIDs of
    another namespace (a container), where the run's own workers (idle siblings hold contexts too) cannot be
    told from another's processes."""
    if "pids" not in r or r.get("why"):
        return None
    return bool(r["pids"])


def columns(before: dict, after: dict) -> dict:
    """The row's concurrency columns from the readings before and after the attempt (record/attempts.py)."""
    flags = [s for s in (shared(before), shared(after)) if s is not None]
    whys = list(dict.fromkeys(r["why"] for r in (before, after) if r.get("why")))
    return {"gpu_others_before": _pids_text(before), "gpu_others_after": _pids_text(after),
            "gpu_util_before": before.get("util"), "gpu_util_after": after.get("util"),
            "host_load_before": before.get("load"), "host_load_after": after.get("load"),
            "gpu_shared": any(flags) if flags else None, "gpu_others_why": "; ".join(whys) or None}


def busy(device: str) -> list[int]:
    """Other processes on `device`'s GPU now, as `run --exclusive` asks before starting (this process holds no
    context yet: every PID NVML lists but this one and its own children is another's). [] when NVML cannot
    say (the run is then not refused: a CPU device, no NVML)."""
    r = read(device, roots={os.getpid()}, holds_context=False)
    return r.get("pids", [])


def refusal(devices: list[str]) -> str | None:
    """`run --exclusive`'s one line when another process is on one of `devices`' GPUs, naming its PIDs (and
    their commands where /proc shows them); None when every GPU is free or NVML cannot say."""
    busy_on = {d: busy(d) for d in devices if d.startswith("cuda")}
    named = [f"{d}: PID " + ", ".join(f"{p}{_command(p)}" for p in pids) for d, pids in busy_on.items() if pids]
    if not named:
        return None
    return ("--exclusive: the GPU is busy with other processes (" + "; ".join(named)
            + "); wait for them to end or run without --exclusive (their rows are then flagged gpu_shared)")


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f" ({f.read().strip()})"
    except OSError:
        return ""
