"""FlashAttention's benchmark output: the lines benchmarks/benchmark_flash_attention.py (Dao-AILab/flash-attention)
prints, a config header then one line per method with its forward, backward and forward+backward TFLOP/s."""
from __future__ import annotations

import re

from .published import Published, ReadError, Sheet, refused, workload

HEADER = re.compile(r"^\s*(?:#+\s*)?causal=(True|False),\s*headdim=(\d+),\s*batch_size=(\d+),\s*seqlen=(\d+)\s*#*\s*$")
_NUM = r"([0-9.]+|nan|inf)"
METHOD = re.compile(rf"^\s*(\S+) fwd: {_NUM} TFLOPs/s, bwd: {_NUM} TFLOPs/s, fwd \+ bwd: {_NUM} TFLOPs/s\s*$")
BACKENDS = {"Flash2": ("fa2", "sdpa-flash")}  # sdpa-flash: PyTorch's vendored FlashAttention-2
REFUSED = {"Pytorch": "the script's own unfused PyTorch composition, not a library kernel attnbench runs",
           "Triton": "the Triton tutorial kernel of triton.ops, not an attnbench backend",
           "xformers.c": "xformers with the cutlass op forced; attnbench's xformers backend lets xformers choose",
           "xformers.f": "xformers with the flash op forced; attnbench's xformers backend lets xformers choose"}
# what the script fixes and its output does not say (--assume overrides)
DEFAULTS = {"dim": "2048", "dtype": "fp16"}
TIMING = "mean of 30 calls (torch.utils.benchmark, host clock), L2 as the previous call left it"
FLOPS = "4*B*N^2*H*D, halved (integer division) when causal; backward 2.5x, fwd+bwd 3.5x the forward"


def looks_like(text: str) -> bool:
    return any(METHOD.match(line) for line in text.splitlines()[:200])


def read(text: str, assume: dict | None = None, fmt: str = "FlashAttention benchmark output") -> Sheet:
    opts = {**DEFAULTS, **(assume or {})}
    unknown = set(opts) - set(DEFAULTS)
    if unknown:
        raise ReadError(f"--assume {', '.join(sorted(unknown))}: {fmt} takes {', '.join(DEFAULTS)}")
    try:
        dim = int(opts["dim"])
    except ValueError:
        raise ReadError(f"--assume dim={opts['dim']!r} is not an integer") from None
    if opts["dtype"] not in ("fp16", "bf16"):
        raise ReadError(f"--assume dtype={opts['dtype']!r}: the script runs fp16 or bf16")
    rows: list[Published] = []
    config = None
    for n, line in enumerate(text.splitlines(), start=1):
        if h := HEADER.match(line):
            config = (h.group(1) == "True", int(h.group(2)), int(h.group(3)), int(h.group(4)))
            continue
        m = METHOD.match(line)
        if not m:
            continue
        if config is None:
            raise ReadError(f"line {n}: a method line before any 'causal=..., headdim=...' header")
        rows += _method(n, m, config, dim, opts["dtype"])
    if not rows:
        raise ReadError(f"{fmt}: no method lines")
    said = {k: "--assume" if k in (assume or {}) else "the script's" for k in DEFAULTS}
    notes = [f"heads = {dim} // headdim ({said['dim']} dim), dtype {opts['dtype']} ({said['dtype']}), "
             "GPU not stated (--gpu)"]
    return Sheet(fmt, rows, notes)


def _method(n: int, m, config, dim: int, dtype: str) -> list[Published]:
    name = m.group(1)
    causal, d, b, seqlen = config
    figures = {"fwd": float(m.group(2)), "fwd+bwd": float(m.group(4))}
    if name not in BACKENDS:
        why = REFUSED.get(name, f"method {name!r} has no attnbench counterpart (mapped: {', '.join(BACKENDS)})")
        return [refused(n, name, p, why, f, "TFLOP/s") for p, f in figures.items()]
    if dim % d:
        return [refused(n, name, p, f"heads = dim {dim} / headdim {d} is not whole", f, "TFLOP/s")
                for p, f in figures.items()]
    h = dim // d
    fwd_flops = 4 * b * seqlen ** 2 * h * d // (2 if causal else 1)
    out = []
    for p, fig in figures.items():
        amount = fwd_flops if p == "fwd" else 3.5 * fwd_flops
        if not fig > 0 or fig == float("inf"):
            out.append(refused(n, name, p, f"the published figure is {fig:g} (the script prints 0.00 for a failed "
                                           "or skipped timing)", fig, "TFLOP/s"))
            continue
        w, bad = workload(n, mode="train_fwd" if p == "fwd" else "train_fwd_bwd", batch=b, q_len=seqlen,
                          kv_len=seqlen, q_heads=h, kv_heads=h, head_dim=d, head_dim_v=d, dtype=dtype, causal=causal,
                          causal_align="top_left", layout="BNHD", launch="eager", l2="warm")
        if bad:
            out.append(refused(n, name, p, bad, fig, "TFLOP/s"))
            continue
        out.append(Published(n, name, p, fig, "TFLOP/s", amount / fig / 1e9, w, BACKENDS[name], float(amount), FLOPS,
                             timing=TIMING))
    return out
