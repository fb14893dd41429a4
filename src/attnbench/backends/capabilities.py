"""Backend capabilities per workload axis, as data: which non-default values a backend runs, and why not.

The rule: an axis at its default (workloads/axes.py) is always accepted, and so is an axis outside the
modes it is defined for (None). A non-default value is accepted when the backend lists it in
`Backend.accepts` (axis -> values, or ANY), else when the axis's rule accepts it by default (a graph
launch: every backend unless it lists none). A refusal is one line, "what: why", where the backend may
say why in its own words (`Backend.refusals`, axis -> text). An axis may also need a device (a graph
launch, a flushed L2 need CUDA): that rule comes first, for every backend.

A new workload axis is one entry here: in AXIS_RULES when a backend must opt in to its non-default
values, in OTHER_AXES when every backend runs every value (its limits then live where that entry says);
tests/test_capabilities.py asserts that every axis has exactly one entry."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..workloads import Workload
from ..workloads.axes import axis

# "Backend" and "DeviceInfo" below are backends/base.py's, named in annotations only: base.py imports this module

ANY = "any"  # accepts: every value of the axis


def _no_device_rule(w, dev) -> str | None:
    return None


@dataclass(frozen=True)
class AxisRule:
    """How backends are asked about one axis's non-default values.

    what(w): the refused value, said as the reason's head (None: the reason is `why` alone);
    why(backend): the default reason a backend that does not list the value gives;
    by_default: what a backend that declares nothing for the axis accepts (() : the default only);
    device(w, dev): a refusal of the device's, whatever the backend (None: the device can)."""

    axis: str
    why: Callable[["Backend"], str]
    what: Callable[["Workload"], str] | None = None
    by_default: tuple | str = ()
    device: Callable[["Workload", "DeviceInfo"], str | None] = _no_device_rule


def _graph_device(w, dev) -> str | None:
    return "CUDA-graph launch needs a CUDA device" if dev.type != "cuda" else None


def _cold_device(w, dev) -> str | None:
    return "l2=cold is defined for CUDA devices only" if dev.type != "cuda" else None


# In the order supports() applies them (the first refusal is the row's reason).
AXIS_RULES: tuple[AxisRule, ...] = (
    # dropout output cannot be checked against a deterministic reference: no built-in lists it
    AxisRule("dropout", lambda b: "output cannot be validated against a deterministic float64 reference",
             lambda w: "dropout > 0"),
    # a packed variable-length batch through one packed-batch kernel call; a loop over the sequences is not that
    AxisRule("lengths", lambda b: f"{b.name} has no packed-batch kernel",
             lambda w: f"lengths {w.lengths} (a packed variable-length batch)"),
    # K/V in pages reached through a page table; a gather into a contiguous cache is not that
    AxisRule("page_size", lambda b: "no paged KV cache path", lambda w: f"page_size {w.page_size}"),
    # the step writes the new token's K/V into the cache, then attends
    AxisRule("decode_append", lambda b: "no path that appends K/V to the cache in the step",
             lambda w: f"decode_append {w.decode_append}"),
    AxisRule("launch", lambda b: "not graph-capturable", by_default=ANY, device=_graph_device),
    AxisRule("l2", lambda b: "a flushed L2 not offered", by_default=ANY, device=_cold_device),
)
RULES = {r.axis: r for r in AXIS_RULES}

# The other axes: every backend runs every value as far as this table goes; where a backend's limits on
# them are declared instead.
OTHER_AXES: dict[str, str] = {
    "mode": "Backend.modes (every value listed)",
    "dtype": "Backend.dtypes (every value listed)",
    "layout": "Backend.layouts (every value listed)",
    "batch": "memory_estimate() (the planner's OOM_PREDICTED)",
    "q_len": "memory_estimate(); extra_supports()",
    "kv_len": "memory_estimate(); extra_supports()",
    "q_heads": "extra_supports()",
    "kv_heads": "Backend.supports_gqa (kv_heads != q_heads)",
    "head_dim": "Backend.max_head_dim, Backend.head_dim_multiple",
    "head_dim_v": "Backend.max_head_dim, Backend.head_dim_multiple",
    "accum": "one value (fp32)",
    "causal": "extra_supports()",
    "causal_align": "extra_supports()",
    "window": "extra_supports()",
    "fresh_inputs": "every backend (a timing condition, as l2 is: measure/timing.py writes the new values)",
}

# The keywords that declared these before `accepts` (True: every value; False: the default only),
# kept so that plugins written against them load unchanged.
LEGACY_FLAGS = {"supports_dropout": "dropout", "supports_varlen": "lengths", "supports_paged": "page_size",
                "supports_append": "decode_append", "supports_graph": "launch"}


def accepted(b: "Backend", name: str) -> tuple | str:
    """The non-default values of axis `name` that backend `b` runs: a tuple, or ANY."""
    return b.accepts.get(name, RULES[name].by_default)


def _at_default(name: str, value) -> bool:
    return value is None or value == axis(name).default


def refusal(b: "Backend", w: "Workload", dev: "DeviceInfo") -> str | None:
    """The first axis rule `w` breaks on `dev` for `b`, as a reason; None when none does."""
    for rule in AXIS_RULES:
        value = getattr(w, rule.axis)
        if _at_default(rule.axis, value):
            continue
        why = rule.device(w, dev)
        if why:
            return why
        ok = accepted(b, rule.axis)
        if ok == ANY or value in ok:
            continue
        why = b.refusals.get(rule.axis) or rule.why(b)
        return f"{rule.what(w)}: {why}" if rule.what else why
    return None


def problems(b: "Backend") -> list[str]:
    """What is wrong with a backend's declarations (an unknown axis, a value the axis cannot hold)."""
    out = []
    for field_name, table in (("accepts", b.accepts), ("refusals", b.refusals)):
        for name in table:
            if name not in RULES:
                out.append(f"{field_name} names {name!r}, not an axis a backend opts in to "
                           f"(those are: {', '.join(RULES)})")
    for name, values in b.accepts.items():
        if values != ANY and not isinstance(values, (tuple, list, frozenset, set)):
            out.append(f"accepts[{name!r}] is {values!r}; use a tuple of values or ANY")
    return out


def describe(b: "Backend") -> dict:
    """Per opt-in axis, the non-default values the backend runs ("any", or a list; [] means the
    default only), for `attnbench backends --json`."""
    out = {}
    for rule in AXIS_RULES:
        ok = accepted(b, rule.axis)
        out[rule.axis] = ok if ok == ANY else list(ok)
    return out
