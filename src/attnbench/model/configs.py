"""Decoder shapes as frozen configs, one named function each, holding public shape facts only.

The model starts from hidden states and ends at the last RMSNorm: no embedding, no LM head (they
are per model, not per layer, and hold no attention; a layer subset with a 128k-vocabulary head
would charge one model's head to a few layers). `vocab` is kept as a fact, never used."""
from __future__ import annotations

from dataclasses import dataclass, replace


class ConfigError(ValueError):
    """Unknown config name or an impossible layer count."""


@dataclass(frozen=True)
class ModelConfig:
    """A Llama-style decoder layer stack: RMSNorm, RoPE, GQA attention, SwiGLU MLP."""

    name: str
    hidden: int  # model width
    layers: int  # layers of the published model (a run builds `--layers` of them)
    heads: int  # query heads Hq
    kv_heads: int  # key/value heads Hkv
    head_dim: int  # D of Q, K and V
    intermediate: int  # SwiGLU width
    rope_theta: float
    norm_eps: float = 1e-5
    qkv_bias: bool = False  # Qwen2 projects Q, K, V with a bias
    sliding_window: int | None = None  # Mistral-7B v0.1: each token sees the 4096 newest keys
    vocab: int | None = None  # a public fact; the model has no embedding or head
    source: str = ""  # where the numbers come from

    def __post_init__(self) -> None:
        if self.heads % self.kv_heads:
            raise ConfigError(f"{self.name}: heads {self.heads} not a multiple of kv_heads {self.kv_heads}")

    def with_layers(self, n: int | None) -> "ModelConfig":
        """The same shapes with n layers (None: all of the published model's)."""
        if n is None:
            return self
        if not isinstance(n, int) or n < 1 or n > self.layers:
            raise ConfigError(f"--layers must be 1..{self.layers} for {self.name}, got {n}")
        return replace(self, layers=n)

    def params_per_layer(self) -> int:
        qkv = self.hidden * (self.heads + 2 * self.kv_heads) * self.head_dim
        return qkv + self.heads * self.head_dim * self.hidden + 3 * self.hidden * self.intermediate + 2 * self.hidden


def tiny() -> ModelConfig:
    """The CPU default: two layers, GQA 4/2, D 32 (1.5 MB of fp32 weights)."""
    return ModelConfig("tiny", hidden=128, layers=2, heads=4, kv_heads=2, head_dim=32, intermediate=352,
                       rope_theta=10000.0, source="attnbench: a test size, not a published model")


def llama31_8b() -> ModelConfig:
    return ModelConfig("llama3.1-8b", hidden=4096, layers=32, heads=32, kv_heads=8, head_dim=128,
                       intermediate=14336, rope_theta=500000.0, vocab=128256,
                       source="meta-llama/Llama-3.1-8B config.json (rope scaling of long contexts not modelled)")


def llama31_70b() -> ModelConfig:
    return ModelConfig("llama3.1-70b", hidden=8192, layers=80, heads=64, kv_heads=8, head_dim=128,
                       intermediate=28672, rope_theta=500000.0, vocab=128256,
                       source="meta-llama/Llama-3.1-70B config.json (rope scaling of long contexts not modelled)")


def qwen25_7b() -> ModelConfig:
    return ModelConfig("qwen2.5-7b", hidden=3584, layers=28, heads=28, kv_heads=4, head_dim=128,
                       intermediate=18944, rope_theta=1000000.0, norm_eps=1e-6, qkv_bias=True, vocab=152064,
                       source="Qwen/Qwen2.5-7B config.json (use_sliding_window false)")


def mistral_7b() -> ModelConfig:
    return ModelConfig("mistral-7b", hidden=4096, layers=32, heads=32, kv_heads=8, head_dim=128,
                       intermediate=14336, rope_theta=10000.0, sliding_window=4096, vocab=32000,
                       source="mistralai/Mistral-7B-v0.1 config.json")


CONFIGS = {"tiny": tiny, "llama3.1-8b": llama31_8b, "llama3.1-70b": llama31_70b, "qwen2.5-7b": qwen25_7b,
           "mistral-7b": mistral_7b}


def get_config(name: str, layers: int | None = None) -> ModelConfig:
    """The named config, cut to `layers` layers when given."""
    if name not in CONFIGS:
        raise ConfigError(f"unknown model config {name!r}; configs: {', '.join(CONFIGS)}")
    return CONFIGS[name]().with_layers(layers)
