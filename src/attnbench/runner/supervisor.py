"""Isolated workers: spawn, ready handshake, per-attempt timeout, crash detection, kill in finally."""
from __future__ import annotations

import logging
import multiprocessing as mp
import os
import signal

from .worker import worker_main

log = logging.getLogger(__name__)


WORKER_NAME = "attnbench-worker"  # every worker process's name


class WorkerGone(Exception):
    """The worker died (signal, abort, exit) while serving a request."""


class WorkerTimeout(Exception):
    """The worker did not answer within the limit and was killed."""


def _death(proc) -> str:
    proc.join(5)
    code = proc.exitcode
    if code is None:
        return "worker stopped answering"
    if code < 0:
        try:
            return f"worker killed by {signal.Signals(-code).name} (exit {code})"
        except ValueError:
            return f"worker killed by signal {-code}"
    return f"worker exited with code {code}"


def _kill_group(pid: int | None) -> None:
    """SIGKILL to the process group `pid` leads, if there is one left (none once all are gone)."""
    if pid is None or not hasattr(os, "killpg"):
        return
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class Worker:
    """One spawned worker process holding a CUDA context of its own."""

    def __init__(self, plugins: list[str], ready_timeout: float = 300.0, log_level: int = logging.WARNING,
                 log_path: str | None = None, warm: dict | None = None, wait: bool = True):
        """Starts the process; with wait=False the caller calls ready() later, so that several
        workers can start (import torch, create a CUDA context, start the profiler) in parallel."""
        ctx = mp.get_context("spawn")
        # the compiler cache folder's (device, inode) when a compiling worker started: an executor tells by it
        # that the cache vanished under the worker (executors/local.py)
        self.cache_identity: tuple | None = None
        self.conn, child = ctx.Pipe()
        self.ready_timeout = ready_timeout
        self.proc = ctx.Process(target=worker_main, name=WORKER_NAME,
                                args=(child, list(plugins), os.getpid(), log_level, log_path, warm))
        self.proc.start()
        child.close()
        if wait:
            self.ready()

    def ready(self) -> "Worker":
        """Wait for the worker's handshake (once, after a start with wait=False)."""
        if not self.conn.poll(self.ready_timeout):
            self.kill()
            raise WorkerTimeout(f"worker not ready after {self.ready_timeout:.0f}s")
        try:
            hello = self.conn.recv()
        except (EOFError, OSError):
            raise WorkerGone(_death(self.proc)) from None
        if not hello.get("ready"):
            self.close()
            raise WorkerGone(f"worker failed to start: {hello.get('error')}")
        return self

    def call(self, msg: dict, timeout: float) -> dict:
        self.send(msg)
        return self.receive(timeout)

    def send(self, msg: dict) -> None:
        try:
            self.conn.send(msg)
        except (EOFError, OSError, BrokenPipeError):
            raise WorkerGone(_death(self.proc)) from None

    def receive(self, timeout: float) -> dict:
        try:
            if not self.conn.poll(timeout):
                self.kill()
                raise WorkerTimeout(f"no result after {timeout:g}s; worker killed")
            return self.conn.recv()
        except (EOFError, OSError, BrokenPipeError):
            raise WorkerGone(_death(self.proc)) from None

    @property
    def alive(self) -> bool:
        return self.proc.is_alive()

    def kill(self) -> None:
        """Kills the worker and every process still in its group (it leads one of its own,
        worker_main): a child a backend started, hung or not, does not outlive it to load the host or
        the GPU while later attempts are timed."""
        pid = self.proc.pid
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(10)
        _kill_group(pid)
        self.conn.close()

    def request_stop(self) -> None:
        """Ask the worker to exit without waiting (close() then waits): several stop at once."""
        try:
            if self.proc.is_alive():
                self.conn.send({"op": "stop"})
        except (OSError, BrokenPipeError):
            pass

    def close(self, timeout: float = 10.0) -> None:
        try:
            self.request_stop()
            self.proc.join(timeout)
        finally:
            self.kill()
