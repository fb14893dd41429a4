"""Input distributions by name (`run --inputs`): drawn ones, FlashAttention-3's outlier protocol, Q/K/V from a file.

The outlier protocol takes its rate and scale as stated parameters.

- `normal`: N(0, 1); `outliers`: N(0, 1) + N(0, 100)·Bernoulli(0.001); `large-logits`: Q and K drawn
  N(0, 30) (measure/inputs.py says why each exists).
- `fa3-outliers`: N(0, 1) + N(0, std²)·Bernoulli(rate), FlashAttention-3 §4.3's protocol for its
  Table 3, defaults rate 0.001 and std 10 (N(0, 100)); `fa3-outliers:rate=0.01,std=30` states other
  parameters (either may be left out).
- `file:PATH` (a `.npz` or `.safetensors` file): the user's own activations; the arrays named q, k, v
  (and do for a training workload) must have the workload's tensor shapes in its layout. Every
  refill writes the same values (a file has one set of values: a check on "new values" reuses them).

fp8 workloads hold their values as float8 codes with a per-tensor scale (`fill`): the tensor's
largest magnitude maps onto float8_e4m3fn's largest finite value (448), and the dequantisation
factor (the scale) is handed to the kernel as its descale (Inputs.descale)."""
from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from pathlib import Path

BUILTIN = ("normal", "outliers", "large-logits")  # measure/inputs.py's DISTRIBUTIONS, in that order
# `outliers` and the defaults of `fa3-outliers` (FlashAttention-3's protocol, the same N(0, 100)·Bernoulli(0.001)):
# the share of elements that get an outlier and its std
OUTLIER_P, OUTLIER_STD = 0.001, 10.0
LARGE_LOGIT_STD = 30.0 ** 0.5  # Q·K·D^-1/2 then has standard deviation ~30
FP8_TOP = 448.0


@dataclass(frozen=True)
class Dist:
    kind: str  # a BUILTIN name, "fa3-outliers" or "file"
    rate: float = 0.0
    std: float = 0.0
    path: str | None = None

    @property
    def offset(self) -> int:
        """Added to the input seed: each distribution draws its own stream (the built-ins keep their index)."""
        if self.kind in BUILTIN:
            return BUILTIN.index(self.kind)
        return zlib.crc32(f"{self.kind}:{self.rate}:{self.std}:{self.path}".encode()) % 1_000_003


def parse(name: str) -> Dist:
    """A distribution's spelling → Dist; ValueError (one line) when it is none."""
    if name in BUILTIN:
        return Dist(name)
    if name.startswith("file:"):
        path = name[5:]
        if Path(path).suffix not in (".npz", ".safetensors"):
            raise ValueError(f"input file {path!r}: expected a .npz or .safetensors file")
        return Dist("file", path=path)
    m = re.fullmatch(r"fa3-outliers(?::(.*))?", name)
    if m:
        kw = {"rate": OUTLIER_P, "std": OUTLIER_STD}
        for part in filter(None, (m.group(1) or "").split(",")):
            key, _, val = part.partition("=")
            try:
                if key not in kw:
                    raise ValueError
                kw[key] = float(val)
            except ValueError:
                raise ValueError(f"fa3-outliers: bad parameter {part!r} (rate=R,std=S)") from None
        if not 0.0 <= kw["rate"] <= 1.0 or kw["std"] < 0:
            raise ValueError(f"fa3-outliers: rate must lie in [0, 1] and std be >= 0 (got {name!r})")
        return Dist("fa3-outliers", **kw)
    raise ValueError(f"unknown input distribution {name!r} (one of {', '.join(BUILTIN)}, "
                     "fa3-outliers[:rate=R,std=S], file:PATH.npz|.safetensors)")


def load(dist: Dist, shapes: dict[str, tuple]) -> dict:
    """The file's tensors named in `shapes` (float32, CPU), each checked against its shape;
    ValueError (one line) for a missing, unreadable or mis-shaped file."""
    import numpy as np
    import torch

    path = Path(dist.path)
    if not path.is_file():
        raise ValueError(f"input file {dist.path}: no such file")
    try:
        if path.suffix == ".npz":
            with np.load(path) as z:
                arrays = {n: np.asarray(z[n]) for n in z.files}
        else:
            arrays = read_safetensors(path)
    except Exception as e:  # noqa: BLE001  (any unreadable file is the same one-line error)
        raise ValueError(f"input file {dist.path}: cannot be read ({type(e).__name__}: {e})".replace("\n", " "))
    out = {}
    for name, want in shapes.items():
        if name not in arrays:
            raise ValueError(f"input file {dist.path}: no array named {name!r} (has {', '.join(sorted(arrays))})")
        a = arrays[name]
        if tuple(a.shape) != tuple(want):
            raise ValueError(f"input file {dist.path}: {name} has shape {tuple(a.shape)}, the workload needs "
                             f"{tuple(want)}")
        out[name] = torch.from_numpy(np.array(a, dtype=np.float32))  # a copy: a safetensors buffer is read-only
    return out


SAFETENSORS_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2", "I64": "<i8", "I32": "<i4"}


def read_safetensors(path: Path) -> dict:
    """The arrays of a .safetensors file (an 8-byte little-endian header length, a JSON header of
    name -> dtype, shape, data_offsets, then the raw bytes), as numpy float32/float64 arrays; bfloat16
    is widened exactly (its bits are float32's upper half). No dependency on the safetensors package."""
    import json

    import numpy as np

    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    body = memoryview(raw)[8 + n:]
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        if meta["dtype"] not in SAFETENSORS_DTYPES:
            raise ValueError(f"tensor {name} has dtype {meta['dtype']} (float or int tensors only)")
        start, end = meta["data_offsets"]
        a = np.frombuffer(body[start:end], dtype=SAFETENSORS_DTYPES[meta["dtype"]])
        if meta["dtype"] == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        out[name] = a.reshape(meta["shape"])
    return out


def workload_shapes(w) -> dict[str, tuple]:
    """The shapes a file must give for workload `w`: q, k, v (and do for a training workload), in its layout."""
    from ..workloads.paged import paged
    from ..workloads.varlen import tensor_dims

    if paged(w):
        raise ValueError("file inputs are not offered for a paged KV cache (its pages are the tool's own layout)")
    b, nq, nkv = tensor_dims(w)

    def shape(h, n, d):
        return (b, h, n, d) if w.layout == "BHND" else (b, n, h, d)

    out = {"q": shape(w.q_heads, nq, w.head_dim), "k": shape(w.kv_heads, nkv, w.head_dim),
           "v": shape(w.kv_heads, nkv, w.head_dim_v)}
    if w.needs_grad:
        out["do"] = shape(w.q_heads, nq, w.head_dim_v)
    return out


def check_file(name: str, workloads) -> None:
    """For a `file:` distribution, load it once per workload shape: ValueError (one line) when it
    cannot serve one of them (the CLI's exit 2, before anything is run or written)."""
    dist = parse(name)
    if dist.kind != "file":
        return
    for shapes in {tuple(workload_shapes(w).items()) for w in workloads}:
        load(dist, dict(shapes))


def draw(dist: Dist, name: str, n: int, gen, device):
    """n float32 values of input `name` drawn from `dist` with `gen` (not for files)."""
    import torch

    x = torch.randn(n, generator=gen, device=device, dtype=torch.float32)
    rate, std = (OUTLIER_P, OUTLIER_STD) if dist.kind == "outliers" else (dist.rate, dist.std)
    if dist.kind in ("outliers", "fa3-outliers"):
        hit = torch.rand(n, generator=gen, device=device) < rate
        x.add_(torch.randn(n, generator=gen, device=device).mul_(std).mul_(hit))
    elif dist.kind == "large-logits" and name in ("q", "k"):
        x.mul_(LARGE_LOGIT_STD)
    return x


def fill(flat, name: str, dist: Dist, gen, chunk: int, loaded: dict | None = None, descale: float | None = None):
    """Write `flat` (a 1-D view of one input tensor) with values of `dist`, `chunk` elements at a
    time; returns the descale of a float8 tensor (None otherwise). A float8 tensor's values are
    divided by a scale that maps their largest magnitude onto 448 (the values are drawn twice, the
    generator rewound between: once for the maximum, once to write), or by `descale` when given
    (an appending decode's new token shares its cache's scale); they saturate at ±448."""
    fp8 = flat.element_size() == 1

    def values():
        for start in range(0, flat.numel(), chunk):
            n = min(chunk, flat.numel() - start)
            if loaded is not None:
                yield start, loaded[name].view(-1)[start:start + n].to(flat.device)
            else:
                yield start, draw(dist, name, n, gen, flat.device)

    if fp8 and descale is None:
        state = gen.get_state()
        amax = max((x.abs().max().item() for _, x in values()), default=0.0)
        gen.set_state(state)
        descale = amax / FP8_TOP if amax > 0 else 1.0
    for start, x in values():
        if fp8:
            x = (x / descale).clamp_(-FP8_TOP, FP8_TOP)  # saturate, never a NaN from an out-of-range cast
        flat[start:start + x.numel()].copy_(x)
    return descale if fp8 else None


def set_descale(inputs, found: dict) -> None:
    """Store a refill's per-tensor descales in Inputs.descale as (1, 1, 1, 1) float32 tensors on the
    inputs' device, written in place when they exist: a kernel that bound them in prepare (cuDNN's
    descale_q/k/v) reads a refill's scales without any work inside its timed step."""
    import torch

    if not found:
        inputs.descale = None
        return
    held = inputs.descale or {}
    for name, value in found.items():
        if name in held:
            held[name].fill_(value)
        else:
            held[name] = torch.full((1, 1, 1, 1), value, dtype=torch.float32, device=inputs.q.device)
    inputs.descale = held


def descales(inputs) -> dict[str, float]:
    """Inputs.descale as floats (empty when the inputs carry none)."""
    return {n: float(t.item()) for n, t in (inputs.descale or {}).items()}
