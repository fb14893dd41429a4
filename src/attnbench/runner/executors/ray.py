"""The Ray executor: one actor per device of a Ray cluster (num_gpus=1 on a GPU), each owning a
LocalExecutor for its device (warm workers, the attempt code unchanged). The driver hands out whole
(repeat, workload) groups, routed by GPU model (each model's actors share that model's plan, or
every actor runs the whole plan with --replicate), and writes every row itself (one store, one
writer, a row only once an attempt finished). A lost actor's unfinished attempts run again, on
another actor of its model or on a replacement."""
from __future__ import annotations

import logging
import os
from dataclasses import replace
from typing import Callable

from ...backends.base import DeviceInfo
from ..planner import Attempt
from .base import Outcome, Placement, Registration, Started, Target
from .devices import DeviceSpec, parse_devices
from .groups import DeviceLost
from .local import LocalConfig, LocalExecutor
from .pooled import PooledExecutor
from .ray_cluster import CPU_RESOURCE, ClusterError, DeviceActor, check_reachable, cluster_target

log = logging.getLogger(__name__)

START_TIMEOUT_S = 900.0  # an actor's start: its workers, the provenance and the ceilings


def _lost(e: BaseException) -> DeviceLost:
    return DeviceLost(f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}")


class _ActorLane:
    """One actor as executors/groups.py's loop sees it; replaced (up to max_restarts times) when lost."""

    def __init__(self, owner: "RayExecutor", i: int, spec: DeviceSpec | None):
        self.owner, self.i, self.spec = owner, i, spec
        self.label = spec.label if spec else f"gpu{i}"
        self.actor = owner._new_actor(spec)
        self.info: dict | None = None
        self.queue = None  # set once the plan is routed
        self.restarts = 0
        self.ledger: dict[str, float] = {}  # the actor's overhead ledger as last read

    def _get(self, ref, timeout: float | None = None):
        import ray
        from ray.exceptions import GetTimeoutError, RayActorError

        try:
            return ray.get(ref, timeout=timeout)
        except (RayActorError, GetTimeoutError) as e:
            raise _lost(e) from e

    def enter_repeat(self, repeat: int, slots: set) -> None:
        self._get(self.actor.enter_repeat.remote(repeat, sorted(slots, key=str)))

    def run_attempt(self, a: Attempt) -> Outcome:
        # any job type's job (runner/jobs.py) travels as a value without its backend, loaded in the actor by name
        measured, wall_s = self._get(self.actor.run_attempt.remote(replace(a, backend=None), a.backend.name))
        return Outcome(a, measured, wall_s, self.owner.placements[self.i])

    def stop_workers(self) -> None:
        self._get(self.actor.stop_workers.remote())

    def placement(self, info: dict) -> Placement:
        """Where the actor runs; a fake CPU device's index is its number in --devices."""
        p = info["placement"]
        return replace(p, device_index=self.spec.index) if self.spec and p.device_index is None else p

    def identity(self, info: dict) -> str:
        """What a replacement must share with the actor it replaces: the model (sharding), the device."""
        p = self.placement(info)
        return self.owner.identity_of(p, self.i) if self.owner.replicate else p.device_name

    def recover(self) -> bool:
        """A new actor in place of the lost one, if restarts are left and it has the same identity
        (the attempts put back are keyed by it)."""
        import ray

        if self.restarts >= self.owner.max_restarts or self.owner.closing:
            return False
        self.restarts += 1
        self.owner._retire(self)
        ray.kill(self.actor, no_restart=True)
        self.actor = self.owner._new_actor(self.spec)
        try:
            info = self._get(self.actor.start.remote(self.owner.backend_names), START_TIMEOUT_S)
        except DeviceLost as e:
            log.warning("device %s: its replacement did not start: %s", self.label, e)
            return self.recover()
        if self.identity(info) != self.identity(self.info):
            log.warning("device %s: the replacement landed on %s, not %s; not used", self.label,
                        self.identity(info), self.identity(self.info))
            ray.kill(self.actor, no_restart=True)
            return False
        self.info = info
        self.owner.placements[self.i] = self.placement(info)
        self.owner.replaced.append(self.label)
        log.warning("device %s: replaced (restart %d of %d)", self.label, self.restarts, self.owner.max_restarts)
        return True


class RayExecutor(PooledExecutor):
    """devices: fake CPU devices (cpu:0,cpu:1: one actor each, holding one unit of the custom
    resource attnbench_cpu_device), or None: one actor per GPU of the cluster. Default: the plan is
    sharded per GPU model (attempt keys as on one device of that model: the model is part of every
    key); replicate: every actor runs the whole plan, keyed by its device's UUID."""

    def __init__(self, cfg: LocalConfig, devices: list[DeviceSpec] | None = None, replicate: bool = False,
                 address: str | None = None, max_restarts: int = 2, make: Callable[..., LocalExecutor] | None = None):
        """make(cfg, torch_device, cores): each actor's LocalExecutor (a test passes one whose workers
        are simulated; it must be importable in the actor's process)."""
        super().__init__(replicate, cfg.strict_isolation)
        self.cfg, self.devices, self.address = cfg, devices, address
        self.max_restarts, self.make = max_restarts, make
        self.backend_names: list[str] = []
        self.closing = False
        self.replaced: list[str] = []  # the label of every actor replaced after it was lost
        self._owns_ray = False

    # ---- the cluster -------------------------------------------------------------------------------

    def _connect(self) -> None:
        import ray

        if self.address:  # named, it must answer (whether or not this process has joined an instance)
            check_reachable(self.address)
        if ray.is_initialized():  # a caller's instance (tests): used, and left running
            return
        kw: dict = {"address": self.address or "local"}  # local: a new instance, not one `ray start` runs
        if not self.address and self.devices:  # a local instance with the fake devices' resource
            kw.update(num_cpus=max(os.cpu_count() or 1, len(self.devices)), resources={CPU_RESOURCE: len(self.devices)})
        try:
            ray.init(include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False, **kw)
        except (ConnectionError, RuntimeError, ValueError) as e:
            where = f"the Ray cluster at {self.address}" if self.address else "a local Ray instance"
            raise ClusterError(f"could not reach {where}: {str(e).strip().splitlines()[0]}") from e
        self._owns_ray = True

    def _want(self) -> list[DeviceSpec | None]:
        """The actors to start; ClusterError when the cluster lacks the devices."""
        import ray

        have = ray.cluster_resources()
        if self.devices:
            if have.get(CPU_RESOURCE, 0) < len(self.devices):
                raise ClusterError(f"--devices {','.join(d.label for d in self.devices)} needs {len(self.devices)} "
                                   f"unit(s) of the Ray resource {CPU_RESOURCE}; the cluster has "
                                   f"{have.get(CPU_RESOURCE, 0):g} (start it with --resources "
                                   f"'{{\"{CPU_RESOURCE}\": {len(self.devices)}}}', or leave --address out)")
            return list(self.devices)
        n = int(have.get("GPU", 0))
        if n < 1:
            raise ClusterError("the Ray cluster has no GPU (use --devices cpu:0,cpu:1 for fake CPU devices)")
        return [None] * n

    def _new_actor(self, spec: DeviceSpec | None):
        import ray

        opts = ({"num_cpus": 0, "resources": {CPU_RESOURCE: 1}} if spec else {"num_cpus": 0, "num_gpus": 1})
        cls = ray.remote(DeviceActor).options(max_restarts=0, max_task_retries=0, **opts)
        return cls.remote(self.cfg, "cpu" if spec else "cuda:0", self.make)

    # ---- the executor interface --------------------------------------------------------------------

    def _read_ledger(self, lane: _ActorLane, closing: bool = False) -> None:
        """Read an actor's overhead ledger (closing: close its executor first); a lost actor keeps
        the ledger last read."""
        import ray

        try:
            lane.ledger = ray.get((lane.actor.close if closing else lane.actor.overhead).remote(), timeout=60)
        except Exception:
            pass

    def _retire(self, lane: _ActorLane) -> None:
        """A lane's actor goes (replaced or closed): its ledger moves to the run's."""
        for k, v in lane.ledger.items():
            self._overhead[k] = self._overhead.get(k, 0.0) + v
        lane.ledger = {}

    def identity_of(self, p: Placement, i: int) -> str:
        """The identity of a device at lane i in replicated attempt keys: its UUID, else its position."""
        return p.device_uuid or f"index {p.device_index if self.devices is None else self.devices[i].index}"

    def device_id(self, i: int) -> str:
        return self.identity_of(self._placements[i], i)

    def start(self, device: str, backends) -> Started:
        """Connect (or start a local Ray instance), start one actor per device, and collect every
        actor's provenance, all at once."""
        self._connect()
        self.backend_names = [b.name for b in backends or ()]
        self.lanes = [_ActorLane(self, i, spec) for i, spec in enumerate(self._want())]
        refs = [lane.actor.start.remote(self.backend_names) for lane in self.lanes]
        for lane, ref in zip(self.lanes, refs):
            try:
                lane.info = lane._get(ref, START_TIMEOUT_S)
            except DeviceLost as e:
                raise RuntimeError(f"device {lane.label} did not start: {e}") from e
        self._placements = [lane.placement(lane.info) for lane in self.lanes]
        for i, p in enumerate(self._placements):
            self._models.setdefault(p.device_name, i)
        first = self.lanes[0].info["provenance"]
        models = {name: {"ceilings": self.lanes[i].info["provenance"].get("ceilings"),
                         "l2_bytes": (self.lanes[i].info["provenance"].get("device") or {}).get("l2_bytes"),
                         "type": (self.lanes[i].info["provenance"].get("device") or {}).get("type")}
                  for name, i in self._models.items()}
        prov = {**first, "executor": "ray", "replicate": self.replicate, "models": models,
                "devices": [{"label": lane.label, "node": lane.info["node"], **p.to_record(),
                             "ceilings": lane.info["provenance"].get("ceilings"),
                             "host_cpu": lane.info["provenance"].get("host_cpu")}
                            for lane, p in zip(self.lanes, self._placements)]}
        self.started = Started(prov, DeviceInfo.from_dict(first["device"]), Placement(self._placements[0].device_name))
        return self.started

    def device_info(self, i: int) -> DeviceInfo:
        return DeviceInfo.from_dict(self.lanes[i].info["provenance"]["device"])

    def after_run(self) -> None:
        if not self.closing:
            for lane in self.lanes:
                self._read_ledger(lane)

    def kill(self, everything: bool = False) -> None:
        """An interrupt: the actors go (their workers follow: each watches its parent)."""
        import ray

        self.closing = True
        for lane in self.lanes:
            ray.kill(lane.actor, no_restart=True)

    def close(self) -> None:
        """Stop every actor (its workers, its fresh compiler cache); shut down a Ray instance this
        executor started (idempotent)."""
        import ray

        self.closing = True
        if ray.is_initialized():
            for lane in self.lanes:
                self._read_ledger(lane, closing=True)
                self._retire(lane)
                ray.kill(lane.actor, no_restart=True)
        self.lanes = []
        if self._owns_ray:
            ray.shutdown()
            self._owns_ray = False


def _resolve(device, devices, replicate, address) -> Target:
    """Ray importable, and --devices as fake CPU devices, or every GPU of the cluster."""
    try:
        import ray  # noqa: F401
    except ImportError:
        raise ValueError("--executor ray needs Ray, which is not installed: pip install 'attnbench[ray]'") from None
    if device is not None:
        raise ValueError("--device and --executor ray exclude each other (use --devices all, or cpu:0,cpu:1)")
    cluster_target(address)
    if devices is None or devices.strip() == "all":
        return Target("cuda", None, "ray:all GPUs", on_this_host=False)  # the driver need not have a GPU
    if not all(x.strip().startswith("cpu:") for x in devices.split(",")):
        raise ValueError("with --executor ray, --devices is all (every GPU of the cluster) or cpu:0,cpu:1 "
                         "(fake CPU devices)")
    specs = tuple(parse_devices(devices, lambda: 0))
    return Target("cpu", specs, ",".join(d.label for d in specs), on_this_host=False)


def _build(cfg: LocalConfig, target: Target, replicate: bool, address: str | None):
    return RayExecutor(cfg, list(target.devices) if target.devices else None, replicate, address)


# ray: one actor per GPU of a Ray cluster, each with its own warm workers; rows are written here. Its
# compiler caches live on the cluster's nodes: the sweep's cache beside the store does not apply
REGISTRATION = Registration("ray", _resolve, _build)
