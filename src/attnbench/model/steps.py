"""The three model steps (training, prefill, decode) as zero-argument callables, and the attention
workload each one calls, for the capability gate and the kernel-level lookup.

What a production step pays is inside it: projections, RoPE, the BNHD -> BHND views and whatever
the backend converts, the KV-cache append (prefill writes [0, N), decode writes one position),
the output projection's read of attention's layout, the optimizer. Not inside: allocating the
cache, drawing inputs (a server allocates its cache once; a trainer's batch is loaded elsewhere)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..workloads import Workload
from .configs import ModelConfig

STEPS = ("train", "prefill", "decode")
LR = 1e-6  # the optimizer's steps must not drive random weights to overflow while timing repeats them


@dataclass(frozen=True)
class StepSpec:
    """One step to measure. seqlen: tokens per sequence (train, prefill) or the KV-cache length
    the decoded token's attention reads, itself included (decode)."""

    step: str  # train | prefill | decode
    batch: int
    seqlen: int
    launch: str = "eager"  # graph: decode under a CUDA graph

    @property
    def tokens(self) -> int:
        """Tokens one step processes (decode: one per sequence)."""
        return self.batch if self.step == "decode" else self.batch * self.seqlen

    def label(self) -> str:
        n = f"kv{self.seqlen}" if self.step == "decode" else f"N{self.seqlen}"
        return f"{self.step} B{self.batch} {n}" + (" graph" if self.launch == "graph" else "")

    def to_dict(self) -> dict:
        return {"step": self.step, "batch": self.batch, "seqlen": self.seqlen, "launch": self.launch}


def attention_workload(cfg: ModelConfig, spec: StepSpec, dtype: str) -> Workload:
    """The attention call each layer makes in this step, as a kernel-level Workload: training is
    train_fwd_bwd, prefill a causal square prefill, decode one query against the cache (bottom-right
    causal at Nq = 1 sees every key: stored unmasked, as the named grids do). A sliding window has
    no workload axis: a windowed config's lookup matches the unwindowed kernel rows."""
    mode = {"train": "train_fwd_bwd", "prefill": "prefill", "decode": "decode"}[spec.step]
    decode = spec.step == "decode"
    return Workload(mode=mode, batch=spec.batch, q_len=1 if decode else spec.seqlen, kv_len=spec.seqlen,
                    q_heads=cfg.heads, kv_heads=cfg.kv_heads, head_dim=cfg.head_dim, head_dim_v=cfg.head_dim,
                    dtype=dtype, causal=not decode, launch=spec.launch if decode else "eager")


@dataclass
class Step:
    """A built step: `call` is what is timed; `state` keeps its tensors alive."""

    call: Callable[[], Any]
    state: dict


def hidden_states(cfg: ModelConfig, batch: int, n: int, dtype, device, seed: int):
    """N(0, 1) hidden states (B, N, hidden) from a generator seeded by `seed`."""
    import torch

    g = torch.Generator(device="cpu").manual_seed(seed)
    return torch.randn(batch, n, cfg.hidden, generator=g).to(device=device, dtype=dtype)


def build(model, spec: StepSpec, seed: int) -> Step:
    """The step's callable on `model` (whose `attend` it calls); inputs and cache made here, once."""
    import torch

    from .decoder import KVCache

    cfg, dtype, device = model.cfg, model.dtype, model.device
    if spec.step == "train":
        x = hidden_states(cfg, spec.batch, spec.seqlen, dtype, device, seed)
        fused = device.type == "cuda"
        opt = torch.optim.AdamW(model.parameters(), lr=LR, fused=fused or None, foreach=None if fused else True)

        def train():
            opt.zero_grad(set_to_none=True)
            loss = model(x).float().pow(2).mean()
            loss.backward()
            opt.step()
            return loss.detach()

        return Step(train, {"x": x, "opt": opt})
    if spec.step == "prefill":
        x = hidden_states(cfg, spec.batch, spec.seqlen, dtype, device, seed)
        cache = KVCache(cfg, spec.batch, spec.seqlen, dtype, device)

        def prefill():
            with torch.no_grad():
                return model(x, 0, cache)

        return Step(prefill, {"x": x, "cache": cache})
    if spec.step == "decode":
        x = hidden_states(cfg, spec.batch, 1, dtype, device, seed)
        cache = KVCache(cfg, spec.batch, spec.seqlen, dtype, device)
        cache.fill_random(spec.seqlen - 1, seed)
        pos = spec.seqlen - 1  # every timed call appends at this slot and reads the whole cache

        def decode():
            with torch.no_grad():
                return model(x, pos, cache)

        return Step(decode, {"x": x, "cache": cache})
    raise ValueError(f"unknown step {spec.step!r}; steps: {', '.join(STEPS)}")


def validate(spec: StepSpec) -> str | None:
    """Why the step cannot exist, or None."""
    if spec.step not in STEPS:
        return f"unknown step {spec.step!r}; steps: {', '.join(STEPS)}"
    if spec.batch < 1 or spec.seqlen < 1:
        return f"batch and seqlen must be positive, got B={spec.batch} N={spec.seqlen}"
    if spec.step == "decode" and spec.seqlen < 2:
        return "decode needs a cache of at least 2 positions (one cached, one appended)"
    if spec.launch not in ("eager", "graph"):
        return f"launch {spec.launch!r}: use eager or graph"
    if spec.launch == "graph" and spec.step != "decode":
        return "CUDA-graph launch is measured for decode only"
    return None
