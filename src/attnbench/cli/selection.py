"""The workloads a run measures: a grid (named or YAML) narrowed by --where and its shorthands."""
from __future__ import annotations

from .usage import UsageError


def workload_filters(args) -> dict:
    """--where AXIS=V1,V2 (repeatable), and the shorthands --modes, --dtype, --seqlen, --causal."""
    from ..workloads import axes

    filters = axes.parse_filters(args.where)
    shorthands = (("mode", args.modes), ("dtype", args.dtype), ("kv_len", args.seqlen),
                  ("causal", None if args.causal == "both" else [args.causal]))
    for name, values in shorthands:
        if values:
            ax = axes.axis(name)
            filters = axes.narrow(filters, name, {ax.parse(v) for v in values})
    return filters


def select_workloads(args):
    """Grid (named or YAML) narrowed by the workload filters."""
    from ..workloads import axes
    from ..workloads.grids import get_grid, load_yaml_grid

    filters = workload_filters(args)  # bad filters are reported before a grid file is read
    if args.config:
        label, ws = load_yaml_grid(args.config)
        name = f"{label} ({args.config})"
    else:
        ws = get_grid(args.grid)
        name = args.grid
    if getattr(args, "fresh_inputs", False):  # run --fresh-inputs: every workload's timed calls see new values
        import dataclasses

        ws = list(dict.fromkeys(dataclasses.replace(w, fresh_inputs=True) for w in ws))
    ws = axes.select(ws, filters)
    if not ws:
        raise UsageError(f"no workload of grid {name!r} is left after the filters")
    return name, ws
