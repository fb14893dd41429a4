"""What an attempt may not change in the worker's process, which the next attempts share.

Settings: torch's thread count, autograd mode, default dtype, float32 matmul precision and TF32
switches, cuDNN's switches, deterministic algorithms, anomaly mode, SDPA's global kernel switches,
and (once CUDA is up) the current device and stream. A backend that changes one makes its
neighbours' numbers depend on the order they ran in.

Functions: the clocks the timers read (time.*), CUDA's events and synchronize, torch's attention
and matmul entry points that other backends and the references call, and the functions of the
measuring modules. A backend that replaces one can make its own time, or its own check, what it
wants.

read() before an attempt, undo(before) after it: whatever differs is set back and named."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable

from ..status import Status

# modules whose functions the attempt's measurement calls (their module-level callables are watched)
MEASURING = ("attnbench.measure.timing", "attnbench.measure.device", "attnbench.measure.correctness",
             "attnbench.measure.dispatch", "attnbench.measure.inputs", "attnbench.measure.warmup",
             "attnbench.measure.memory", "attnbench.measure.telemetry", "attnbench.runner.attempt")


@dataclass(frozen=True)
class Setting:
    name: str
    get: Callable[[], Any]
    set: Callable[[Any], None]
    key: Callable[[Any], Any] = lambda v: v  # what is compared (a stream: its device and handle, not the object)


def _settings() -> list[Setting]:
    import torch

    out = [
        Setting("torch threads", torch.get_num_threads, torch.set_num_threads),
        Setting("autograd enabled", torch.is_grad_enabled, torch.set_grad_enabled),
        Setting("default dtype", torch.get_default_dtype, torch.set_default_dtype),
        Setting("deterministic algorithms", torch.are_deterministic_algorithms_enabled,
                torch.use_deterministic_algorithms),
        Setting("anomaly detection", torch.is_anomaly_enabled, torch.set_anomaly_enabled),
        Setting("float32 matmul precision", torch.get_float32_matmul_precision, torch.set_float32_matmul_precision),
    ]
    for owner, label, names in ((torch.backends.cuda.matmul, "cuda matmul",
                                 ("allow_tf32", "allow_fp16_reduced_precision_reduction",
                                  "allow_bf16_reduced_precision_reduction")),
                                (torch.backends.cudnn, "cudnn", ("enabled", "benchmark", "deterministic", "allow_tf32"))):
        out += [Setting(f"{label} {n}", partial(getattr, owner, n), partial(setattr, owner, n))
                for n in names if hasattr(owner, n)]
    sdp = torch.backends.cuda
    for kind in ("flash", "mem_efficient", "math", "cudnn"):
        get, put = getattr(sdp, f"{kind}_sdp_enabled", None), getattr(sdp, f"enable_{kind}_sdp", None)
        if get and put:
            out.append(Setting(f"SDPA {kind} enabled", get, put))
    if torch.cuda.is_initialized():  # never initialise CUDA to read it
        out.append(Setting("CUDA device", torch.cuda.current_device, torch.cuda.set_device))
        out.append(Setting("CUDA stream", torch.cuda.current_stream, torch.cuda.set_stream,
                           key=lambda st: (st.device, st.cuda_stream)))
    return out


def _functions() -> dict[tuple[Any, str], Any]:
    """(owner, attribute) -> the object it holds now, for every watched function."""
    import time

    import torch
    import torch.nn.functional as F

    watched: list[tuple[Any, str]] = [(time, n) for n in ("perf_counter", "perf_counter_ns", "monotonic",
                                                           "monotonic_ns", "time", "time_ns", "sleep")]
    watched += [(torch.cuda, "synchronize"), (torch.cuda, "Event"), (torch.cuda.Event, "record"),
                (torch.cuda.Event, "elapsed_time"), (torch.cuda.Event, "synchronize"), (torch.cuda, "current_stream")]
    watched += [(F, "scaled_dot_product_attention"), (F, "softmax"), (torch, "matmul"), (torch, "bmm"),
                (torch, "softmax"), (torch, "einsum"), (torch.Tensor, "__matmul__"), (torch.Tensor, "softmax"),
                (torch.Tensor, "matmul")]
    for name in MEASURING:
        mod = sys.modules.get(name)
        if mod is not None:
            watched += [(mod, n) for n, v in vars(mod).items() if callable(v) and not n.startswith("__")]
    return {w: getattr(*w, None) for w in watched}


@dataclass
class State:
    settings: list[tuple[Setting, Any]]
    functions: dict[tuple[Any, str], Any]


def read() -> State:
    return State([(s, s.get()) for s in _settings()], _functions())


def _owner_name(owner: Any) -> str:
    return getattr(owner, "__name__", None) or type(owner).__name__


def undo(before: State) -> tuple[list[str], list[str]]:
    """Sets back what differs from `before`; returns (settings changed, functions replaced), each as
    text naming what it was and what it had become."""
    changed, replaced = [], []
    for s, was in before.settings:
        now = s.get()
        if s.key(now) != s.key(was):
            changed.append(f"{s.name} {was} -> {now}")
            try:
                s.set(was)
            except Exception as e:  # noqa: BLE001  (a setting that cannot be set back is still named)
                changed[-1] += f" (not restored: {type(e).__name__})"
    for (owner, name), was in before.functions.items():
        if getattr(owner, name, None) is not was:
            replaced.append(f"{_owner_name(owner)}.{name}")
            setattr(owner, name, was)
    return changed, replaced


def verdict(res: dict, changed: list[str], replaced: list[str]) -> dict:
    """The attempt's values once what it changed was set back: a replaced clock, timer or check makes
    its numbers unbelievable (IMPLAUSIBLE); a changed setting, which its neighbours would have
    inherited, is an ERROR. A row that already failed keeps its status and says it too."""
    if not (changed or replaced):
        return res
    parts = []
    if replaced:
        parts.append("replaced " + ", ".join(replaced) + " (the clocks, timers, checks or torch entry points every "
                     "attempt relies on)")
    if changed:
        parts.append("changed process-wide settings the next attempts share: " + "; ".join(changed))
    text = " and ".join(parts) + "; set back"
    if res.get("status") != Status.OK.value:
        return {**res, "reason": f"{res.get('reason') or res.get('status')}; it also {text}"}
    status = Status.IMPLAUSIBLE if replaced else Status.ERROR
    return {**res, "status": status.value, "reason": f"the backend {text}"}
