"""What is measured: the frozen Workload with every semantic field, and its validation."""
from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field

MODES = ("train_fwd", "train_fwd_bwd", "prefill", "decode")
DTYPES = ("fp32", "bf16", "fp16", "fp8_e4m3")
FORWARD_ONLY_DTYPES = ("fp8_e4m3",)  # inference formats: no training modes (docs/methodology.md, FP8)
CAUSAL_ALIGNS = ("top_left", "bottom_right")
LAYOUTS = ("BHND", "BNHD")  # (batch, heads, seq, dim) or (batch, seq, heads, dim)
LAUNCHES = ("eager", "graph")
L2_STATES = ("warm", "cold")
ACCUMS = ("fp32",)

DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8_e4m3": 1}
FP8_MAX = 448.0  # largest finite float8_e4m3fn: fp8 inputs saturate there, cudnn-fe scales P by it
LENGTH_KINDS = ("fixed", "uniform", "longtail")  # workloads/varlen.py
APPENDS = ("excluded", "included")  # decode_append: the new token's K/V written inside the timed step or not
ENUMS = {"mode": MODES, "dtype": DTYPES, "accum": ACCUMS, "causal_align": CAUSAL_ALIGNS, "layout": LAYOUTS,
         "launch": LAUNCHES, "l2": L2_STATES, "lengths": LENGTH_KINDS, "decode_append": APPENDS}


def _axis(doc: str, short: str, length: bool = False, since: int | None = None,
          modes: tuple[str, ...] | None = None) -> dict:
    """Field metadata of one workload axis: what it means (store column docs), its short header
    (tables), whether its values are lengths ('4k' accepted), `since`: the store schema version
    that added it (None: there from the start), and `modes`: the modes it is defined for when not
    all of them; a workload of another mode holds None there, as its stored row does (NULL).
    workloads/axes.py reads it."""
    return {"doc": doc, "short": short, "length": length, "since": since, "modes": modes}


class WorkloadError(ValueError):
    """A workload that cannot exist (bad enum value, impossible shape)."""


@dataclass(frozen=True)
class Workload:
    """One attention problem with all of its semantics spelled out.

    Tensors are Q (B, Hq, Nq, D), K (B, Hkv, Nkv, D), V (B, Hkv, Nkv, Dv) in BHND terms; the
    `layout` field says how they sit in memory. Decode is one query token per sequence against a
    KV cache of length kv_len: with `decode_append` excluded (the default) the cache already holds
    the new token and appending K/V is outside the timed step; included, the timed step writes the
    new token's K/V into slot kv_len - 1 and then attends over all kv_len slots (workloads/append.py).
    """

    mode: str = field(metadata=_axis("train_fwd | train_fwd_bwd | prefill | decode", "mode"))
    batch: int = field(metadata=_axis("B", "B"))
    q_len: int = field(metadata=_axis("query length Nq (1 for decode)", "Nq", length=True))
    kv_len: int = field(metadata=_axis("key/value length Nkv (KV-cache length for decode)", "Nkv", length=True))
    q_heads: int = field(metadata=_axis("query heads Hq", "Hq"))
    kv_heads: int = field(metadata=_axis("key/value heads Hkv (Hq: MHA, 1: MQA, else GQA)", "Hkv"))
    head_dim: int = field(metadata=_axis("D of Q and K", "D"))
    head_dim_v: int = field(metadata=_axis("D of V and O", "Dv"))
    dtype: str = field(default="bf16", metadata=_axis("fp32 | bf16 | fp16 | fp8_e4m3", "dtype"))
    accum: str = field(default="fp32", metadata=_axis("accumulation precision asked for", "accum"))
    causal: bool = field(default=False, metadata=_axis("1 when a causal mask applies", "causal"))
    # normalised to bottom_right when causal is false
    causal_align: str = field(default="bottom_right", metadata=_axis(
        "top_left (j <= i) or bottom_right (j <= i + Nkv - Nq)", "align"))
    dropout: float = field(default=0.0, metadata=_axis("dropout probability", "dropout"))
    layout: str = field(default="BHND", metadata=_axis("BHND or BNHD memory layout of Q, K, V, O", "layout"))
    launch: str = field(default="eager", metadata=_axis("eager or graph (CUDA graph replay)", "launch"))
    l2: str = field(default="warm", metadata=_axis(
        "warm, or cold (L2 flushed before every sample, one call per sample)", "L2"))
    # Axes added later (metadata `since`): at their default they stay out of key(), so the workloads
    # of older stores keep their identity, and a store migration fills their column with the default.
    window: int = field(default=0, metadata=_axis(
        "sliding window W (causal only): query i sees the W keys j with p_i - W < j <= p_i, p_i = i + the "
        "causal offset; 0 = no window", "win", length=True, since=5))
    lengths: str = field(default="fixed", metadata=_axis(
        "fixed | uniform | longtail: per-sequence lengths of a packed (varlen) prefill batch, q_len the "
        "longest (workloads/varlen.py)", "lens", since=6))
    page_size: int = field(default=0, metadata=_axis(
        "decode only: tokens per page of a paged KV cache, pages reached through a shuffled page table; "
        "0 = contiguous cache (workloads/paged.py)", "page", since=7))
    # The column is as old as the store (every decode row said 'excluded'); an axis since schema 8.
    decode_append: str = field(default="excluded", metadata=_axis(
        "decode only (NULL in other rows): 'excluded' = the KV cache already holds the new token, appending "
        "K/V is not inside the timed step; 'included' = the timed step writes the new token's K/V into slot "
        "kv_len - 1, then attends (workloads/append.py)", "append", since=8, modes=("decode",)))
    # issue 42.2: the timed calls see new input values (measure/timing.py); a timing condition, as l2 is
    fresh_inputs: bool = field(default=False, metadata=_axis(
        "1: new input values are written before every timed call, outside the timed interval, so that no "
        "result cached on the inputs survives (measure/timing.py; docs/method/fresh-inputs.md)", "fresh",
        since=11))

    def __post_init__(self) -> None:
        # One spelling per semantics: without a mask the alignment means nothing, and 0 == 0.0.
        if self.causal is False and self.causal_align != "bottom_right" and self.causal_align in CAUSAL_ALIGNS:
            object.__setattr__(self, "causal_align", "bottom_right")
        if isinstance(self.dropout, int) and not isinstance(self.dropout, bool):
            object.__setattr__(self, "dropout", float(self.dropout))
        for f in _moded_fields():  # outside its modes an axis holds None (its default written means the same)
            value = getattr(self, f.name)
            if self.mode not in f.metadata["modes"] and value == f.default:
                object.__setattr__(self, f.name, None)
            elif self.mode in f.metadata["modes"] and value is None:
                object.__setattr__(self, f.name, f.default)
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

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def key(self) -> str:
        """Stable identity of the semantics: hash of every field, except an axis added later (metadata
        `since`) at its default or outside the modes it is defined for (None), so that adding an axis
        changes no earlier workload's key."""
        d = self.to_dict()
        for f in dataclasses.fields(self):
            if f.metadata.get("since") is not None and d[f.name] in (f.default, None):
                del d[f.name]
        blob = json.dumps(d, sort_keys=True)
        return hashlib.sha1(blob.encode()).hexdigest()[:16]

    def label(self) -> str:
        c = f"causal-{self.causal_align}" if self.causal else "full"
        if self.window:
            c += f" window{self.window}"
        if self.lengths != "fixed":
            c += f" varlen-{self.lengths}"
        if self.page_size:
            c += f" paged{self.page_size}"
        if self.decode_append == "included":
            c += " append"
        if self.fresh_inputs:
            c += " fresh"
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


def _moded_fields() -> list:
    """The fields of the axes defined for some modes only (metadata `modes`)."""
    return [f for f in dataclasses.fields(Workload) if f.metadata.get("modes")]


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
    moded = {f.name: f.metadata["modes"] for f in _moded_fields()}
    for name, allowed in ENUMS.items():
        if name in moded and w.mode not in moded[name]:
            if getattr(w, name) is not None:
                out.append(f"{name} {getattr(w, name)!r} is defined for {' and '.join(moded[name])} only "
                           f"(other modes: leave it at its default)")
        elif getattr(w, name) not in allowed:
            out.append(f"{name} {getattr(w, name)!r} not in {allowed}")
    if not isinstance(w.fresh_inputs, bool):
        out.append(f"fresh_inputs must be true or false, got {w.fresh_inputs!r}")
    if not isinstance(w.causal, bool):
        out.append(f"causal must be true or false, got {w.causal!r}")
    if not isinstance(w.dropout, (int, float)) or isinstance(w.dropout, bool):
        out.append(f"dropout must be a number in [0, 1), got {w.dropout!r}")
    elif not (0.0 <= w.dropout < 1.0):
        out.append(f"dropout must be in [0, 1), got {w.dropout!r}")
    if not isinstance(w.window, int) or isinstance(w.window, bool) or w.window < 0:
        out.append(f"window must be a non-negative integer (0: no window), got {w.window!r}")
    elif w.window and not w.causal:
        out.append("a sliding window is defined for causal workloads only (set causal: true, or window: 0)")
    if w.lengths != "fixed" and w.lengths in LENGTH_KINDS:
        if w.mode != "prefill":
            out.append(f"packed variable-length batches (lengths {w.lengths}) are defined for prefill only")
        elif w.q_len != w.kv_len:
            out.append(f"a packed batch is self-attention: each sequence's keys are its queries (q_len {w.q_len} "
                       f"!= kv_len {w.kv_len})")
    if not isinstance(w.page_size, int) or isinstance(w.page_size, bool) or w.page_size < 0:
        out.append(f"page_size must be a non-negative integer (0: a contiguous cache), got {w.page_size!r}")
    elif w.page_size and w.mode != "decode":
        out.append(f"a paged KV cache (page_size {w.page_size}) is defined for decode only")
    if w.causal and w.causal_align == "bottom_right" and w.q_len > w.kv_len:
        out.append(f"bottom-right causal with q_len {w.q_len} > kv_len {w.kv_len} leaves query rows with no key")
    if w.dtype in FORWARD_ONLY_DTYPES and w.mode not in ("prefill", "decode"):
        out.append(f"{w.dtype} is offered for the forward modes only (prefill, decode), not {w.mode}")
    if w.launch == "graph" and w.mode == "train_fwd_bwd":
        out.append("CUDA-graph launch is offered for forward modes only")
    return out
