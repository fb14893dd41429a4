"""Each backend's throughput on the anchor shapes of ../shared/H200.md (bf16, D=128, H=32):
prefill B=4 N=4k non-causal and B=4 N=8k causal (TFLOP/s), forward + backward B=4 N=4k causal
(TFLOP/s), and decode B=32 against a 16k cache, Hkv=8 (KV GB/s, eager and graph). Median over the
OK rows' medians; "-" where a backend has no OK row for the shape, with its status when it has one.

  python lab/library_anchors.py STORE_OR_EXPORT [...]"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pandas as pd

from attnbench.store import io
from attnbench.store.db import Store

SHAPES = (  # label, filter, unit
    ("fwd 4k", dict(mode="prefill", batch=4, q_len=4096, causal=0, launch="eager"), "TFLOP/s"),
    ("fwd 8k causal", dict(mode="prefill", batch=4, q_len=8192, causal=1, launch="eager"), "TFLOP/s"),
    ("fwd+bwd 4k", dict(mode="train_fwd_bwd", batch=4, q_len=4096, causal=1, launch="eager"), "TFLOP/s"),
    ("decode B32 16k", dict(mode="decode", batch=32, kv_len=16384, launch="eager"), "GB/s"),
    ("same, graph", dict(mode="decode", batch=32, kv_len=16384, launch="graph"), "GB/s"),
)


def frame(path: str) -> pd.DataFrame:
    p = Path(path)
    if p.suffix == ".sqlite":
        s = Store(p, create=False, readonly=True)
    else:
        s = Store(Path(tempfile.mkdtemp()) / "import.sqlite")
        io.import_rows(s, io.read_rows(p))
    try:
        return s.dataframe()
    finally:
        s.close()


def table(df: pd.DataFrame) -> pd.DataFrame:
    df = df[(df["dtype"] == "bf16") & (df["head_dim"] == 128) & (df["q_heads"] == 32)]
    out = {}
    for label, where, unit in SHAPES:
        sel = df
        for k, v in where.items():
            sel = sel[sel[k] == v]
        col = {}
        for backend, rows in sel.groupby("backend"):
            ok = rows[rows["status"] == "OK"]
            if ok.empty:
                col[backend] = rows["status"].mode().iloc[0]
                continue
            work = ok["flops"] if unit == "TFLOP/s" else ok["bytes"]
            rate = (work / (ok["median_us"] * 1e-6)).median() / (1e12 if unit == "TFLOP/s" else 1e9)
            col[backend] = f"{rate:.0f}"
        out[f"{label} ({unit})"] = col
    return pd.DataFrame(out).fillna("-")


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    df = pd.concat([frame(a) for a in argv], ignore_index=True)
    print(table(df).to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
