"""tritonbench's CSV of the flash_attention operator (pytorch-labs/tritonbench, `--op flash_attention --output
FILE.csv`): ';'-separated, the shape tuple first, then '<backend>-<metric>' columns (latency in ms, tflops)."""
from __future__ import annotations

import csv
import io
import re

from .published import Published, ReadError, Sheet, cudnn_version, refused, workload

X_LABELS = ("(Batch, Heads, SeqLen, SeqLen_KV, Dhead)", "(Batch, Heads, SeqLen, Dhead)")
BACKENDS = {"sdpa": ("sdpa-flash",), "flash_v2": ("fa2",), "flash_v3": ("fa3",), "flex_attention": ("flex",)}
REFUSED = {"aten": "tritonbench's unfused eager baseline, not a library kernel attnbench runs"}
# the operator's defaults; the CSV does not say which were used (--assume overrides)
DEFAULTS = {"mode": "fwd", "dtype": "bf16", "causal": "false"}
TIMING = "triton do_bench (CUDA events, L2 cleared before every call), p50"
FLOPS = "4*B*H*N*Nkv*D, halved when causal; fwd+bwd 3.5x the forward"
LATENCY = re.compile(r"^\s*([0-9.eE+-]+)\s*(?:\(±\s*([0-9.]+)%\))?\s*$")


def looks_like(text: str) -> bool:
    head = text.lstrip().split("\n", 1)[0]
    return any(head.startswith(x + ";") or head == x for x in X_LABELS)


def read(text: str, assume: dict | None = None, fmt: str = "tritonbench flash_attention CSV") -> Sheet:
    opts = {**DEFAULTS, **(assume or {})}
    unknown = set(opts) - set(DEFAULTS)
    if unknown:
        raise ReadError(f"--assume {', '.join(sorted(unknown))}: {fmt} takes {', '.join(DEFAULTS)}")
    if opts["mode"] not in ("fwd", "fwd_bwd", "bwd"):
        raise ReadError(f"--assume mode={opts['mode']!r}: tritonbench's modes are fwd, bwd and fwd_bwd")
    if opts["dtype"] not in ("bf16", "fp16", "fp32"):
        raise ReadError(f"--assume dtype={opts['dtype']!r}: mapped are bf16, fp16 and fp32")
    if opts["causal"].lower() not in ("true", "false"):
        raise ReadError(f"--assume causal={opts['causal']!r}: true or false")
    table = list(csv.reader(io.StringIO(text), delimiter=";"))
    header, body = table[0], [r for r in table[1:] if r and r[0].strip()]
    backends = {}  # label -> {metric: column index}
    for j, col in enumerate(header[1:], start=1):
        label, sep, metric = col.rpartition("-")
        if sep and metric in ("latency", "tflops"):
            backends.setdefault(label, {})[metric] = j
    if not any("latency" in m for m in backends.values()):
        raise ReadError(f"{fmt} without a '<backend>-latency' column")
    rows = []
    for i, r in enumerate(body, start=1):
        if r[0].strip() in ("average", "hashes"):
            continue
        shape = _shape(r[0], i)
        for label, cols in backends.items():
            rows.append(_cell(i, label, cols, r, shape, opts))
    said = "--assume" if assume else "the operator's defaults"
    notes = [f"mode {opts['mode']}, dtype {opts['dtype']}, causal {opts['causal']} ({said}; its CSV does not record "
             "them), GPU not stated (--gpu)"]
    return Sheet(fmt, rows, notes)


def _shape(cell: str, i: int) -> tuple[int, int, int, int, int]:
    try:
        v = [int(x) for x in cell.strip().strip("()").split(",")]
    except ValueError:
        raise ReadError(f"row {i}: shape {cell!r} is not a tuple of integers") from None
    if len(v) == 4:
        v = [v[0], v[1], v[2], v[2], v[3]]
    if len(v) != 5:
        raise ReadError(f"row {i}: shape {cell!r} is not (Batch, Heads, SeqLen, SeqLen_KV, Dhead)")
    return tuple(v)  # type: ignore[return-value]


def _cell(i: int, label: str, cols: dict, r: list, shape, opts) -> Published:
    b, h, n, nkv, d = shape
    causal = opts["causal"].lower() == "true"
    passname = {"fwd": "fwd", "fwd_bwd": "fwd+bwd", "bwd": "bwd"}[opts["mode"]]
    names = BACKENDS.get(label)
    toolkit = {}
    if label.startswith("cudnn-"):
        names, toolkit = ("sdpa-cudnn",), {"cuDNN": cudnn_version(label.split("-", 1)[1]) or label}
    lat = LATENCY.match(r[cols["latency"]]) if "latency" in cols and cols["latency"] < len(r) else None
    if names is None:
        why = REFUSED.get(label, f"backend {label!r} has no attnbench counterpart (mapped: {', '.join(BACKENDS)}, "
                                 "cudnn-<version>)")
        return refused(i, label, passname, why, toolkit=toolkit)
    if passname == "bwd":
        return refused(i, label, passname, "backward alone: attnbench times forward and backward as one step",
                       toolkit=toolkit)
    if lat is None or not float(lat.group(1)) > 0:
        return refused(i, label, passname, "no latency published for this shape", toolkit=toolkit)
    t = float(lat.group(1))
    amount = 4.0 * b * h * n * nkv * d * (0.5 if causal else 1.0) * (3.5 if passname == "fwd+bwd" else 1.0)
    spread = None
    if lat.group(2):
        rel = float(lat.group(2)) / 100
        spread = (t * (1 - rel), t * (1 + rel))
    try:
        fig = float(r[cols["tflops"]]) if "tflops" in cols else amount / t / 1e9
    except (ValueError, IndexError):
        fig = amount / t / 1e9
    w, bad = workload(i, mode="train_fwd" if passname == "fwd" else "train_fwd_bwd", batch=b, q_len=n, kv_len=nkv,
                      q_heads=h, kv_heads=h, head_dim=d, head_dim_v=d, dtype=opts["dtype"], causal=causal,
                      causal_align="top_left", layout="BHND", launch="eager", l2="cold")
    if bad:
        return refused(i, label, passname, bad, toolkit=toolkit)
    return Published(i, label, passname, fig, "TFLOP/s", t, w, names, amount, FLOPS, toolkit=toolkit, timing=TIMING,
                     spread_ms=spread)
