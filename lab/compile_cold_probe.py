"""Where `compile`'s first call goes when the run's compiler cache already holds the kernel.

On an H200 the `compile` backend's first call of bf16 D128 causal prefill B4 N8k took 20.0 s in
the first repeat and 13.9 / 16.3 s in the next two, fresh processes with the same Inductor and
Triton cache (B16 N4k: 6.2 / 5.5 / 5.6 s), while most workloads took 0.1 s once cached. This
script runs that first call in fresh processes that share one cache directory, as a run's repeats
do, and prints per process: the first call's seconds, Inductor's cache counters (FX graph cache
hit / miss / bypass), the seconds spent benchmarking Triton configs, and the functions that took
most of the first call (cProfile, cumulative).

    PYTHONPATH=src python lab/compile_cold_probe.py [--shapes 4x8192,16x4096] [--processes 2]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

CHILD = r'''
import cProfile, io, json, pstats, sys, time
import torch
from attnbench.backends.reference import attention_math

bench = {"s": 0.0, "n": 0}
dev = sys.argv[3]
if dev == "cuda":
    from torch._inductor.runtime import triton_heuristics
    original = triton_heuristics.CachingAutotuner.benchmark_all_configs
    def timed_bench(self, *a, **k):
        t = time.perf_counter()
        try:
            return original(self, *a, **k)
        finally:
            bench["s"] += time.perf_counter() - t
            bench["n"] += 1
    triton_heuristics.CachingAutotuner.benchmark_all_configs = timed_bench
sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)

# a worker's warm-up: the compiler stack's first use is not the attempt's
x = torch.ones(8, device=dev)
torch.compile(lambda t: torch.softmax(t * 2, -1), dynamic=False)(x.view(2, 4))
sync()
torch._dynamo.reset()

b, n = int(sys.argv[1]), int(sys.argv[2])
q, k, v = (torch.randn(b, 32, n, 128, device=dev, dtype=torch.bfloat16) for _ in range(3))
f = torch.compile(attention_math, dynamic=False)
prof = cProfile.Profile()
t = time.perf_counter()
prof.enable()
f(q, k, v, True, "bottom_right", 128 ** -0.5, None)
sync()
prof.disable()
first = time.perf_counter() - t
t = time.perf_counter()
f(q, k, v, True, "bottom_right", 128 ** -0.5, None)
sync()
second = time.perf_counter() - t
from torch._dynamo.utils import counters
out = io.StringIO()
pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(25)
print(json.dumps({"first_s": round(first, 3), "second_s": round(second, 4), "bench_s": round(bench["s"], 3),
                  "bench_calls": bench["n"], "inductor": dict(counters["inductor"]),
                  "profile": out.getvalue()[-6000:]}))
'''


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="4x8192,16x4096,1x256", help="BxN list")
    ap.add_argument("--processes", type=int, default=2, help="fresh processes per shape, one cache")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--out", default=None, help="write the profiles here (JSON lines)")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="compile-probe-") as cache:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": f"{cache}/inductor", "TRITON_CACHE_DIR": f"{cache}/triton",
               "TORCHINDUCTOR_COMPILE_THREADS": "1"}
        for shape in args.shapes.split(","):
            b, n = shape.split("x")
            for i in range(args.processes):
                p = subprocess.run([sys.executable, "-c", CHILD, b, n, args.device], env=env, capture_output=True, text=True)
                if p.returncode:
                    print(f"B{b} N{n} process {i}: rc {p.returncode}: {p.stderr.strip().splitlines()[-1:]}")
                    continue
                r = json.loads(p.stdout.strip().splitlines()[-1])
                r.update(shape=shape, process=i)
                rows.append(r)
                c = r["inductor"]
                print(f"B{b} N{n} process {i}: first {r['first_s']:.2f} s, second {r['second_s'] * 1e3:.1f} ms, "
                      f"config benchmarks {r['bench_s']:.2f} s in {r['bench_calls']}, FX cache hit "
                      f"{c.get('fxgraph_cache_hit', 0)} miss {c.get('fxgraph_cache_miss', 0)} bypass "
                      f"{c.get('fxgraph_cache_bypass', 0)}")
    if args.out:
        with open(args.out, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
