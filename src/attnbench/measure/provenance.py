"""What a run ran under: device, toolkit, libraries, source revision, timer overhead."""
from __future__ import annotations

import hashlib
import os
import platform
import socket
import subprocess
import time
from importlib import metadata
from pathlib import Path

from .. import __version__
from . import nvml
from .timing import event_overhead_us

LIBRARIES = ("torch", "triton", "numpy", "flash-attn", "flash-attn-4", "flashinfer-python", "jax", "jaxlib",
             "nvidia-cudnn-cu12", "nvidia-cudnn-cu13", "nvidia-cudnn-frontend", "xformers", "pandas", "pyarrow")


def library_versions() -> dict:
    out = {}
    for name in LIBRARIES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def git_revision() -> dict:
    here = Path(__file__).resolve().parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5)
        if sha.returncode:
            return {"git_sha": None}
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=here,
                               capture_output=True, text=True, timeout=5)
        return {"git_sha": sha.stdout.strip(), "git_dirty": bool(dirty.stdout.strip())}
    except (OSError, subprocess.SubprocessError):
        return {"git_sha": None}


def source_digest(root: Path | None = None) -> str:
    """sha256 over the package's own Python files (relative path and bytes, sorted): names the code
    that ran even where git metadata is absent or stale (an installed wheel, a copied tree)."""
    root = root or Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return "CPU " + line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "CPU " + (platform.processor() or platform.machine() or "unknown")


def device_info(device: str) -> dict:
    """Static facts of the device (what supports() and the planner need)."""
    import torch

    if not device.startswith("cuda"):
        try:
            import psutil

            mem = psutil.virtual_memory().available
        except ImportError:
            mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
        return {"type": "cpu", "name": _cpu_model(),
                "cpu_count": os.cpu_count(), "total_memory": int(mem), "torch_threads": torch.get_num_threads()}
    dev = torch.device(device)
    p = torch.cuda.get_device_properties(dev)
    index = dev.index if dev.index is not None else torch.cuda.current_device()
    free, total = torch.cuda.mem_get_info(dev)
    out = {"type": "cuda", "index": index, "name": p.name, "capability": [p.major, p.minor],
           "sm_count": p.multi_processor_count, "l2_bytes": getattr(p, "L2_cache_size", None),
           "total_memory": int(total), "free_memory_at_start": int(free),
           "uuid": str(getattr(p, "uuid", "")) or None}
    out.update(nvml.device_static(device))
    return out


def plugin_digests(paths) -> dict:
    """sha256 of each --plugin file, so a row can be traced to the code that produced it."""
    out = {}
    for p in paths or ():
        try:
            out[str(p)] = hashlib.sha256(Path(p).read_bytes()).hexdigest()
        except OSError as e:
            out[str(p)] = f"unreadable: {e}"
    return out


def collect(device: str, seed: int, plugins=()) -> dict:
    """Facts of the device, the toolkit, the libraries and the source (nothing measured but the
    event overhead; ceilings are measured by measure/ceilings.py)."""
    import torch

    prov = {
        "attnbench_version": __version__,
        **git_revision(),
        "source_sha256": source_digest(),
        "seed": seed,
        "plugins": plugin_digests(plugins),
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "libraries": library_versions(),
        "torch": torch.__version__,
        "cuda_runtime": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "device_arg": device,
        "device": device_info(device),
        "timer": "cuda_event" if device.startswith("cuda") else "host_clock",
        "event_overhead_us": event_overhead_us(device),
        "event_overhead_prefilled_us": event_overhead_us(device, ahead=True) if device.startswith("cuda") else None,
        "collected_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        # eager timings carry the host's pace: a loaded host is recorded, not hidden
        "host_load_1_5_15": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "host_cpus": os.cpu_count(),
        # first calls (compiles) and eager launches run at the host CPU's pace, which differs between hosts
        "host_cpu": _cpu_model().removeprefix("CPU "),
    }
    return prov
