"""Time `analyze` on a synthetic store of 75,000 attempts (the target: under 10 s on a laptop CPU).

  python lab/bench_analyze.py [--attempts 75000] [--keep DIR]

The store is two labels' worth of rows: 2 stores × workloads × 7 backends × 3 repeats, with 10 to
200 raw samples per attempt (as the H200 runs hold), about a tenth of them not OK. Building it is
not timed; reading the stores and the whole analysis (every JSON section) is."""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from attnbench.analysis.analyze import analyze
from attnbench.store.db import Store
from attnbench.store import sources
from attnbench.workloads import Workload
from attnbench.workloads.cost import flops, io_bytes

BACKENDS = ("sdpa-flash", "sdpa-cudnn", "sdpa-efficient", "flex", "compile", "reference", "sdpa-math")
REPEATS = 3


def workloads(n: int) -> list[Workload]:
    out = []
    for batch in (1, 2, 4, 8, 16, 32, 64):
        for mode in ("prefill", "decode"):
            for n_len in (256, 512, 1024, 2048, 4096, 8192, 16384):
                for hkv in (1, 2, 4, 8, 16, 32):
                    for d in (64, 128):
                        for launch in ("eager", "graph"):
                            for causal in (False, True):
                                if mode == "decode" and causal:
                                    continue
                                out.append(Workload(mode=mode, batch=batch, q_len=1 if mode == "decode" else n_len,
                                                    kv_len=n_len, q_heads=32, kv_heads=hkv, head_dim=d,
                                                    head_dim_v=d, causal=causal, launch=launch))
                                if len(out) == n:
                                    return out
    return out


def build(path: Path, label_seed: int, n_workloads: int) -> int:
    rng = np.random.default_rng(label_seed)
    rows = []
    for wi, w in enumerate(workloads(n_workloads)):
        base = {b: 10.0 * (1 + i * 0.15) * (1 + wi % 7) for i, b in enumerate(rng.permutation(BACKENDS))}
        for b in BACKENDS:
            for rep in range(REPEATS):
                ok = rng.random() > 0.1
                n = int(rng.choice((10, 10, 40, 200)))
                s = (base[b] * rng.lognormal(0, 0.03) * (1 + 0.01 * rng.standard_normal(n))).round(3)
                rows.append({
                    "attempt_key": f"{w.key()}-{b}-{rep}", "run_id": "bench", "tag": "default", "backend": b,
                    "family": b.split("-")[0], "role": "accuracy_reference" if b in ("reference", "sdpa-math")
                    else "contestant", "workload_key": w.key(), **w.to_dict(), "repeat": rep,
                    "status": "OK" if ok else "UNSUPPORTED", "reason": None if ok else "declined",
                    "median_us": float(np.median(s)) if ok else None,
                    "p95_us": float(np.percentile(s, 95)) if ok else None, "samples_us": s.tolist() if ok else None,
                    "dispatch_status": "probed" if ok else None, "dispatch_families": ["pytorch-flash"],
                    "max_abs_err": 1e-3, "cosine": 0.99999, "err_ratio": 1.0, "flops": float(flops(w)),
                    "bytes": float(io_bytes(w)), "device_name": "BENCH GPU", "torch_version": "2.13.0",
                    "wall_s": 0.5, "created_at": "2026-01-01T00:00:00Z"})
    store = Store(path)
    store.start_run("bench", "default", "bench", "bench", "BENCH GPU",
                    {"ceilings": {"copy_gbps": 4000.0, "matmul_tflops_bf16": 780.0}})
    store.insert_many(rows)
    store.close()
    return len(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--attempts", type=int, default=75_000)
    ap.add_argument("--keep", help="build the stores in this directory and keep them")
    a = ap.parse_args()
    d = Path(a.keep or tempfile.mkdtemp())
    per_store = a.attempts // 2
    n_workloads = per_store // (len(BACKENDS) * REPEATS)
    paths = [d / "bench-a.sqlite", d / "bench-b.sqlite"]
    total = 0
    for i, p in enumerate(paths):
        p.unlink(missing_ok=True)
        total += build(p, i, n_workloads)
    t0 = time.perf_counter()
    data = sources.load([str(p) for p in paths])
    df, runs = data.attempts, data.runs
    t1 = time.perf_counter()
    result = analyze(df, runs)
    t2 = time.perf_counter()
    sep = next(s for s in result["winners"]["separated"] if s["side"] == "(all)")
    print(f"{total} attempts in 2 stores: read {t1 - t0:.2f} s, analyze {t2 - t1:.2f} s, total {t2 - t0:.2f} s "
          f"({sep['contests']} contests, {sep['separated']} separated)")


if __name__ == "__main__":
    main()
