"""`python -m attnbench.measure.counters_replay SPEC.json`: one attempt's step rebuilt (workload, inputs, backend,
plugins included) and called once inside the NVTX range a profiler around this process profiles alone; as a
CUDA graph replay when the attempt's launch is graph. Exit 0 when the call ran, 3 with one line otherwise."""
from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

from ..backends.base import Prepared
from ..workloads import Workload
from .counters_ncu import RANGE
from .device import bind, sync
from .graph import capture_graph
from .inputs import make_inputs
from .step import make_step


def replay(spec: dict) -> None:
    import torch

    from ..backends.registry import all_backends

    backends = {b.name: b for b in all_backends(spec.get("plugins") or [])}
    if spec["backend"] not in backends:
        raise LookupError(f"no backend named {spec['backend']!r} here (a plugin's file not given?)")
    backend, w, device = backends[spec["backend"]], Workload.from_dict(spec["workload"]), spec["device"]
    bind(device)
    inputs = make_inputs(w, device, spec.get("seed", 0), spec.get("inputs") or "normal")
    prepared = Prepared.of(backend.prepare(w, inputs))
    with prepared.context if prepared.context is not None else contextlib.nullcontext():
        make_step(w, prepared, inputs, first=True)()  # compile and autotune outside the profiled range
        step = make_step(w, prepared, inputs)
        call = capture_graph(step, 1, device).replay if w.launch == "graph" else step
        call()  # once more before the profiled call: lazy state is built, as in the timed calls
        sync(device)
        torch.cuda.nvtx.range_push(RANGE)
        call()
        torch.cuda.nvtx.range_pop()
        sync(device)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        sys.stderr.write("usage: python -m attnbench.measure.counters_replay SPEC.json\n")
        return 2
    try:
        replay(json.loads(Path(argv[0]).read_text()))
    except Exception as e:  # noqa: BLE001  (the collector reads this line as the reason)
        first = (str(e).splitlines() or [""])[0]
        sys.stderr.write(f"==REPLAY-ERROR== {type(e).__name__}: {first}\n")
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
