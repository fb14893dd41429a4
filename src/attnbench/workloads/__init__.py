"""What is measured: the frozen Workload with every semantic field, and its validation."""
from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass

MODES = ("train_fwd", "train_fwd_bwd", "prefill", "decode")
DTYPES = ("fp32", "bf16", "fp16")
CAUSAL_ALIGNS = ("top_left", "bottom_right")
LAYOUTS = ("BHND", "BNHD")  # (batch, heads, seq, dim) or (batch, seq, heads, dim)
LAUNCHES = ("eager", "graph")
L2_STATES = ("warm", "cold")
ACCUMS = ("fp32",)

DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
ENUMS = {"mode": MODES, "dtype": DTYPES, "accum": ACCUMS, "causal_align": CAUSAL_ALIGNS, "layout": LAYOUTS,
         "launch": LAUNCHES, "l2": L2_STATES}


class WorkloadError(ValueError):
    """A workload that cannot exist (bad enum value, impossible shape)."""


@dataclass(frozen=True)
class Workload:
    """One attention problem with all of its semantics spelled out.

    Tensors are Q (B, Hq, Nq, D), K (B, Hkv, Nkv, D), V (B, Hkv, Nkv, Dv) in BHND terms; the
    `layout` field says how they sit in memory. Decode is one query token per sequence against a
    KV cache of length kv_len that already holds the new token: appending K/V is outside the timed
    step (`decode_append = "excluded"` in every row).
    """

    mode: str  # train_fwd | train_fwd_bwd | prefill | decode
    batch: int
    q_len: int
    kv_len: int
    q_heads: int
    kv_heads: int  # == q_heads: MHA; divides q_heads: GQA; 1: MQA
    head_dim: int
    head_dim_v: int
    dtype: str = "bf16"
    accum: str = "fp32"  # accumulation precision the kernel is asked to use
    causal: bool = False
    causal_align: str = "bottom_right"  # top_left: q_i sees k_j<=i; bottom_right: j<=i+Nkv-Nq
    #                                     (normalised to bottom_right when causal is false)
    dropout: float = 0.0
    layout: str = "BHND"
    launch: str = "eager"
    l2: str = "warm"

    def __post_init__(self) -> None:
        # One spelling per semantics: without a mask the alignment means nothing, and 0 == 0.0.
        if self.causal is False and self.causal_align != "bottom_right" and self.causal_align in CAUSAL_ALIGNS:
            object.__setattr__(self, "causal_align", "bottom_right")
        if isinstance(self.dropout, int) and not isinstance(self.dropout, bool):
            object.__setattr__(self, "dropout", float(self.dropout))
        problems = validate(self)
        if problems:
            raise WorkloadError(f"impossible workload {self.label()}: {problems[0]}")

    # ---- derived, never stored twice -------------------------------------------------------
    @property
    def gqa_group(self) -> int:
        return self.q_heads // self.kv_heads

    @property
    def attention_kind(self) -> str:
        if self.kv_heads == self.q_heads:
            return "MHA"
        return "MQA" if self.kv_heads == 1 else "GQA"

    @property
    def needs_grad(self) -> bool:
        return self.mode == "train_fwd_bwd"

    @property
    def decode_append(self) -> str | None:
        return "excluded" if self.mode == "decode" else None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def key(self) -> str:
        """Stable identity of the semantics (hash of every field)."""
        blob = json.dumps(self.to_dict(), sort_keys=True)
        return hashlib.sha1(blob.encode()).hexdigest()[:16]

    def label(self) -> str:
        c = f"causal-{self.causal_align}" if self.causal else "full"
        return (
            f"{self.mode} B{self.batch} Nq{self.q_len} Nkv{self.kv_len} H{self.q_heads}/{self.kv_heads}"
            f" D{self.head_dim}/{self.head_dim_v} {self.dtype} {c} {self.layout} {self.launch} L2{self.l2}"
        )

    @classmethod
    def from_dict(cls, d: dict) -> "Workload":
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise WorkloadError(f"unknown workload field(s): {', '.join(sorted(unknown))}")
        return cls(**d)


def validate(w: Workload) -> list[str]:
    """Every reason the workload is impossible; empty when it is fine."""
    out = []
    for name in ("batch", "q_len", "kv_len", "q_heads", "kv_heads", "head_dim", "head_dim_v"):
        v = getattr(w, name)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            out.append(f"{name} must be a positive integer, got {v!r}")
    if out:
        return out
    if w.q_heads % w.kv_heads:
        out.append(f"q_heads {w.q_heads} is not a multiple of kv_heads {w.kv_heads}")
    if w.mode == "decode" and w.q_len != 1:
        out.append(f"decode has one query token per sequence, got q_len={w.q_len}")
    for name, allowed in ENUMS.items():
        if getattr(w, name) not in allowed:
            out.append(f"{name} {getattr(w, name)!r} not in {allowed}")
    if not isinstance(w.causal, bool):
        out.append(f"causal must be true or false, got {w.causal!r}")
    if not isinstance(w.dropout, (int, float)) or isinstance(w.dropout, bool):
        out.append(f"dropout must be a number in [0, 1), got {w.dropout!r}")
    elif not (0.0 <= w.dropout < 1.0):
        out.append(f"dropout must be in [0, 1), got {w.dropout!r}")
    if w.causal and w.causal_align == "bottom_right" and w.q_len > w.kv_len:
        out.append(f"bottom-right causal with q_len {w.q_len} > kv_len {w.kv_len} leaves query rows with no key")
    if w.launch == "graph" and w.mode == "train_fwd_bwd":
        out.append("CUDA-graph launch is offered for forward modes only")
    return out
