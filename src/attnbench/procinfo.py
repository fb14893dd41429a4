"""What /proc says (Linux): this boot's id, a process's start time, and from it how long it has run."""
from __future__ import annotations

import functools
import os
import time
from pathlib import Path


@functools.cache
def boot_id() -> str:
    """This boot's random id, or "?"."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "?"


def start_ticks(pid) -> str:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22), or "?"."""
    try:
        stat = Path(f"/proc/{int(pid)}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[19]  # after the command name, which may hold spaces
    except (OSError, ValueError, IndexError):
        return "?"


def age_s(pid=None) -> float | None:
    """Seconds since the process (default: this one) started, None where /proc or a boot clock is
    missing: a run's start-up (interpreter, imports, workers, provenance) counts from there."""
    ticks = start_ticks(os.getpid() if pid is None else pid)
    try:
        return max(time.clock_gettime(time.CLOCK_BOOTTIME) - int(ticks) / os.sysconf("SC_CLK_TCK"), 0.0)
    except (ValueError, OSError, AttributeError):
        return None
