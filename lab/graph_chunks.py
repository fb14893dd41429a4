"""Graph samples two ways on the same captured graphs, interleaved: one sample behind a device-side
delay of its own and a sync each (how graph samples were taken before chunks), and chunks of samples
queued behind one delay (measure/timing.py: GraphSampler). Prints, per (workload, backend), both
medians, their ratio, the late samples the chunks dropped and how much of each method's wall its
samples fill.

    python lab/graph_chunks.py --device cuda --grid quick --where launch=graph \
        --backends sdpa-flash,sdpa-cudnn,flex --limit 24 --samples 100 --rounds 3
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
    add_selection(p, grid="quick", backends="sdpa-flash,sdpa-cudnn", limit=24)
    p.add_argument("--samples", type=int, default=100, help="samples per method per round")
    p.add_argument("--rounds", type=int, default=3, help="rounds of (per-delay, chunked), alternating")
    p.add_argument("--l2", choices=("warm", "cold"), default="warm")
    args = p.parse_args(argv)

    from attnbench.measure import timing

    _, chosen, grid = selection(args)
    dev = args.device
    flush = timing._L2Flusher(dev) if args.l2 == "cold" else None

    def per_delay(graph, k, n):  # one sample a lead and a sync: how graph samples were taken before chunks
        one = timing.GraphSampler(graph.replay, k, dev, flush, most=1)
        one.plan(n)
        return [one() for _ in range(n)]

    print(f"{'workload':34} {'backend':14} {'k':>3} {'delay µs':>9} {'chunk µs':>9} {'ratio':>6} "
          f"{'late':>4} {'fill d':>6} {'fill c':>6}")
    ratios, fills = [], {"delay": [], "chunk": []}
    for w, b, step in graph_steps(grid, chosen, dev, args.l2):
        graph = timing.capture_graph(step, 1, dev)
        est = statistics.median(per_delay(graph, 1, 3))
        k = 1 if flush or est >= 100.0 else math.ceil(100.0 / max(est, 1e-3))
        if k > 1:
            graph = timing.capture_graph(step, k, dev)
        sampler = timing.GraphSampler(graph.replay, k, dev, flush)
        got = {"delay": [], "chunk": []}
        wall = {"delay": 0.0, "chunk": 0.0}
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            got["delay"] += per_delay(graph, k, args.samples)
            t1 = time.perf_counter()
            sampler.plan(args.samples)
            got["chunk"] += [sampler() for _ in range(args.samples)]
            t2 = time.perf_counter()
            wall["delay"] += t1 - t0
            wall["chunk"] += t2 - t1
        med = {m: statistics.median(v) for m, v in got.items()}
        fill = {m: sum(got[m]) * k / 1e6 / wall[m] for m in got}
        ratio = med["chunk"] / med["delay"]
        ratios.append(ratio)
        for m in fill:
            fills[m].append(fill[m])
        print(f"{w.label()[:34]:34} {b.name:14} {k:3d} {med['delay']:9.2f} {med['chunk']:9.2f} {ratio:6.3f} "
              f"{sampler.late:4d} {fill['delay']:6.0%} {fill['chunk']:6.0%}")
        del graph, sampler, step
    if ratios:
        q = statistics.quantiles(ratios, n=10) if len(ratios) > 1 else [ratios[0]] * 9
        print(f"\nchunk/delay median ratio over {len(ratios)} rows: median {statistics.median(ratios):.4f}, "
              f"p10 {q[0]:.4f}, p90 {q[-1]:.4f}, min {min(ratios):.4f}, max {max(ratios):.4f}")
        print(f"share of the method's wall that is samples: per-delay {statistics.median(fills['delay']):.0%}, "
              f"chunked {statistics.median(fills['chunk']):.0%} (medians over rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
