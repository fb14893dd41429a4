"""NVIDIA cudnn-frontend's attention benchmark CSVs: the training suite (benchmark/sdpa_benchmark_training) and the
inference suite (benchmark/attention_inference), as their runners write them (docs/method/referee.md)."""
from __future__ import annotations

from .published import (Published, ReadError, Sheet, cudnn_version, dtype_of, integer, number, refused,
                        workload)

TRAINING_REQUIRED = ("backend", "data_type", "attn_mask", "batch_size", "q_seqlen", "kv_seqlen", "num_q_heads",
                     "num_kv_heads", "head_dim_qk", "head_dim_vo", "profile_pass", "fwd_time_ms", "bwd_time_ms",
                     "fwd_tflops", "bwd_tflops", "success", "gpu_name")
INFERENCE_REQUIRED = ("phase", "backend", "data_type", "kv_cache_dtype", "batch_size", "q_tokens", "kv_len",
                      "num_q_heads", "num_kv_heads", "head_dim_qk", "head_dim_vo", "kind", "time_ms", "success",
                      "gpu_name")
# the harness's backend names -> the attnbench backends that run the same library kernel
TRAINING_BACKENDS = {"cudnn": ("sdpa-cudnn", "cudnn-fe"), "cudnn_fe": ("sdpa-cudnn", "cudnn-fe"),  # cudnn_fe: 2025
                     "pyt_cudnn": ("sdpa-cudnn",), "flash_attention_4": ("fa4",), "flash_attention_3": ("fa3",),
                     "pyt_flash_attention": ("sdpa-flash",), "pyt_efficient_attention": ("sdpa-efficient",)}
INFERENCE_BACKENDS = {"cudnn": ("sdpa-cudnn", "cudnn-fe"), "flash_attention_4": ("fa4",)}
MASKS = {"no_mask": (False, "bottom_right"), "top_left": (True, "top_left"), "bottom_right": (True, "bottom_right")}
# Both suites time the same way (their docstrings say so): the torch profiler's device time of the attention
# kernels, an L2 flush (256 MiB written) before every call, the median over the calls. attnbench's l2=cold flushes
# L2 before every sample of one call; the host launch path is outside both.
TIMING = "kernel time (torch profiler), L2 flushed before every call, median of {n} calls"
TRAINING_FLOPS = ("causal pairs counted as tril(Nq x Nkv), the top-left count whatever the alignment; backward "
                  "2*(3*Dqk + 2*Dv) FLOPs per pair; fwd+bwd is the published fwd time plus the bwd time")
INFERENCE_FLOPS = "2*B*Hq*Nq*Nkv*(Dqk + Dv), halved for a square causal prefill, not reduced otherwise"
INFERENCE_BYTES = "K and V read once, Q read and O written once (2 bytes an element)"


def is_training(columns) -> bool:
    return {"profile_pass", "fwd_time_ms"} <= set(columns)


def is_inference(columns) -> bool:
    return {"phase", "q_tokens", "time_ms"} <= set(columns)


def _missing(columns, required, fmt: str) -> None:
    lacking = [c for c in required if c not in columns]
    if lacking:
        raise ReadError(f"{fmt} without the column(s) {', '.join(lacking)}")


def _ok(value) -> bool:
    return str(value).strip().lower() in ("true", "1", "yes")


def _first_line(text) -> str:
    lines = [x.strip() for x in str(text or "").splitlines() if x.strip()]
    return lines[-1][:120] if lines else "no error message"  # a traceback's last line says what failed


def _window(value, row: int) -> int:
    return 0 if str(value).strip() in ("", "None", "nan") else integer(value, "sliding_window_size", row)


def tril_pairs(q: int, kv: int, window: int = 0) -> int:
    """The training suite's count of unmasked pairs of a causal mask: torch.tril(ones(q, kv)).sum(), or with a
    window W its closed form over S = min(q, kv)."""
    if window:
        s = min(q, kv)
        return s * (s + 1) // 2 if s <= window else window * (window + 1) // 2 + (s - window) * window
    full = min(q, kv)
    return full * (full + 1) // 2 + (q - full) * kv if q > kv else full * (full + 1) // 2


def is_per_pass(columns) -> bool:
    """The layout of 2026-04 on: one row per pass (profile_pass fwd or bwd) with `time_ms` and `tflops`."""
    return {"profile_pass", "time_ms", "tflops", "q_seqlen"} <= set(columns)


def is_legacy(columns) -> bool:
    """The 2025 layout (benchmark_{bf16,fp8}_sdpa.py's artifacts): forward_time, backward_time, is_causal."""
    return {"forward_time", "backward_time", "is_causal", "q_seqlen"} <= set(columns)


def training(frame, fmt: str = "cudnn-frontend training CSV") -> Sheet:
    _missing(frame.columns, TRAINING_REQUIRED, fmt)
    rows: list[Published] = []
    for i, r in enumerate(frame.to_dict("records"), start=1):
        rows += _training_row(i, r)
    return Sheet(fmt, rows)


PASS_KEY = ("backend", "data_type", "attn_mask", "batch_size", "q_seqlen", "kv_seqlen", "num_q_heads",
            "num_kv_heads", "head_dim_qk", "head_dim_vo", "sliding_window_size")


def per_pass(frame, fmt: str = "cudnn-frontend training CSV (one row per pass)") -> Sheet:
    """A forward row gives the forward figure; a backward row with the forward row of the same configuration
    gives forward+backward (their two times summed, under the backward row's number); a backward row
    without one is refused."""
    required = tuple(c for c in TRAINING_REQUIRED if c not in ("fwd_time_ms", "bwd_time_ms", "fwd_tflops",
                                                               "bwd_tflops")) + ("time_ms", "tflops")
    _missing(frame.columns, required, fmt)
    records = frame.to_dict("records")
    key = lambda r: tuple(str(r.get(c, "")).strip() for c in PASS_KEY)  # noqa: E731
    fwd = {key(r): r for r in records if str(r["profile_pass"]).strip() == "fwd"}
    rows: list[Published] = []
    for i, r in enumerate(records, start=1):
        p = str(r["profile_pass"]).strip()
        if p == "fwd":
            rows += _training_row(i, {**r, "fwd_time_ms": r["time_ms"], "fwd_tflops": r["tflops"],
                                      "bwd_time_ms": 0, "bwd_tflops": 0})
        elif p == "bwd" and key(r) in fwd:
            f = fwd[key(r)]
            ok = str(_ok(f["success"]) and _ok(r["success"]))
            rows += _training_row(i, {**r, "profile_pass": "both", "success": ok, "fwd_time_ms": f["time_ms"],
                                      "fwd_tflops": f["tflops"], "bwd_time_ms": r["time_ms"], "bwd_tflops": r["tflops"],
                                      "error_message": r.get("error_message") or f.get("error_message")},
                                  only="fwd+bwd")
        else:
            rows += _training_row(i, {**r, "fwd_time_ms": 0, "fwd_tflops": 0, "bwd_time_ms": r.get("time_ms", 0),
                                      "bwd_tflops": r.get("tflops", 0)})
    return Sheet(fmt, rows)


def legacy(frame, name: str, fmt: str = "cudnn-frontend training CSV (2025 layout)") -> Sheet:
    """The 2025 artifacts: the GPU and the dtype are in the file's name (sdpa_bf16_benchmark_results_NVIDIA_GB200.csv),
    the mask is is_causal (top-left), and the fp8 file has a `precision` column instead of `backend`."""
    import re

    gpu = re.search(r"results_(NVIDIA_[A-Za-z0-9_]+?)\.csv$", name)
    dtype = re.search(r"sdpa_(bf16|fp16|fp8)_", name)
    rows = []
    for i, r in enumerate(frame.to_dict("records"), start=1):
        backend = str(r.get("backend") or "cudnn_fe").strip()
        stated = r.get("precision") or (dtype.group(1) if dtype else "-")
        t_f, t_b = (_finite(r.get(c)) for c in ("forward_time", "backward_time"))
        rows += _training_row(i, {
            "backend": backend.removesuffix("_fp8"),  # cudnn_fe_fp8: cuDNN's graph on fp8 inputs
            "data_type": "fp8" if backend.endswith("_fp8") else stated,
            "attn_mask": "top_left" if _ok(r["is_causal"]) else "no_mask", "batch_size": r["batch_size"],
            "q_seqlen": r["q_seqlen"], "kv_seqlen": r["kv_seqlen"], "num_q_heads": r["num_q_heads"],
            "num_kv_heads": r["num_kv_heads"], "head_dim_qk": r["head_dim"], "head_dim_vo": r["head_dim"],
            "profile_pass": "both", "fwd_time_ms": t_f, "bwd_time_ms": t_b, "fwd_tflops": r["fwd_tflops_per_sec"],
            "bwd_tflops": r["bwd_tflops_per_sec"], "success": str(bool(t_f and t_b)),
            "error_message": "no time published (inf)", "num_iterations": "30",
            "gpu_name": gpu.group(1).replace("_", " ") if gpu else ""})
    notes = [] if gpu else ["GPU not stated: the 2025 layout names it in the file name (--gpu)"]
    return Sheet(fmt, rows, notes)


def _finite(v) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if f == f and f not in (float("inf"), float("-inf")) and f > 0 else None


def _training_row(i: int, r: dict, only: str | None = None) -> list[Published]:
    """The figures of one row in the layout with fwd and bwd columns; `only`: that pass alone."""
    name = str(r["backend"]).strip()
    gpu = str(r["gpu_name"]).strip() or None
    toolkit = {k: v for k, v in (("cuDNN", cudnn_version(r.get("cudnn_backend_version"))),
                                 ("cudnn-frontend", str(r.get("cudnn_version") or "").strip() or None)) if v}
    passes = {"fwd": ["fwd"], "both": ["fwd", "fwd+bwd"], "bwd": ["bwd"]}.get(str(r["profile_pass"]).strip())
    if only and passes:
        passes = [only]
    common = dict(gpu=gpu, toolkit=toolkit)
    if passes is None:
        return [refused(i, name, str(r["profile_pass"]), f"profile_pass {r['profile_pass']!r} is not fwd, bwd or both",
                        **common)]
    if not _ok(r["success"]):
        return [refused(i, name, p, f"the published run failed ({_first_line(r.get('error_message'))})", **common)
                for p in passes]
    dtype = dtype_of(r["data_type"])
    why = None
    if name not in TRAINING_BACKENDS:
        why = f"backend {name!r} has no attnbench counterpart (mapped: {', '.join(TRAINING_BACKENDS)})"
    elif dtype is None:
        why = (f"data_type {r['data_type']}: training rows are mapped for bf16, fp16 and fp32 (attnbench offers fp8 "
               "for the forward inference modes only, and no block-scaled formats)")
    elif str(r["attn_mask"]).strip() not in MASKS:
        why = f"attn_mask {r['attn_mask']!r} is not no_mask, top_left or bottom_right"
    if why:
        return [refused(i, name, p, why, **common) for p in passes]
    b, q, kv = (integer(r[c], c, i) for c in ("batch_size", "q_seqlen", "kv_seqlen"))
    hq, hkv, dqk, dv = (integer(r[c], c, i) for c in ("num_q_heads", "num_kv_heads", "head_dim_qk", "head_dim_vo"))
    causal, align = MASKS[str(r["attn_mask"]).strip()]
    window = _window(r.get("sliding_window_size", ""), i)
    pairs = tril_pairs(q, kv, window) if causal else q * kv
    fwd_flops = 2.0 * b * hq * pairs * (dqk + dv)
    n = str(r.get("num_iterations") or "?").strip()
    out = []
    for p in passes:
        if p == "bwd":
            out.append(refused(i, name, p, "backward alone: attnbench times forward and backward as one step "
                               "(profile_pass both is mapped)", **common))
            continue
        if p == "fwd+bwd" and _ok(r.get("deterministic_bwd", "")):
            out.append(refused(i, name, p, "deterministic backward is not an attnbench axis", **common))
            continue
        w, bad = workload(i, mode="train_fwd" if p == "fwd" else "train_fwd_bwd", batch=b, q_len=q, kv_len=kv,
                          q_heads=hq, kv_heads=hkv, head_dim=dqk, head_dim_v=dv, dtype=dtype, causal=causal,
                          causal_align=align, window=window, layout="BNHD", launch="eager", l2="cold")
        if bad:
            out.append(refused(i, name, p, bad, **common))
            continue
        t_fwd = number(r["fwd_time_ms"], "fwd_time_ms", i)
        if p == "fwd":
            t, amount, fig = t_fwd, fwd_flops, number(r["fwd_tflops"], "fwd_tflops", i)
        else:
            t = t_fwd + number(r["bwd_time_ms"], "bwd_time_ms", i)
            amount = 2.0 * b * hq * pairs * (4 * dqk + 3 * dv)
            fig = amount / t / 1e9
        if t <= 0:
            out.append(refused(i, name, p, f"published time {t:g} ms", **common))
            continue
        out.append(Published(i, name, p, fig, "TFLOP/s", t, w, TRAINING_BACKENDS[name], amount, TRAINING_FLOPS,
                             timing=TIMING.format(n=n), **common))
    return out


def inference(frame, fmt: str = "cudnn-frontend inference CSV") -> Sheet:
    _missing(frame.columns, INFERENCE_REQUIRED, fmt)
    rows = [_inference_row(i, r) for i, r in enumerate(frame.to_dict("records"), start=1)]
    return Sheet(fmt, rows, ["context rows are causal (the suite's default; its CSV has no mask column)"])


def _inference_row(i: int, r: dict) -> Published:
    name, phase = str(r["backend"]).strip(), str(r["phase"]).strip()
    q = integer(r["q_tokens"], "q_tokens", i)
    passname = "decode" if phase == "generation" and q == 1 else "prefill"
    detail = str(r.get("backend_detail") or "").strip()
    toolkit = {}
    if detail.startswith("cudnn "):
        toolkit["cuDNN"] = detail.split()[1]
    elif detail:
        toolkit[name] = detail
    if cudnn_version(r.get("cudnn_backend_version")):
        toolkit.setdefault("cuDNN", cudnn_version(r.get("cudnn_backend_version")))
    common = dict(gpu=str(r["gpu_name"]).strip() or None, toolkit=toolkit)
    if not _ok(r["success"]):
        return refused(i, name, passname, f"the published run failed ({_first_line(r.get('error_message'))})",
                       **common)
    dtype, kv_dtype = dtype_of(r["data_type"]), dtype_of(r["kv_cache_dtype"])
    why = None
    if name not in INFERENCE_BACKENDS:
        why = f"backend {name!r} has no attnbench counterpart here (mapped: {', '.join(INFERENCE_BACKENDS)})"
    elif phase not in ("context", "generation"):
        why = f"phase {phase!r} is not context or generation"
    elif str(r["kind"]).strip().lower() not in ("gqa", "mha", "mqa"):
        why = f"kind {r['kind']}: attnbench has no absorbed-MLA workload"
    elif dtype is None or kv_dtype != dtype:
        why = (f"data_type {r['data_type']} with a {r['kv_cache_dtype']} KV cache: mapped are bf16/fp16 rows with "
               "Q, K and V in one dtype")
    if why:
        return refused(i, name, passname, why, **common)
    b, kv = integer(r["batch_size"], "batch_size", i), integer(r["kv_len"], "kv_len", i)
    hq, hkv, dqk, dv = (integer(r[c], c, i) for c in ("num_q_heads", "num_kv_heads", "head_dim_qk", "head_dim_vo"))
    window = _window(r.get("sliding_window_size", ""), i)
    t = number(r["time_ms"], "time_ms", i)
    decode = passname == "decode"
    # context: causal, top-left when square, else anchored bottom-right (a chunk at the sequence's end);
    # generation with several new tokens: bottom-right causal; one token sees the whole cache
    causal = not decode or bool(window)
    align = "top_left" if phase == "context" and q == kv else "bottom_right"
    w, bad = workload(i, mode=passname, batch=b, q_len=q, kv_len=kv, q_heads=hq, kv_heads=hkv, head_dim=dqk,
                      head_dim_v=dv, dtype=dtype, causal=causal, causal_align=align, window=window, layout="BNHD",
                      launch="graph" if decode else "eager", l2="cold")
    if bad or t <= 0:
        return refused(i, name, passname, bad or f"published time {t:g} ms", **common)
    n = str(r.get("num_iterations") or "?").strip()
    if decode:
        read = min(kv, window + q) if window else kv
        amount = float(b * read * hkv * (dqk + dv) * 2 + b * q * hq * (dqk + dv) * 2)
        fig, unit, conv = _cell(r.get("gbps"), amount / t / 1e6), "GB/s", INFERENCE_BYTES
    else:
        amount = 2.0 * b * hq * q * kv * (dqk + dv) * (0.5 if phase == "context" and q == kv else 1.0)
        fig, unit, conv = _cell(r.get("tflops"), amount / t / 1e9), "TFLOP/s", INFERENCE_FLOPS
    return Published(i, name, passname, fig, unit, t, w, INFERENCE_BACKENDS[name], amount, conv,
                     timing=TIMING.format(n=n), **common)


def _cell(value, derived: float) -> float:
    """A published figure, or the one its time implies when the cell is empty."""
    try:
        v = float(value)
        return v if v == v else derived
    except (TypeError, ValueError):
        return derived
