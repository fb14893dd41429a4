"""The Backend contract, in one place.

A backend is a `Backend` (usually a subclass in a file of its own) that declares:
- what it can run: modes, dtypes, devices, head dims, GQA, layouts, minimum compute capability, and
  per workload axis the non-default values it runs (`accepts`, backends/capabilities.py: an axis at
  its default is always accepted) (`supports()` applies them and returns a one-line reason;
  `extra_supports()` adds the backend's own limits);
- which kernel families the dispatch probe must see when it runs (`kernel_families`, per device
  type), and how its library's kernels are named (`kernel_patterns`, so the probe can tell them
  from anyone else's);
- how it must be isolated (`isolation`), and its memory need (`memory_estimate()`);
and implements `prepare(workload, inputs) -> Prepared` (a bare zero-argument callable is accepted
and means `Prepared(step=callable)`). Built-ins are listed in backends/registry.py; plugins enter
through the same door (`--plugin FILE.py` or the `attnbench.backends` entry-point group) and pass
the same gates."""
from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import InitVar, dataclass, field
from typing import Any, Callable

from . import capabilities
from .capabilities import ANY  # noqa: F401  (plugins declare accepts with it)
from .kernels import KernelFamily

from ..workloads import MODES, Workload
from ..workloads.cost import input_bytes

CONTESTANT = "contestant"
ACCURACY_REFERENCE = "accuracy_reference"
ISOLATIONS = ("worker", "backend", "attempt")  # the values of Backend.isolation (see the field)


class Rejected(Exception):
    """Raised by prepare() or the first call when the library refuses the configuration.

    The runner records it as UNSUPPORTED with the message as reason."""


@dataclass(frozen=True)
class DeviceInfo:
    """What supports() may look at: the device type and, for CUDA, name and capability."""

    type: str  # "cpu" | "cuda"
    name: str = "cpu"
    capability: tuple[int, int] | None = None
    total_memory: int | None = None  # bytes

    @classmethod
    def from_dict(cls, d: dict) -> "DeviceInfo":
        cap = d.get("capability")
        return cls(d["type"], d.get("name", d["type"]), tuple(cap) if cap else None, d.get("total_memory"))


@dataclass
class Inputs:
    """Tensors of one workload, in the workload's layout.

    q (B, Hq, Nq, D), k (B, Hkv, Nkv, D), v (B, Hkv, Nkv, Dv) for BHND; (B, N, H, D) for BNHD.
    A paged decode workload (Workload.page_size > 0, workloads/paged.py) holds k and v as pages
    (num_pages, page_size, Hkv, D) whatever the layout (which then is Q's and O's), and `page_table`
    (B, pages_per_seq) int32: the physical page of each sequence's logical pages; None otherwise.
    An appending decode (Workload.decode_append included, workloads/append.py) has `k_new` and `v_new`:
    the new token's K and V, one token per sequence and KV head in the workload's layout ((B, Hkv, 1, D)
    for BHND, (B, 1, Hkv, D) for BNHD), which the step writes into the cache's slot kv_len - 1; None
    otherwise. `out` is a NaN-poisoned output buffer (O's shape, dtype and layout) that any backend may write
    into and return instead of allocating; a row it leaves unwritten stays NaN and fails the
    correctness check. `do` is the given output gradient for train_fwd_bwd."""

    q: Any
    k: Any
    v: Any
    do: Any = None
    out: Any = None
    scale: float = 1.0
    page_table: Any = None
    k_new: Any = None
    v_new: Any = None
    # issue 40: a float8 workload's per-tensor dequantisation factors ({"q": s_q, "k": s_k, "v": s_v}:
    # the value is code x s), the kernel's descales; None for other dtypes (measure/distributions.py)
    descale: dict | None = None


@dataclass
class Prepared:
    """What prepare() returns for one attempt.

    step: the zero-argument forward call that is timed, returning O in the workload's layout.
      State a call needs (a plan, a workspace, a cache position) lives in its closure; the runner
      calls it as it is, many times, and checks its results.
    first_call: made instead of `step` for the very first call (compilation and autotuning land
      in cold_start_us); raise `Rejected` there when the library refuses the configuration.
    context: a context manager the runner holds for the whole attempt (e.g. pinning SDPA's kernel),
      entered once so its cost is not charged to every timed call.
    backward: for train_fwd_bwd, `backward(out, d_out) -> (dQ, dK, dV)` when the library's
      backward is not torch autograd; by default autograd differentiates `step`'s output.
    state: objects to keep alive for the attempt and release after it (wrappers, buffers).
    config: what the backend chose for this attempt (a launch config, autotuned in the first call), asked
      after the first call and recorded as the row's kernel_config; None when it chooses nothing."""

    step: Callable[[], Any]
    first_call: Callable[[], Any] | None = None
    context: AbstractContextManager | None = None
    backward: Callable[[Any, Any], tuple] | None = None
    state: Any = None
    config: Callable[[], dict | None] | None = None  # issue 41: the row's kernel_config

    @classmethod
    def of(cls, prepared) -> "Prepared":
        """prepare()'s result as a Prepared (a bare callable is its step)."""
        if isinstance(prepared, Prepared):
            return prepared
        if callable(prepared):
            return cls(step=prepared)
        raise TypeError(f"prepare() returned {type(prepared).__name__}, not a Prepared or a callable")


@dataclass
class Backend:
    """A backend declares what it can run; the runner enforces every gate the same way for all.

    Subclasses (or instances of this class with `fn_factory`) implement `prepare`."""

    name: str
    family: str  # library family: reference, sdpa, flex, compile, plugin, ...
    role: str = CONTESTANT  # contestant | accuracy_reference
    kernel_families: dict[str, frozenset[str]] = field(default_factory=dict)  # device type -> families
    # device type -> families allowed beside the declared ones (layout conversions the library needs
    # on this project's tensors): not counted as undeclared work, but never enough on their own
    side_families: dict[str, frozenset[str]] = field(default_factory=dict)
    kernel_patterns: tuple[KernelFamily, ...] = ()  # how this library's kernels are named
    modes: tuple[str, ...] = MODES
    dtypes: tuple[str, ...] = ("fp32", "bf16", "fp16")
    devices: tuple[str, ...] = ("cpu", "cuda")
    max_head_dim: int | None = None
    head_dim_multiple: int = 1
    supports_gqa: bool = True
    # workload axis -> the non-default values this backend runs (a tuple, or ANY); an axis at its default
    # is always accepted, and an axis not named here accepts what its rule does by default
    # (backends/capabilities.py, e.g. {"lengths": ANY, "decode_append": ("included",)})
    accepts: dict[str, Any] = field(default_factory=dict)
    refusals: dict[str, str] = field(default_factory=dict)  # axis -> why not, in this backend's own words
    layouts: tuple[str, ...] = ("BHND", "BNHD")
    min_capability: tuple[int, int] | None = None
    # "worker": the repeat's shared worker; "backend": a worker of its own per repeat (compile-based
    # backends: no other backend's compiler state); "attempt": a fresh process for every attempt
    isolation: str = "worker"
    # a memory pool of its own that outlives a call (XLA's): release() after every attempt, so that
    # the next backend on the GPU finds the memory (without it, release() runs between workloads)
    holds_pool: bool = False
    description: str = ""
    # The keywords that declared axis capabilities before `accepts` (capabilities.LEGACY_FLAGS), so that
    # plugins written against them load unchanged: True accepts every value, False the default only.
    supports_dropout: InitVar[bool | None] = None
    supports_varlen: InitVar[bool | None] = None
    supports_paged: InitVar[bool | None] = None
    supports_append: InitVar[bool | None] = None
    supports_graph: InitVar[bool | None] = None
    append_refusal: InitVar[str | None] = None

    def __post_init__(self, supports_dropout, supports_varlen, supports_paged, supports_append, supports_graph,
                      append_refusal) -> None:
        given = {"supports_dropout": supports_dropout, "supports_varlen": supports_varlen,
                 "supports_paged": supports_paged, "supports_append": supports_append,
                 "supports_graph": supports_graph}
        legacy = {capabilities.LEGACY_FLAGS[k]: capabilities.ANY if v else () for k, v in given.items() if v is not None}
        # copies: make() functions share one keyword dict among several backends
        self.accepts = {**legacy, **self.accepts}
        self.refusals = {**({"decode_append": append_refusal} if append_refusal else {}), **self.refusals}

    # ---- availability -----------------------------------------------------------------------
    def availability(self) -> str | None:
        """None when importable and usable here, else why not."""
        return None

    def version(self) -> str | None:
        """The library's version (torch's for backends built on torch); None when it is absent."""
        try:
            import torch

            return torch.__version__
        except ImportError:
            return None

    def recorded_version(self) -> str | None:
        """version(), asked once per backend object: what every row of this backend stores as
        backend_version (a library that cannot say is recorded as None, not an error)."""
        if "_recorded_version" not in self.__dict__:
            try:
                v = self.version()
            except Exception:
                v = None
            self.__dict__["_recorded_version"] = None if v is None else str(v)
        return self.__dict__["_recorded_version"]

    # ---- capability ---------------------------------------------------------------------------
    def supports(self, w: Workload, dev: DeviceInfo) -> str | None:
        """None when this backend can run `w` on `dev`, else a one-line reason."""
        if dev.type not in self.devices:
            return f"{self.name} does not run on {dev.type}"
        if w.mode not in self.modes:
            return f"mode {w.mode} not offered (offers {', '.join(self.modes)})"
        if w.dtype not in self.dtypes:
            return f"dtype {w.dtype} not offered (offers {', '.join(self.dtypes)})"
        if w.layout not in self.layouts:
            return f"layout {w.layout} not offered"
        if self.max_head_dim and max(w.head_dim, w.head_dim_v) > self.max_head_dim:
            return f"head_dim {max(w.head_dim, w.head_dim_v)} > {self.max_head_dim}"
        if w.head_dim % self.head_dim_multiple or w.head_dim_v % self.head_dim_multiple:
            return f"head_dim must be a multiple of {self.head_dim_multiple}"
        if w.kv_heads != w.q_heads and not self.supports_gqa:
            return f"{w.attention_kind} (q_heads {w.q_heads} != kv_heads {w.kv_heads}) not offered"
        why = capabilities.refusal(self, w, dev)  # the workload axes' rules, one table
        if why:
            return why
        if self.min_capability and dev.capability and tuple(dev.capability) < self.min_capability:
            cc = "%d.%d" % tuple(self.min_capability)
            return f"needs compute capability >= {cc}, device has {dev.capability[0]}.{dev.capability[1]}"
        return self.extra_supports(w, dev)

    def extra_supports(self, w: Workload, dev: DeviceInfo) -> str | None:
        """Backend-specific limits beyond the declared fields."""
        return None

    def expected_kernels(self, device_type: str) -> frozenset[str]:
        """Kernel families the dispatch probe must observe for this backend on this device."""
        return self.kernel_families.get(device_type, frozenset())

    def side_kernels(self, device_type: str) -> frozenset[str]:
        """Families that may run beside the expected ones (e.g. XLA's transposes around JAX's cuDNN
        kernel) without counting as an undeclared path; they never stand in for an expected family."""
        return self.side_families.get(device_type, frozenset())

    def release(self) -> None:
        """Give back what this backend's library holds between workloads (e.g. a device memory pool
        torch's allocator cannot see); called when the worker drops a workload's inputs."""

    def memory_estimate(self, w: Workload) -> int:
        """Predicted peak bytes of one attempt (inputs included); fused kernels need ~inputs."""
        return int(input_bytes(w) * 1.5)

    # ---- execution ----------------------------------------------------------------------------
    def prepare(self, w: Workload, inputs: Inputs) -> Prepared | Callable[[], Any]:
        """The attempt's step (see Prepared), built on `inputs`. A conversion a production caller
        would pay on every call (another layout, packing) belongs inside the step, where it is timed."""
        raise NotImplementedError

    # ---- calls on a model's own tensors (attnbench model) --------------------------------------
    def attend(self, q, k, v, *, causal: bool = True, causal_align: str = "bottom_right",
               scale: float | None = None, window: int | None = None):
        """O (B, Hq, Nq, Dv) for q (B, Hq, Nq, D), k (B, Hkv, Nkv, D), v (B, Hkv, Nkv, Dv): BHND views
        of whatever memory the caller holds, new tensors on every call, differentiable by autograd
        when they require grad. `window` (with causal): query i also sees only keys j with
        j > i + Nkv - Nq - window (bottom-right) or j > i - window (top-left), a sliding window.
        scale None means D ** -0.5. Call it inside `attend_session()`. Raise `Rejected` when the
        library refuses; a conversion the library needs is paid here, inside the caller's step.
        Not offered by default: a backend without it is UNSUPPORTED in model runs, with this reason."""
        raise Rejected(f"{self.name} does not offer attend(): it runs only on prepared inputs, "
                       "not on a model's own tensors")

    def offers_attend(self) -> bool:
        """Whether this backend implements attend()."""
        return type(self).attend is not Backend.attend

    def attend_session(self) -> AbstractContextManager:
        """Held once around a model run's attend() calls, as Prepared.context is around an attempt
        (a kernel pin; a fresh compiler state for compile-based backends)."""
        return nullcontext()

    def describe(self) -> dict:
        return {
            "name": self.name,
            "family": self.family,
            "role": self.role,
            "isolation": self.isolation,
            "modes": list(self.modes),
            "dtypes": list(self.dtypes),
            "devices": list(self.devices),
            "layouts": list(self.layouts),
            "accepts": capabilities.describe(self),
            "kernel_families": {k: sorted(v) for k, v in self.kernel_families.items()},
            "kernel_patterns": [f.name for f in self.kernel_patterns],
            "description": self.description,
        }
