"""What /proc says (Linux): this boot's id, a process's state and start time, and from it how long it has run."""
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


def _stat(pid) -> list[str]:
    """/proc/PID/stat's fields from the third (state) on, [] where the process or /proc is missing."""
    try:
        return Path(f"/proc/{int(pid)}/stat").read_text().rsplit(")", 1)[1].split()  # the name may hold spaces
    except (OSError, ValueError, IndexError):
        return []


def state(pid) -> str | None:
    """The process's state letter (R, S, D, Z for a zombie, ...), None when there is no such process."""
    fields = _stat(pid)
    return fields[0] if fields else None


def start_ticks(pid) -> str:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22), or "?"."""
    fields = _stat(pid)
    return fields[19] if len(fields) > 19 else "?"


def age_s(pid=None) -> float | None:
    """Seconds since the process (default: this one) started, None where /proc or a boot clock is
    missing: a run's start-up (interpreter, imports, workers, provenance) counts from there."""
    ticks = start_ticks(os.getpid() if pid is None else pid)
    try:
        return max(time.clock_gettime(time.CLOCK_BOOTTIME) - int(ticks) / os.sysconf("SC_CLK_TCK"), 0.0)
    except (ValueError, OSError, AttributeError):
        return None
