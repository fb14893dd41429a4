"""FP8 quantisation emulated with torch ops (CPU or GPU): float8 rounding as torch casts, and FP8 attention schemes.

e4m3/e5m2 rounding bit-for-bit as torch's float8 casts, and the schemes an FP8 attention kernel declares.

A scheme says how Q, K and V become float8 before the two products (one scale per tensor, per
(batch, head), or per tile of `block` rows of one (batch, head)), whether Q and K are first turned
by the same random orthogonal matrix M = diag(±1)·H/√d (incoherent processing, FlashAttention-3
§3.3: (QM)(KM)ᵀ = QKᵀ, an outlier feature spread over the head dimension before it is rounded), how
P is rounded before the PV product (format and scale; none: kept exact) and how O is written.
`emulate` applies a scheme and computes the rest exactly, in float64: its error against float64
attention on the unquantised inputs is what the quantiser alone must cost (docs/method/fp8.md)."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

# (mantissa bits, smallest normal exponent, largest finite value) of torch.float8_e4m3fn / float8_e5m2
FORMATS = {"e4m3": (3, -6, 448.0), "e5m2": (2, -14, 57344.0)}
TORCH_NAMES = {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}
GRANULARITIES = ("tensor", "head", "block")
CHUNK_SCORES = 1 << 24  # float64 scores emulate() holds at once (128 MiB; a few temporaries of it)


def round_fp8(x, fmt: str = "e4m3", saturate: bool = True):
    """x (any float dtype) rounded to the nearest `fmt` value, ties to even, returned in float64; the
    same bits as torch's cast x.float().to(float8) (a float64 value is first rounded to float32, as
    the cast does). Beyond the largest finite value (after rounding, and ±inf): `saturate` gives ±top,
    as a kernel's satfinite conversion and torch >= 2.13's e4m3 cast do; otherwise e5m2 overflows to
    ±inf and e4m3 (no infinity) to NaN, as the OCP non-saturating mode and torch <= 2.12's e4m3 cast
    do (cast_saturates tells which the installed torch does). NaN stays NaN."""
    import torch

    mbits, emin, top = FORMATS[fmt]
    x32 = x.to(torch.float32).to(torch.float64)  # the cast's own first rounding, then exact arithmetic
    a = x32.abs()
    # frexp's exponent of ±inf/NaN is unspecified (it differs by device): use 1 there, the value is
    # replaced below; every operation left is exact and defined for every input, on any device
    finite = torch.isfinite(a)
    _, e = torch.frexp(torch.where(finite, a, torch.ones_like(a)))  # a = m·2^e, m in [0.5, 1)
    quantum = torch.ldexp(torch.ones_like(a), (e - 1).clamp(min=emin) - mbits)
    r = torch.round(torch.where(finite, a, torch.zeros_like(a)) / quantum) * quantum  # half to even, exact
    over = (r > top) | torch.isinf(a)
    beyond = top if saturate else (math.inf if fmt == "e5m2" else math.nan)
    r = torch.where(over, torch.full_like(r, beyond), r)
    r = torch.where(torch.isnan(a), a, r)
    return torch.copysign(r, x32)


def cast_saturates(fmt: str, device="cpu") -> bool:
    """Whether the installed torch's float32 -> `fmt` cast on `device` saturates an overflow (torch's
    e4m3fn cast gave NaN up to 2.12 and saturates since pytorch#178817; e5m2 gives ±inf)."""
    import torch

    dt = getattr(torch, TORCH_NAMES[fmt])
    return bool(torch.isfinite(torch.tensor([1e6], device=device).to(dt).float()).item())


@dataclass(frozen=True)
class Scheme:
    """How a kernel quantises (see the module docstring). `p_scale`: P is rounded as P·p_scale and
    divided back (cuDNN's scale_s = 448; 1: P cast as it is, FlashAttention-3); `o_fmt`: O written in
    that float8 format (None: in the workload's dtype)."""

    fmt: str = "e4m3"
    granularity: str = "tensor"
    block: int = 128
    incoherent: bool = False
    p_fmt: str | None = "e4m3"
    p_scale: float = 448.0
    o_fmt: str | None = None
    seed: int = 0  # the random signs of incoherent processing

    @property
    def name(self) -> str:
        gran = f"block{self.block}" if self.granularity == "block" else self.granularity
        parts = [self.fmt, gran] + (["incoherent"] if self.incoherent else [])
        parts.append(f"p-{self.p_fmt}x{self.p_scale:g}" if self.p_fmt else "p-exact")
        if self.o_fmt:
            parts.append(f"o-{self.o_fmt}")
        return ",".join(parts)


def parse_scheme(text: str) -> Scheme:
    """The inverse of Scheme.name: 'e4m3,block128,incoherent,p-e4m3x448,o-e4m3'."""
    kw: dict = {}
    for part in text.split(","):
        if part in FORMATS:
            kw["fmt"] = part
        elif part in ("tensor", "head"):
            kw["granularity"] = part
        elif (m := re.fullmatch(r"block(\d+)", part)):
            kw.update(granularity="block", block=int(m.group(1)))
        elif part == "incoherent":
            kw["incoherent"] = True
        elif part == "p-exact":
            kw["p_fmt"] = None
        elif (m := re.fullmatch(r"p-(e4m3|e5m2)x([0-9.e+-]+)", part)):
            kw.update(p_fmt=m.group(1), p_scale=float(m.group(2)))
        elif (m := re.fullmatch(r"o-(e4m3|e5m2)", part)):
            kw["o_fmt"] = m.group(1)
        else:
            raise ValueError(f"unknown fp8 scheme part {part!r} in {text!r}")
    return Scheme(**kw)


# The named schemes (one table; the emulator's backends, Table 3's rows, cuDNN's declared scheme and the fp8
# contract's default all refer to it). FlashAttention-3 keeps P in [0, 256] before its float8 cast (exp2 with a
# max offset of 8); cuDNN's sdpa_fp8 as backends/cudnn_fe.py drives it: per-tensor e4m3 Q, K, V (the tool's
# codes), P scaled by 448 into e4m3 (scale_s), O written in e4m3 (scale_o 1).
FA3_P_SCALE = 256.0
SCHEMES = {
    "tensor": Scheme(p_scale=FA3_P_SCALE),  # Table 3's per-tensor baseline
    "block-incoherent": Scheme(granularity="block", incoherent=True, p_scale=FA3_P_SCALE),  # FA3's FP8
    "tensor-incoherent": Scheme(incoherent=True, p_scale=FA3_P_SCALE),  # without block quantisation
    "block": Scheme(granularity="block", p_scale=FA3_P_SCALE),  # without incoherent processing
    "head": Scheme(granularity="head", p_scale=FA3_P_SCALE),  # per-(batch, head) scales
    "tensor-e5m2": Scheme(fmt="e5m2", p_fmt="e5m2", p_scale=FA3_P_SCALE),
    "cudnn": Scheme(fmt="e4m3", granularity="tensor", p_fmt="e4m3", p_scale=448.0, o_fmt="e4m3"),
}
CUDNN_FP8 = SCHEMES["cudnn"]


def amax_scale(amax, fmt: str):
    """The scale that maps amax onto the format's largest value (1 where amax is 0)."""
    import torch

    top = FORMATS[fmt][2]
    return torch.where(amax > 0, amax / top, torch.ones_like(amax))


def quantise(x, fmt: str, granularity: str = "tensor", block: int = 128, amax: float | None = None):
    """x (B, H, N, D) → (values rounded to `fmt` after dividing by their scale, times the scale), in
    float64: one scale per tensor, per (batch, head), or per tile of `block` rows of one (batch, head).
    `amax`: a per-tensor scale's largest magnitude when x is a part of the tensor (the whole one's)."""
    import torch

    x = x.to(torch.float64)
    if granularity == "tensor":
        s = amax_scale(x.abs().amax() if amax is None else torch.tensor(amax, dtype=torch.float64), fmt)
        return round_fp8(x / s, fmt) * s
    if granularity == "head":
        s = amax_scale(x.abs().amax(dim=(-2, -1), keepdim=True), fmt)
        return round_fp8(x / s, fmt) * s
    if granularity != "block":
        raise ValueError(f"unknown granularity {granularity!r} (one of {', '.join(GRANULARITIES)})")
    b, h, n, d = x.shape
    pad = (-n) % block
    xp = torch.nn.functional.pad(x, (0, 0, 0, pad)).view(b, h, (n + pad) // block, block, d)
    s = amax_scale(xp.abs().amax(dim=(-2, -1), keepdim=True), fmt)
    return (round_fp8(xp / s, fmt) * s).view(b, h, n + pad, d)[:, :, :n]


def fwht(x):
    """The fast Walsh–Hadamard transform along the last dimension (a power of two), orthonormal
    (x·H/√d): O(d log d) additions instead of a d×d product."""
    d = x.shape[-1]
    if d & (d - 1):
        raise ValueError(f"incoherent processing needs a power-of-two head dim, not {d}")
    import torch

    y, h = x, 1
    while h < d:
        y = y.reshape(*x.shape[:-1], d // (2 * h), 2, h)
        y = torch.stack((y[..., 0, :] + y[..., 1, :], y[..., 0, :] - y[..., 1, :]), dim=-2)
        h *= 2
    y = y.reshape(x.shape)
    return y / math.sqrt(d)


def random_signs(d: int, seed: int, device):
    import torch

    g = torch.Generator(device="cpu").manual_seed(seed)
    return (torch.randint(0, 2, (d,), generator=g) * 2 - 1).to(device=device, dtype=torch.float64)


def incoherent(q, k, seed: int = 0):
    """Q·M and K·M with M = diag(±1)·H/√d, one random M for both: QKᵀ unchanged up to rounding."""
    signs = random_signs(q.shape[-1], seed, q.device)
    return fwht(q.to(signs.dtype) * signs), fwht(k.to(signs.dtype) * signs)


def tensor_amax(q, k, v, scheme: Scheme) -> tuple[float, float, float]:
    """The largest magnitudes of whole Q, K, V as the scheme's per-tensor scales see them (Q and K
    after incoherent processing): what `emulate` needs to quantise a part of them as the whole."""
    if scheme.incoherent:
        q, k = incoherent(q, k, scheme.seed)
    return tuple(t.abs().amax().item() for t in (q, k, v))


def emulate(q, k, v, scheme: Scheme, scale: float, keep=None, quantised: bool = False,
            amax: tuple[float, float, float] | None = None):
    """Attention of (B, H, N, D) tensors (GQA by expansion) as `scheme` quantises them, computed in
    float64; `keep`: a boolean (Nq, Nkv) mask of the kept scores (None: all); `quantised`: Q, K, V are
    already the scheme's float8 values (dequantised), only P and O are left to round; `amax`: the whole
    tensors' (tensor_amax) when q, k, v are slices of them and the scales are per tensor. Returns O
    (B, Hq, Nq, Dv) in float64 (rounded to the scheme's O format when it writes one)."""
    import torch

    q, k, v = (t.to(torch.float64) for t in (q, k, v))
    if not quantised:
        if scheme.incoherent:
            q, k = incoherent(q, k, scheme.seed)
        q, k, v = (quantise(t, scheme.fmt, scheme.granularity, scheme.block, a)
                   for t, a in zip((q, k, v), amax or (None, None, None)))
    group = q.shape[1] // k.shape[1]
    if group > 1:
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    # query rows are independent once Q, K, V are quantised: a chunk of rows at a time bounds the
    # float64 score temporaries (a 16k x 16k head would need tens of GiB at once)
    rows = max(1, CHUNK_SCORES // max(1, q.shape[0] * q.shape[1] * k.shape[2]))
    outs = [_attend(q[:, :, i:i + rows], k, v, scheme, scale, None if keep is None else keep[i:i + rows])
            for i in range(0, q.shape[2], rows)]
    o = torch.cat(outs, dim=2)
    return round_fp8(o, scheme.o_fmt) if scheme.o_fmt else o


def _attend(q, k, v, scheme: Scheme, scale: float, keep):
    """The exact attention of quantised rows, P rounded as the scheme says."""
    import torch

    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    if keep is not None:
        s = s.masked_fill(~keep, float("-inf"))
    # as a fused kernel does: the unnormalised P = exp(S - rowmax) (at most 1) is what is rounded, the
    # row sum comes from the exact P, and O is divided by it after the PV product
    m = s.amax(dim=-1, keepdim=True)
    p = torch.exp(s - torch.where(torch.isinf(m), torch.zeros_like(m), m))
    denom = p.sum(dim=-1, keepdim=True)
    if scheme.p_fmt:
        p = round_fp8(p * scheme.p_scale, scheme.p_fmt) / scheme.p_scale
    return torch.matmul(p, v) / denom
