"""The loop that lab/graph_chunks.py and lab/graph_kernel_gap.py share: each (workload,
backend) of their selection with the graph launch, prepared and called once as the runner does
before it times (the backend's context held while the caller measures), a backend that refuses it
said in a line, and each workload's inputs freed before the next one's; and the selection options
they share (device, grid, --where, backends, limit)."""
from __future__ import annotations

import argparse
import contextlib
from typing import Any, Callable, Iterator


def add_selection(p: argparse.ArgumentParser, grid: str, backends: str, limit: int) -> None:
    """The options that choose the workloads and backends, with the script's defaults."""
    p.add_argument("--device", default="cuda")
    p.add_argument("--grid", default=grid)
    p.add_argument("--where", action="append", default=[], help="AXIS=V1,V2 (as run --where)")
    p.add_argument("--backends", default=backends)
    p.add_argument("--limit", type=int, default=limit, help="workloads (the first N that match)")


def selection(args: argparse.Namespace) -> tuple[dict, list, list]:
    """(every backend by name, the chosen backends, the chosen workloads) from add_selection's options."""
    from attnbench.backends.registry import all_backends
    from attnbench.workloads.axes import parse_filters, select
    from attnbench.workloads.grids import get_grid

    backends = {b.name: b for b in all_backends()}
    chosen = [backends[n] for n in args.backends.split(",")]
    return backends, chosen, select(get_grid(args.grid), parse_filters(args.where))[: args.limit]


def graph_steps(grid: list, backends: list, device: str, l2: str = "warm", width: int = 14,
                reason: int = 60) -> Iterator[tuple[Any, Any, Callable[[], Any]]]:
    """(workload, backend, step) for each pair that prepared and ran its first call; `width` and
    `reason`: the backend column's width and how much of a refusal's message its line keeps."""
    from attnbench.backends.base import Prepared
    from attnbench.measure import timing
    from attnbench.measure.step import make_step
    from attnbench.runner import attempt
    from attnbench.workloads import Workload

    cache = attempt.WorkloadCache()
    for w in grid:
        w = Workload.from_dict({**w.to_dict(), "launch": "graph", "l2": l2})
        for b in backends:
            with contextlib.ExitStack() as stack:
                try:
                    inputs, _ = cache.get(w, device, 0)
                    prepared = Prepared.of(b.prepare(w, inputs))
                    if prepared.context is not None:  # held for the whole measurement, as the runner does
                        stack.enter_context(prepared.context)
                    timing.one_call(make_step(w, prepared, inputs, first=True), device)
                except Exception as e:  # a backend that refuses the workload: said, not measured
                    first = (str(e).splitlines() or [""])[0]
                    print(f"{w.label()[:34]:34} {b.name:{width}} skipped: {type(e).__name__}: {first[:reason]}")
                    cache.clear()
                    continue
                yield w, b, make_step(w, prepared, inputs)
                del prepared
        cache.clear()
        attempt.free_memory(device)
