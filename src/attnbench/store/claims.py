"""Claims of running attempts and their liveness: who holds a claim (host, boot, pid start time), when it lapses
(its process is gone on this host; not refreshed for CLAIM_STALE_S from another), and the heartbeat that keeps
a live run's claims fresh."""
from __future__ import annotations

import calendar
import functools
import logging
import os
import socket
import sqlite3
import threading
import time

from ..procinfo import boot_id, start_ticks

log = logging.getLogger(__name__)

# A live run refreshes its claims' claimed_at this often (a thread of its own, however long an attempt runs).
HEARTBEAT_S = 60.0
# A claim of another host not refreshed for this long is stale: its run is gone (killed, a re-queued job, a
# store copied elsewhere) and the next run takes the attempt. Ten missed heartbeats: a loaded host or a store
# locked for LOCK_TIMEOUT_S misses one or two, never ten. Hosts' clocks must agree to well within this.
CLAIM_STALE_S = 600.0


def process_id(pid) -> str:
    """Who holds a claim: host name, boot id and the pid's start time, so that a pid reused later
    (another machine of the same name, a reboot) does not pass for the claimant."""
    return f"{socket.gethostname()} boot={boot_id()} start={start_ticks(pid)}"


@functools.cache
def _own_id_of(pid: int) -> str:
    return process_id(pid)


def own_id() -> str:
    """This process's claim name, read from /proc once per process (not once per claim)."""
    return _own_id_of(os.getpid())


def host_of(host: str | None) -> str:
    """The host name in a claim's `host` ("NAME boot=... start=...", or an older claim's bare name)."""
    return (host or "").split(" boot=")[0]


def age_s(claimed_at: str | None, now: float | None = None) -> float | None:
    """Seconds since the claim was taken or last refreshed, None when its time cannot be read."""
    try:
        then = calendar.timegm(time.strptime(claimed_at or "", "%Y-%m-%dT%H:%M:%SZ"))
    except ValueError:
        return None
    return (time.time() if now is None else now) - then


def held(host, pid, claimed_at, take_over: bool = False, now: float | None = None) -> bool:
    """Whether the claimant may still be running. On this host the answer is certain: held while that pid
    runs with the same start time (an older claim naming only the host: while the pid runs). A claim of
    another host is held until it is CLAIM_STALE_S old (its run refreshes it every HEARTBEAT_S), or never
    when `take_over` (the user says that run is gone: run --take-over-claims)."""
    if host and host_of(host) == socket.gethostname():
        if " boot=" not in host:
            return alive(pid)
        return alive(pid) and host == process_id(pid)
    if take_over:
        return False
    age = age_s(claimed_at, now)
    return age is None or age < CLAIM_STALE_S


def alive(pid) -> bool:
    try:
        os.kill(int(pid), 0)
    except (OSError, TypeError, ValueError):
        return False
    return True


def describe(rows: list, now: float | None = None) -> str:
    """Who holds these claims (rows of host, pid, claimed_at), said in one short phrase."""
    seen: dict[tuple, float | None] = {}
    for r in rows:
        k = (host_of(r["host"]) or "?", r["pid"])
        a = age_s(r["claimed_at"], now)
        seen[k] = a if seen.get(k) is None else min(seen[k], a if a is not None else seen[k])
    parts = [f"{h} pid {p}" + (f", refreshed {a:.0f} s ago" if a is not None else "") for (h, p), a in seen.items()]
    return "; ".join(parts[:3]) + (f"; and {len(parts) - 3} more" if len(parts) > 3 else "")


class Heartbeat:
    """A thread that refreshes one run's claims every HEARTBEAT_S on a connection of its own (SQLite
    connections stay on their thread), so another host's run sees them live however long an attempt
    takes. A failed refresh (the store locked, the disk full) is logged and tried again at the next beat."""

    def __init__(self, path, run_id: str, every_s: float = HEARTBEAT_S, lock_timeout_s: float = 30):
        self.path, self.run_id, self.every_s, self.lock_timeout_s = str(path), run_id, every_s, lock_timeout_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="attnbench-claims-heartbeat", daemon=True)

    def __enter__(self) -> "Heartbeat":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=self.lock_timeout_s + 5)

    def _beat(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                con = sqlite3.connect(self.path, timeout=self.lock_timeout_s)
                try:
                    with con:
                        con.execute("UPDATE claims SET claimed_at=? WHERE run_id=?",
                                    (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), self.run_id))
                finally:
                    con.close()
            except sqlite3.Error as e:
                log.warning("could not refresh this run's claims: %s", e)
