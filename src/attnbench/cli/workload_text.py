"""One workload from a line of text (advise --workload) or from a model config (advise --model)."""
from __future__ import annotations

import json
from pathlib import Path

from ..workloads import ENUMS, Workload, WorkloadError
from ..workloads.axes import NAMES, axis, parse_size

# short names people write for the axes
ALIASES = {"b": "batch", "nq": "q_len", "nkv": "kv_len", "hq": "q_heads", "h": "q_heads", "hkv": "kv_heads",
           "d": "head_dim", "dv": "head_dim_v"}
DTYPE_NAMES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32",
              "float8_e4m3fn": "fp8_e4m3"}
WORDS = {"causal": ("causal", True), "full": ("causal", False), "noncausal": ("causal", False),
         "cold": ("l2", "cold"), "warm": ("l2", "warm")}


def _word(token: str) -> tuple[str, object]:
    low = token.lower()
    if low in WORDS:
        return WORDS[low]
    if low in DTYPE_NAMES:
        return "dtype", DTYPE_NAMES[low]
    for name in ("mode", "dtype", "launch", "layout", "causal_align"):
        if token in ENUMS[name] or low in ENUMS[name]:
            return name, token if token in ENUMS[name] else low
    raise WorkloadError(f"unknown word {token!r} in the workload (write AXIS=VALUE; axes: {', '.join(NAMES)})")


def parse_workload(text: str) -> Workload:
    """'prefill B=4 N=8192 Hq=32 Hkv=8 D=128 bf16 causal' -> Workload. N is both lengths (decode: the
    cache length, one query); Hkv defaults to Hq and Dv to D; unnamed fields take Workload's defaults."""
    fields: dict = {}
    seqlen = None
    for token in text.split():
        key, sep, value = token.partition("=")
        if not sep:
            name, v = _word(token)
        elif key.lower() in ("n", "seqlen"):
            seqlen = parse_size(value)
            continue
        else:
            name = ALIASES.get(key.lower(), key)
            v = axis(name).parse(value)
        if name in fields and fields[name] != v:
            raise WorkloadError(f"{name} given twice in the workload ({fields[name]!r} and {v!r})")
        fields[name] = v
    return _complete(fields, seqlen)


def _complete(fields: dict, seqlen: int | None) -> Workload:
    for need in ("mode", "batch", "q_heads", "head_dim"):
        if need not in fields:
            raise WorkloadError(f"the workload names no {need}")
    if seqlen is not None:
        fields.setdefault("kv_len", seqlen)
        fields.setdefault("q_len", 1 if fields["mode"] == "decode" else seqlen)
    if fields["mode"] == "decode":
        fields.setdefault("q_len", 1)
    if "kv_len" not in fields or "q_len" not in fields:
        raise WorkloadError("the workload names no length: N= (or Nq= and Nkv=)")
    fields.setdefault("kv_heads", fields["q_heads"])
    fields.setdefault("head_dim_v", fields["head_dim"])
    return Workload(**fields)


def from_model(path: str, args) -> Workload:
    """The attention workload of a Hugging-Face-style config at --batch, --seqlen, --mode, --launch
    (cli/comparison_args.py MODEL_HELP)."""
    p = Path(path)
    try:
        cfg = json.loads(p.read_text())
    except FileNotFoundError:
        raise WorkloadError(f"model config not found: {p}") from None
    except (OSError, ValueError) as e:
        raise WorkloadError(f"cannot read {p} as JSON: {e}") from None
    if not isinstance(cfg, dict) or "num_attention_heads" not in cfg:
        raise WorkloadError(f"{p} has no num_attention_heads")
    hq = int(cfg["num_attention_heads"])
    if cfg.get("head_dim"):
        d = int(cfg["head_dim"])
    elif cfg.get("hidden_size"):
        d = int(cfg["hidden_size"]) // hq
    else:
        raise WorkloadError(f"{p} has neither head_dim nor hidden_size")
    dtype = str(cfg.get("torch_dtype") or "bfloat16")
    if args.batch < 1:
        raise WorkloadError("--batch must be at least 1")
    fields = {"mode": args.mode, "batch": args.batch, "q_heads": hq,
              "kv_heads": int(cfg.get("num_key_value_heads") or hq), "head_dim": d,
              "dtype": DTYPE_NAMES.get(dtype, dtype), "launch": args.launch,
              "causal": args.mode != "decode"}  # one query sees the whole cache: no mask to apply
    return _complete(fields, parse_size(args.seqlen))
