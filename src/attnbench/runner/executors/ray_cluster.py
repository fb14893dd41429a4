"""What the Ray executor (executors/ray.py) needs of a cluster: its address checked and reached, the
custom resource of fake CPU devices, and the actor that runs a LocalExecutor on one device."""
from __future__ import annotations

import os
import socket
from dataclasses import replace
from typing import Callable

from .base import Placement
from .local import LocalConfig, LocalExecutor

CPU_RESOURCE = "attnbench_cpu_device"  # a fake CPU device's custom Ray resource (tests, laptops)
CONNECT_TIMEOUT_S = 5.0  # to reach a named cluster's head before Ray's own retries (a minute and more)


class ClusterError(RuntimeError):
    """The Ray cluster cannot serve the request (too few devices, no GPU): one line, nothing written."""


def cluster_target(address: str | None) -> tuple[str, int] | None:
    """The head (host, port) that --address names, or None for none named (auto: the cluster `ray start`
    runs on this host; local: a new instance). ValueError when it is neither HOST:PORT nor
    ray://HOST:PORT."""
    if address is None or address in ("auto", "local"):
        return None
    rest = address.removeprefix("ray://")
    host, sep, port = rest.rpartition(":")
    host = host.strip("[]")  # [::1]:6379
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--address {address!r}: expected auto, HOST:PORT (a cluster's head) or ray://HOST:PORT")
    return host, int(port)


def check_reachable(address: str) -> None:
    """ClusterError, at once, when nothing listens at the head that `address` names (Ray itself would
    retry for minutes); an address naming no head is left to Ray."""
    target = cluster_target(address)
    if target is None:
        return
    try:
        socket.create_connection(target, timeout=CONNECT_TIMEOUT_S).close()
    except OSError as e:
        reason = e.strerror or str(e) or type(e).__name__  # a timeout has no strerror
        raise ClusterError(f"could not reach the Ray cluster at {address}: {reason}") from None


class DeviceActor:
    """Runs inside a Ray actor: a LocalExecutor for the actor's device. Jobs arrive as values without
    their backend (its name beside them) and the backends are loaded here, so plugin classes never
    travel by pickle."""

    def __init__(self, cfg: LocalConfig, torch_device: str, make: Callable[..., LocalExecutor] | None = None):
        from ...backends.registry import all_backends

        if cfg.log_path and not os.path.isdir(os.path.dirname(os.path.abspath(cfg.log_path))):
            cfg = replace(cfg, log_path=None)  # another node: the driver's directory is not here
        self.ex = (make or LocalExecutor)(cfg, torch_device, None)
        self.backends = {b.name: b for b in all_backends(cfg.plugins)}

    def start(self, backend_names: list[str]) -> dict:
        import ray

        st = self.ex.start(self.ex.device, [self.backends[n] for n in backend_names])
        p = st.placement
        gpus = ray.get_gpu_ids()
        index = int(gpus[0]) if gpus else p.device_index
        return {"provenance": st.provenance, "placement": Placement(p.device_name, index, p.device_uuid),
                "node": ray.util.get_node_ip_address(), "pid": os.getpid()}

    def enter_repeat(self, repeat: int, slots: list) -> None:
        self.ex.enter_repeat(repeat, set(slots))

    def run_attempt(self, job, backend: str) -> tuple[dict, float]:
        """One job (an attempt, a model step: runner/jobs.py) sent without its backend, named by `backend`."""
        o = self.ex.run_attempt(replace(job, backend=self.backends[backend]))
        return o.measured, o.wall_s

    def stop_workers(self) -> None:
        self.ex.stop_workers()

    def overhead(self) -> dict:
        return dict(self.ex.overhead_s)

    def close(self) -> dict:
        self.ex.close()
        return dict(self.ex.overhead_s)
