"""The Llama-style decoder: RMSNorm, RoPE, GQA attention through a backend's attend(), SwiGLU MLP.

Tensor names carry their layout: x_BNC (batch, tokens, channels), q_BNHD, q_BHND. Attention is
called on BHND views of the projections' BNHD memory; whatever the backend makes of them (a copy,
a packing) is inside the step. The float64 reference is the same model in float64 calling the
unfused reference attention (`twin`)."""
from __future__ import annotations

import torch
from torch import nn

from .configs import ModelConfig


def rms_norm(x, weight, eps: float):
    """x / RMS(x) · weight, computed in at least float32, returned in x's dtype."""
    h = x.to(torch.promote_types(x.dtype, torch.float32))
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return h.to(x.dtype) * weight


class Rope:
    """Rotary embedding of the rotate-half convention; tables in float32 (float64 for a float64
    model), grown when a position beyond them is asked for (never inside a timed step: the cold
    call has asked for the same positions)."""

    def __init__(self, head_dim: int, theta: float, device, dtype):
        self.head_dim, self.theta, self.device = head_dim, theta, device
        self.dtype = torch.float64 if dtype == torch.float64 else torch.float32
        self.cos = self.sin = torch.empty(0, head_dim, device=device, dtype=self.dtype)

    def _grow(self, n: int) -> None:
        n = max(n, 2 * self.cos.shape[0], 16)
        inv = 1.0 / self.theta ** (torch.arange(0, self.head_dim, 2, device=self.device, dtype=torch.float64)
                                   / self.head_dim)
        ang = torch.outer(torch.arange(n, device=self.device, dtype=torch.float64), inv)
        ang = torch.cat((ang, ang), -1)  # (n, D)
        self.cos, self.sin = ang.cos().to(self.dtype), ang.sin().to(self.dtype)

    def __call__(self, x_BNHD, pos: int):
        n = x_BNHD.shape[1]
        if pos + n > self.cos.shape[0]:
            self._grow(pos + n)
        cos, sin = self.cos[pos:pos + n, None, :], self.sin[pos:pos + n, None, :]  # (N, 1, D)
        h = x_BNHD.to(self.dtype)
        a, b = h.chunk(2, -1)
        return (h * cos + torch.cat((-b, a), -1) * sin).to(x_BNHD.dtype)


class KVCache:
    """Per layer K and V of (B, Hkv, max_len, D); a step writes positions [pos, pos + N) in place."""

    def __init__(self, cfg: ModelConfig, batch: int, max_len: int, dtype, device):
        shape = (batch, cfg.kv_heads, max_len, cfg.head_dim)
        self.k = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(cfg.layers)]
        self.v = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(cfg.layers)]

    def fill_random(self, upto: int, seed: int) -> None:
        """Positions [0, upto) hold N(0, 1) values: a cache that prefill has filled, for decode timing."""
        g = torch.Generator(device=self.k[0].device).manual_seed(seed)
        for t in self.k + self.v:
            t[:, :, :upto].normal_(generator=g)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig, dtype, device):
        super().__init__()
        self.cfg = cfg
        self.wqkv = nn.Linear(cfg.hidden, (cfg.heads + 2 * cfg.kv_heads) * cfg.head_dim, bias=cfg.qkv_bias,
                              dtype=dtype, device=device)
        self.wo = nn.Linear(cfg.heads * cfg.head_dim, cfg.hidden, bias=False, dtype=dtype, device=device)

    def forward(self, x_BNC, rope: Rope, pos: int, kv, attend):
        c = self.cfg
        b, n, _ = x_BNC.shape
        q, k, v = self.wqkv(x_BNC).split([c.heads * c.head_dim, c.kv_heads * c.head_dim,
                                          c.kv_heads * c.head_dim], -1)
        q_BNHD = rope(q.view(b, n, c.heads, c.head_dim), pos)
        k_BNHD = rope(k.view(b, n, c.kv_heads, c.head_dim), pos)
        q_BHND, k_BHND, v_BHND = q_BNHD.transpose(1, 2), k_BNHD.transpose(1, 2), \
            v.view(b, n, c.kv_heads, c.head_dim).transpose(1, 2)
        if kv is not None:  # append, then attend over everything cached so far (bottom-right causal)
            k_cache, v_cache = kv  # (B, Hkv, max_len, D)
            k_cache[:, :, pos:pos + n] = k_BHND
            v_cache[:, :, pos:pos + n] = v_BHND
            k_BHND, v_BHND = k_cache[:, :, :pos + n], v_cache[:, :, :pos + n]
        o_BHND = attend(q_BHND, k_BHND, v_BHND, causal=True, causal_align="bottom_right",
                        scale=c.head_dim ** -0.5, window=c.sliding_window)
        return self.wo(o_BHND.transpose(1, 2).reshape(b, n, c.heads * c.head_dim))


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig, dtype, device):
        super().__init__()
        self.w13 = nn.Linear(cfg.hidden, 2 * cfg.intermediate, bias=False, dtype=dtype, device=device)  # gate, up
        self.w2 = nn.Linear(cfg.intermediate, cfg.hidden, bias=False, dtype=dtype, device=device)

    def forward(self, x_BNC):
        gate, up = self.w13(x_BNC).chunk(2, -1)
        return self.w2(nn.functional.silu(gate) * up)


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig, dtype, device):
        super().__init__()
        self.eps = cfg.norm_eps
        self.norm1 = nn.Parameter(torch.ones(cfg.hidden, dtype=dtype, device=device))
        self.attn = Attention(cfg, dtype, device)
        self.norm2 = nn.Parameter(torch.ones(cfg.hidden, dtype=dtype, device=device))
        self.mlp = MLP(cfg, dtype, device)

    def forward(self, x_BNC, rope, pos, kv, attend):
        h = x_BNC + self.attn(rms_norm(x_BNC, self.norm1, self.eps), rope, pos, kv, attend)
        return h + self.mlp(rms_norm(h, self.norm2, self.eps))


class Decoder(nn.Module):
    """cfg.layers blocks and a final RMSNorm, from hidden states (B, N, hidden) to hidden states.

    `attend` is the attention call every layer makes (a backend's attend, or a no-op); forward(x,
    pos, cache) with a cache writes K/V at [pos, pos + N) and attends over [0, pos + N)."""

    def __init__(self, cfg: ModelConfig, dtype=torch.float32, device="cpu", seed: int = 0, attend=None):
        super().__init__()
        self.cfg, self.dtype, self.device = cfg, dtype, torch.device(device)
        with torch.device("meta"):  # no throw-away default initialisation: init_weights() draws them
            self.blocks = nn.ModuleList(Block(cfg, dtype, None) for _ in range(cfg.layers))
            self.norm = nn.Parameter(torch.ones(cfg.hidden, dtype=dtype))
        self.to_empty(device=self.device)
        self.rope = Rope(cfg.head_dim, cfg.rope_theta, self.device, dtype)
        self.attend = attend
        self.init_weights(seed)

    @torch.no_grad()
    def init_weights(self, seed: int) -> None:
        """N(0, 1/fan_in) matrices and biases of std 0.02 from a generator seeded here; norms at 1."""
        g = torch.Generator(device=self.device).manual_seed(seed)
        for name, p in self.named_parameters():
            if "norm" in name:
                p.fill_(1.0)
            elif p.dim() == 1:
                p.normal_(0.0, 0.02, generator=g)
            else:
                p.normal_(0.0, p.shape[1] ** -0.5, generator=g)

    def forward(self, x_BNC, pos: int = 0, cache: KVCache | None = None):
        if self.attend is None:
            raise RuntimeError("Decoder.attend is not set: give a backend's attend or a no-op")
        for i, block in enumerate(self.blocks):
            kv = (cache.k[i], cache.v[i]) if cache is not None else None
            x_BNC = block(x_BNC, self.rope, pos, kv, self.attend)
        return rms_norm(x_BNC, self.norm, self.cfg.norm_eps)


def noop_attend(q, k, v, **_):
    """Attention removed, output shape kept: Q stands for O (no work forward or backward; its
    memory already has the layout the output projection reads). K and V are still made, and
    cached, but get no gradient. The step time it saves is attention's share by difference."""
    return q


def twin(model: Decoder, dtype, attend) -> Decoder:
    """The same weights (exactly, widened or narrowed to `dtype`) in a new model calling `attend`."""
    out = Decoder(model.cfg, dtype, model.device, attend=attend)
    with torch.no_grad():
        for dst, src in zip(out.parameters(), model.parameters()):
            dst.copy_(src)
    return out
