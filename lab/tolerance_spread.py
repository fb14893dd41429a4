"""The evidence behind correctness's tolerances: the error ratios of correct kernels.

Runs every available built-in backend's step (no timing) over a spread of shapes, dtypes, modes and
the three input distributions, checks each result as a run would, and prints the largest
elementwise ratio and systematic-error ratio seen per (backend, dtype, tensor, inputs), then the
largest per (dtype, inputs) beside the tolerance. Usage:

    PYTHONPATH=src python lab/tolerance_spread.py [--device cuda] [--out spread.json] [--quick]
"""
from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import sys
import time
from collections import defaultdict


def shapes(device: str, quick: bool):
    from attnbench.workloads import Workload

    lens = (128, 1024) if device == "cpu" else (512, 4096)
    if quick:
        lens = lens[:1]
    for mode, dtype, n, causal, (hq, hkv), d in itertools.product(
            ("prefill", "train_fwd_bwd", "decode"), ("fp32", "bf16", "fp16"), lens, (False, True),
            ((8, 8), (8, 2)), (64, 128)):
        if mode == "decode" and causal:
            continue
        nq = 1 if mode == "decode" else n
        b = 4 if mode == "decode" else 2
        yield Workload(mode=mode, batch=b, q_len=nq, kv_len=n, q_heads=hq, kv_heads=hkv, head_dim=d, head_dim_v=d,
                       dtype=dtype, causal=causal)


def main(argv=None) -> int:
    import torch

    from attnbench.backends.base import DeviceInfo, Prepared
    from attnbench.backends.registry import builtin
    from attnbench.measure import correctness
    from attnbench.measure.inputs import DISTRIBUTIONS, refill
    from attnbench.measure.step import make_step
    from attnbench.runner.attempt import WorkloadCache

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", default=None, help="write every check's figures here as JSON")
    ap.add_argument("--quick", action="store_true", help="one sequence length only")
    ap.add_argument("--backends", default=None, help="comma-separated names (default: every available one)")
    args = ap.parse_args(argv)
    dev = DeviceInfo("cpu") if args.device == "cpu" else DeviceInfo(
        "cuda", torch.cuda.get_device_name(args.device), torch.cuda.get_device_capability(args.device))
    backends = [b for b in builtin() if b.availability() is None]
    if args.backends:
        backends = [b for b in backends if b.name in args.backends.split(",")]
    cache, rows, t0 = WorkloadCache(), [], time.time()
    worst = defaultdict(lambda: [0.0, 0.0])  # (backend, dtype, tensor, inputs) -> [ratio, sys]
    for w in shapes(dev.type, args.quick):
        for dist_i, dist in enumerate(DISTRIBUTIONS):
            seed = 7 + dist_i
            inputs, _ = cache.get(w, args.device, 0)
            refill(inputs, w, seed, dist)
            ref = cache.reference(w, seed, dist)
            for b in backends:
                if b.supports(w, dev) or b.name == "reference":
                    continue
                if b.family == "compile" and dist != "normal":
                    continue  # compiled code is the same for every input: one distribution is enough
                try:
                    p = Prepared.of(b.prepare(w, inputs))
                    with p.context or contextlib.nullcontext():
                        out = make_step(w, p, inputs, first=True)()
                        v = correctness.check(w, out, inputs, ref, tol=1e30, hard=dist != "normal")
                except Exception as e:  # a refusal is not evidence either way
                    print(f"skip {b.name} {w.mode} {w.dtype}: {type(e).__name__}: {str(e)[:80]}", file=sys.stderr)
                    continue
                for name, d in v.detail.items():
                    k = (b.name, w.dtype, "o" if name == "o" else "grad", dist)
                    worst[k][0] = max(worst[k][0], d["ratio"])
                    worst[k][1] = max(worst[k][1], d["sys"])
                    rows.append({"backend": b.name, "workload": w.to_dict(), "inputs": dist, "tensor": name,
                                 "ratio": d["ratio"], "sys": d["sys"], "slope": d["slope"]})
            refill(inputs, w, 0)
    print(f"{len(rows)} checks in {time.time() - t0:.0f} s on {dev.name}")
    print(f"{'backend':16} {'dtype':5} {'t':4} {'inputs':12} {'ratio':>7} {'sys':>6}")
    for k in sorted(worst):
        print(f"{k[0]:16} {k[1]:5} {k[2]:4} {k[3]:12} {worst[k][0]:7.2f} {worst[k][1]:6.2f}")
    print(f"\n{'dtype':5} {'inputs':12} {'max ratio':>9} {'tol':>5} {'max sys':>8} {'sys tol':>7}")
    for dtype in ("fp32", "bf16", "fp16"):
        for dist in DISTRIBUTIONS:
            vals = [v for k, v in worst.items() if k[1] == dtype and k[3] == dist]
            if vals:
                hard = dist != "normal"
                print(f"{dtype:5} {dist:12} {max(v[0] for v in vals):9.2f} "
                      f"{correctness.tolerance(dtype, None, hard):5g} {max(v[1] for v in vals):8.2f} "
                      f"{correctness.SYS_TOLERANCES[dtype][hard]:7g}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
