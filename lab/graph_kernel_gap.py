"""Why a graph row's timed median can sit well under the profiler's kernel time (the gate's
`timed_over_kernel`, docs/methodology.md 4.7: the portability grid's lowest, 0.77, was `flex` graph
decode). For each (workload, backend), on one captured graph and one prepared call, four figures
per call, interleaved over rounds:

  graph    graph replays timed as the runner times them (chunks of samples behind one delay)
  eager    eager calls timed by events around a block of back-to-back calls queued behind a
           device-side delay (device time, no profiler)
  p-eager  the kernels' summed device time of eager calls under the profiler (what the gate uses)
  p-graph  the same of graph replays under the profiler

graph < eager says the graph itself runs the kernels faster (fewer gaps, overlapped ramps);
p-eager > eager says the profiler lengthens the kernels it traces. Prints one line each and the
kernels per call, then medians of the ratios.

    python lab/graph_kernel_gap.py --grid portability --where mode=decode \
        --where batch=8 --backends flex,sdpa-cudnn,compile --limit 6
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import time

from graph_steps import add_selection, graph_steps, selection  # lab/: the shared loop


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_selection(p, grid="portability", backends="flex,sdpa-cudnn", limit=6)
    p.add_argument("--samples", type=int, default=100, help="graph samples per round")
    p.add_argument("--calls", type=int, default=50, help="eager calls per block and round")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)

    import torch

    from attnbench.measure import dispatch, timing
    from attnbench.measure.device import sync

    backends, chosen, grid = selection(args)
    classifier = dispatch.Classifier.from_backends(backends.values())
    dev = args.device

    lead_us = 20_000.0

    def eager_block(step, n):
        """µs per call of the device: events around n back-to-back calls queued behind a device-side
        delay, so the host's launch cost is not in it; NaN where the host took longer than the delay."""
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        sync(dev)
        timing.device_delay(dev, lead_us)
        t0 = time.perf_counter()
        start.record()
        for _ in range(n):
            step()
        end.record()
        host_us = (time.perf_counter() - t0) * 1e6
        sync(dev)
        return start.elapsed_time(end) * 1e3 / n if host_us < lead_us else float("nan")

    def probed(fn, calls):
        pr = dispatch.probe(fn, dev, classifier, calls=calls)
        return pr.kernel_us, len(pr.kernels)

    print(f"{'workload':34} {'backend':11} {'kern':>4} {'graph':>7} {'eager':>7} {'p-eager':>7} {'p-graph':>7} "
          f"{'g/pe':>5} {'e/pe':>5} {'g/pg':>5}")
    ratios: dict[str, list[float]] = {"g/pe": [], "e/pe": [], "g/pg": []}
    for w, b, step in graph_steps(grid, chosen, dev, "warm", width=11, reason=50):
        graph = timing.capture_graph(step, 1, dev)
        est = statistics.median(eager_block(graph.replay, 1) for _ in range(3))
        k = max(1, math.ceil(100.0 / max(est, 1e-3)))  # k replays a sample where one is under 100 µs, as the runner does
        sampler = timing.GraphSampler((timing.capture_graph(step, k, dev) if k > 1 else graph).replay, k, dev, None)
        figs: dict[str, list[float]] = {"graph": [], "eager": [], "p-eager": [], "p-graph": []}
        kernels = 0
        for _ in range(args.rounds):
            sampler.plan(args.samples)
            figs["graph"].append(statistics.median(sampler() for _ in range(args.samples)))
            figs["eager"].append(eager_block(step, args.calls))
            us, kernels = probed(step, 3)
            figs["p-eager"].append(us or float("nan"))
            figs["p-graph"].append(probed(graph.replay, 3)[0] or float("nan"))
        med = {m: statistics.median(v) for m, v in figs.items()}
        got = {"g/pe": med["graph"] / med["p-eager"], "e/pe": med["eager"] / med["p-eager"],
               "g/pg": med["graph"] / med["p-graph"]}
        for m, v in got.items():
            if not math.isnan(v):
                ratios[m].append(v)
        print(f"{w.label()[:34]:34} {b.name:11} {kernels:4d} " + " ".join(f"{med[m]:7.1f}" for m in figs)
              + " " + " ".join(f"{v:5.2f}" for v in got.values()))
        del graph, sampler, step
    for m, v in ratios.items():
        if v:
            print(f"{m}: median {statistics.median(v):.3f}, min {min(v):.3f}, max {max(v):.3f} over {len(v)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
