"""Results tables (import --format table) written by tests: stores whose answers are known by construction."""
from __future__ import annotations

import csv
from pathlib import Path

# one prefill workload per name; every test table uses these shapes
SHAPES = {
    "w1": {"seqlen": 1024}, "w2": {"seqlen": 2048}, "w3": {"seqlen": 4096}, "w4": {"seqlen": 8192},
    "w5": {"seqlen": 512}, "w6": {"seqlen": 256}, "w7": {"seqlen": 16384},
}
BASE = {"mode": "prefill", "batch": 1, "q_heads": 8, "kv_heads": 8, "head_dim": 64, "dtype": "bf16", "causal": "true"}


def rows_for(times: dict, device: str = "GPU-X", spread: float = 0.002, samples: int = 5, **extra) -> list[dict]:
    """times: {workload name: {backend: [median of repeat 0, 1, ...]}} -> table rows; each repeat holds
    `samples` raw samples spread ±spread around its median (0: one sample, the median alone)."""
    out = []
    for w, per_backend in times.items():
        for backend, medians in per_backend.items():
            for rep, m in enumerate(medians):
                row = {**BASE, **SHAPES[w], "device": device, "backend": backend, "repeat": rep, "median_us": m,
                       **extra}
                if samples > 1:
                    half = samples // 2
                    row["samples_us"] = " ".join(f"{m * (1 + spread * (i - half) / half):.6f}" for i in range(samples))
                out.append(row)
    return out


def write(path: Path, rows: list[dict]) -> Path:
    cols = list(dict.fromkeys(k for r in rows for k in r))
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)
    return path


def store(cli, tmp_path: Path, name: str, rows: list[dict]) -> Path:
    """A store named name.sqlite holding the rows, made through `attnbench import --format table`."""
    db = tmp_path / f"{name}.sqlite"
    res = cli("import", "--format", "table", write(tmp_path / f"{name}.csv", rows), "--db", db)
    assert res.rc == 0, res.err
    return db
