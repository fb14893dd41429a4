"""Where an attempt's wall goes outside its timed samples: runs attempts of a grid in this process
(as a worker runs them, one workload's backends together) under cProfile, then prints per backend
the wall, the summed timed samples and the phases, and the functions with the most own time.

    python lab/profile_attempt.py --device cuda --grid quick --backends sdpa-flash,sdpa-math \
        --limit 20 --top 30
"""
from __future__ import annotations

import argparse
import collections
import cProfile
import io
import pstats
import sys
import time


def warm_up(device: str) -> None:
    """What a worker pays before its handshake (the CUDA context, the profiler's first start, the compiler
    stack's first use), paid here before profiling so that it is not charged to the first attempt."""
    import torch

    from attnbench.measure import device as bound, dispatch

    bound.bind(device)
    x = torch.ones(8, device=device)
    dispatch.probe(lambda: x * 2, device)
    if device.startswith("cuda"):
        torch.compile(lambda t: torch.softmax(t * 2, -1), dynamic=False)(x.view(2, 4))
        torch.cuda.synchronize()
        torch._dynamo.reset()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu")
    p.add_argument("--grid", default="smoke")
    p.add_argument("--backends", default="sdpa-flash")
    p.add_argument("--limit", type=int, default=10, help="workloads of the grid (the first N)")
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--sort", default="tottime", help="pstats key: tottime or cumulative")
    args = p.parse_args(argv)

    from attnbench.backends.registry import all_backends
    from attnbench.measure.dispatch import Classifier
    from attnbench.measure.timing import TimingConfig
    from attnbench.runner import attempt
    from attnbench.runner.worker import after_attempt
    from attnbench.workloads.grids import get_grid

    backends = {b.name: b for b in all_backends()}
    chosen = [backends[n] for n in args.backends.split(",")]
    classifier = Classifier.from_backends(backends.values())
    warm_up(args.device)
    timing = TimingConfig.for_device(args.device).__dict__
    cache = attempt.WorkloadCache()
    prof = cProfile.Profile()
    stats = collections.defaultdict(collections.Counter)
    for w in get_grid(args.grid)[: args.limit]:
        for b in chosen:
            spec = {"op": "attempt", "backend": b.name, "workload": w.to_dict(), "device": args.device, "seed": 0,
                    "tol": None, "inputs": "normal", "timing": timing, "repeat": 0}
            t0 = time.perf_counter()
            prof.enable()
            res = attempt.run(spec, b, cache, classifier)
            after_attempt(b)
            prof.disable()
            c = stats[b.name]
            c["attempts"] += 1
            c["wall"] += time.perf_counter() - t0
            c[res["status"]] += 1
            if res["status"] == "OK":
                c["timed"] += sum(res["samples_us"]) * (res.get("calls_per_sample") or 1) / 1e6
            for k, v in (res.get("phases_s") or {}).items():
                c["ph:" + k] += v
        cache.clear()
        attempt.free_memory()
    for name, c in stats.items():
        phases = ", ".join(f"{k[3:]} {v:.2f}" for k, v in sorted(c.items(), key=lambda kv: -kv[1]) if k.startswith("ph:"))
        print(f"{name}: {c['attempts']} attempts, OK {c['OK']}, wall {c['wall']:.2f} s, timed {c['timed']:.2f} s")
        print(f"  phases (s): {phases}")
    s = io.StringIO()
    pstats.Stats(prof, stream=s).strip_dirs().sort_stats(args.sort).print_stats(args.top)
    print(s.getvalue()[-12000:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
