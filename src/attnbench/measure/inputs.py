"""Reproducible random inputs in the workload's layout (never zeros: they hide unwritten output).

Three distributions (DISTRIBUTIONS): `normal`, N(0, 1); `outliers`, N(0, 1) + N(0, 100)·Bernoulli(0.001)
in every tensor, the heavy-tailed activations that break kernels with a low-precision accumulator;
`large-logits`, Q and K drawn N(0, LARGE_LOGIT_STD) so that the logits' standard deviation is about
30 and their maximum far above exp()'s float32 range: a softmax without the running-max subtraction
overflows. The timed calls use one of them (`run --inputs`); the correctness check also runs the
others (measure/correctness.py).

fp8_e4m3 inputs are drawn the same way and stored as float8 codes with a per-tensor scale: the
tensor's largest magnitude maps onto float8_e4m3fn's largest finite ±448 (FP8_MAX), the scale is
Inputs.descale (a kernel's descale factors; the float64 reference applies them too). Further
distributions (fa3-outliers, file:PATH) are measure/distributions.py's."""
from __future__ import annotations

import hashlib
import math

from ..backends.base import Inputs
from . import distributions
from .distributions import LARGE_LOGIT_STD, OUTLIER_P, OUTLIER_STD  # noqa: F401  (drawn there; named here too)
from ..workloads import FP8_MAX, Workload
from ..workloads.append import appending
from ..workloads.paged import num_pages, page_table, paged
from ..workloads.varlen import tensor_dims

INPUT_NAMES = ("q", "k", "v", "do", "k_new", "v_new")  # drawn, in this order, from one stream
TORCH_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "fp8_e4m3": "float8_e4m3fn"}
DISTRIBUTIONS = ("normal", "outliers", "large-logits")
REFILL_CHUNK = 1 << 25  # elements drawn at once (128 MiB of float32)


def torch_dtype(name: str):
    import torch

    return getattr(torch, TORCH_DTYPES[name])


def input_seed(w: Workload, seed: int) -> int:
    return int(hashlib.sha1(f"{seed}:{w.key()}".encode()).hexdigest()[:8], 16)


def shape(w: Workload, heads: int, n: int, d: int) -> tuple[int, ...]:
    """A tensor's shape in the workload's layout; a packed batch has batch 1 (its N: the packed T)."""
    b = tensor_dims(w)[0]
    return (b, heads, n, d) if w.layout == "BHND" else (b, n, heads, d)


def make_inputs(w: Workload, device: str, seed: int, dist: str = "normal") -> Inputs:
    """Q, K, V (and dO) drawn from `dist` with a generator seeded by (seed, workload) (refill
    draws them: one way to draw, so a refill with this seed restores these values exactly)."""
    import torch

    dt = torch_dtype(w.dtype)
    grad = w.mode in ("train_fwd", "train_fwd_bwd")
    _, nq, nkv = tensor_dims(w)  # a packed batch: T = Σ lengths tokens

    def empty(*s):
        return torch.empty(*s, device=device, dtype=dt)

    if paged(w):  # pages (num_pages, page_size, Hkv, D), reached through the page table (workloads/paged.py)
        k = empty(num_pages(w), w.page_size, w.kv_heads, w.head_dim)
        v = empty(num_pages(w), w.page_size, w.kv_heads, w.head_dim_v)
        table = torch.tensor(page_table(w), dtype=torch.int32, device=device)
    else:
        k, v = empty(*shape(w, w.kv_heads, nkv, w.head_dim)), empty(*shape(w, w.kv_heads, nkv, w.head_dim_v))
        table = None
    # an appending decode's new token (workloads/append.py): drawn after the cache, so its slot kv_len - 1
    # holds other values until the step writes them
    new = appending(w)
    inputs = Inputs(q=empty(*shape(w, w.q_heads, nq, w.head_dim)), k=k, v=v,
                    do=empty(*shape(w, w.q_heads, nq, w.head_dim_v)) if w.needs_grad else None,
                    out=empty(*shape(w, w.q_heads, nq, w.head_dim_v)), scale=1.0 / math.sqrt(w.head_dim),
                    page_table=table, k_new=empty(*shape(w, w.kv_heads, 1, w.head_dim)) if new else None,
                    v_new=empty(*shape(w, w.kv_heads, 1, w.head_dim_v)) if new else None)
    refill(inputs, w, seed, dist)
    inputs.out.fill_(float("nan"))  # poisoned: a kernel that never writes it shows as NaN
    for t in (inputs.q, inputs.k, inputs.v):
        t.requires_grad_(grad)
    return inputs


def refill(inputs: Inputs, w: Workload, seed: int, dist: str = "normal", stream: int | None = None) -> None:
    """Write new values into the same tensors (what a graph captured, what a cache may hold), drawn
    as make_inputs draws them but from `seed`'s own stream; refill(inputs, w, seed, dist) with the
    seed and distribution make_inputs had restores its values exactly. The output buffer is left as
    it is: a call on new values must not be told from a timed call by a poisoned output (a kernel
    that computes only into a NaN buffer, and otherwise hands back what it holds, would pass every
    check of new values); stale values in it are as wrong for the new inputs as NaN. A paged
    cache's pages are drawn whole, the slack of a partly filled last page too; the page table is
    the workload's own and is not redrawn. An appending decode's cache is drawn whole too, its slot
    kv_len - 1 included, and its new token after it: a refill puts the slot's own values back, so
    the cache is as before any step wrote it. `stream`: the generator's seed itself, in place of the
    (seed, workload) hash (Refresher: the hash once, not before every timed call)."""
    import torch

    spec = distributions.parse(dist)  # issue 40: fa3-outliers[:rate,std] and file:PATH besides DISTRIBUTIONS
    stream = input_seed(w, seed) + spec.offset if stream is None else stream
    gen = torch.Generator(device=inputs.q.device).manual_seed(stream)
    present = [n for n in INPUT_NAMES if getattr(inputs, n) is not None]
    loaded = distributions.load(spec, {n: tuple(getattr(inputs, n).shape) for n in present}) \
        if spec.kind == "file" else None
    descale = {}
    with torch.no_grad():
        for name in present:
            # drawn in float32 and rounded once to the workload's dtype, a chunk at a time: the
            # temporaries of a GiB-sized KV cache stay bounded (a whole-tensor draw of the outlier
            # distribution needs ~10x the tensor); float8 with a per-tensor scale (distributions.fill)
            d = distributions.fill(getattr(inputs, name).detach().view(-1), name, spec, gen, REFILL_CHUNK, loaded,
                                   descale.get(name[:-4]) if name.endswith("_new") else None)
            if d is not None:
                descale[name] = d
    distributions.set_descale(inputs, descale)


FINGERPRINT_PERIOD = 997  # element i of a tensor weighs (i mod 997) + 1 in the position-weighted sum
FINGERPRINT_CHUNK = (1 << 24) // FINGERPRINT_PERIOD * FINGERPRINT_PERIOD  # a whole number of periods


def fingerprint(inputs: Inputs) -> dict[str, tuple[float, ...]]:
    """Per input tensor (a paged cache's page table and an appending decode's new token too), three
    float64 reductions (sum, sum of squares, a position-weighted sum): any write into it, even a
    rounding in place, changes them; no copy of the tensor is kept. The softmax scale is one more
    entry, as it is. Taken four or five times per
    attempt, so it is made cheap: each chunk is upcast once, the weighted sum comes from the sums of
    its columns as a (rows, 997) view, and all tensors' sums reach the host in one transfer."""
    import torch

    names, accs = [], []
    for name in (*INPUT_NAMES, "page_table"):
        t = getattr(inputs, name)
        if t is None:
            continue
        flat = t.detach().reshape(-1)
        acc = torch.zeros(3, dtype=torch.float64, device=flat.device)
        weights = torch.arange(1, FINGERPRINT_PERIOD + 1, device=flat.device, dtype=torch.float64)
        for chunk in flat.split(FINGERPRINT_CHUNK):  # bounded temporaries for GiB-sized inputs
            # a copy even of a float64 chunk: it is squared in place below
            x = chunk.to(torch.float64, copy=True)  # every chunk but the last starts at a multiple of the period
            whole = x.numel() // FINGERPRINT_PERIOD * FINGERPRINT_PERIOD
            cols = x[:whole].view(-1, FINGERPRINT_PERIOD).sum(0)
            tail = x[whole:]
            acc[0] += cols.sum() + tail.sum()
            acc[2] += cols @ weights + tail @ weights[: tail.numel()]
            acc[1] += x.square_().sum()
        names.append(name)
        accs.append(acc)
    sums = {n: tuple(v) for n, v in zip(names, torch.stack(accs).tolist())} if accs else {}
    # the softmax scale is an input too: every backend of the workload, and every reference, reads it
    return {**sums, "scale": (float(inputs.scale),)}


FRESH_SEED = 4_000_037  # the timed calls' new values: a stream of their own, apart from the checks' seeds


class Refresher:
    """New input values for every timed call (a workload with fresh_inputs): each call of it writes the
    values of the next seed of its own stream into the same tensors (refill: same shapes, strides and
    layout, so a captured CUDA graph reads them), values no earlier call saw, so that no cache keyed on the
    inputs (identity, version, values, any number of entries) answers a timed call. The timer never sees a
    refill (measure/timing.py calls it between the timed intervals). `restore()` writes the workload's own
    values back. It counts its refills and their host seconds (the cost, stored with the row)."""

    def __init__(self, inputs: Inputs, w: Workload, seed: int, dist: str = "normal"):
        self.inputs, self.w, self.seed, self.dist = inputs, w, seed, dist
        self.n, self.host_s = 0, 0.0
        self.base = input_seed(w, seed + FRESH_SEED) << 20  # the workload's hash once; call n: stream base + n

    def __call__(self) -> None:
        import time

        t0 = time.perf_counter()
        self.n += 1
        refill(self.inputs, self.w, 0, self.dist, stream=self.base + self.n)
        self.host_s += time.perf_counter() - t0

    def again(self) -> None:
        """The last call's values written again, bit for bit, by the same writes as a refill (the host's
        and the device's caches left as a refill leaves them), and each tensor's version counter set
        back: to a kernel the inputs are the very tensors, versions and values it has just seen (measure/
        timing.py repeat_check); only a cache keyed on the inputs can answer faster now than after a refill."""
        tensors = [t for t in (getattr(self.inputs, n) for n in INPUT_NAMES) if t is not None]
        versions = [t._version for t in tensors]
        refill(self.inputs, self.w, 0, self.dist, stream=self.base + self.n)
        self.versions_kept = _set_versions(tensors, versions)

    versions_kept = False

    def restore(self) -> None:
        refill(self.inputs, self.w, self.seed, self.dist)


def _set_versions(tensors: list, versions: list[int]) -> bool:
    """Set the tensors' autograd version counters (torch's private setter; its signature changed in 2.6);
    False where this torch has none (a cache keyed on versions then misses on rewritten values)."""
    import torch

    setter = getattr(torch._C._autograd, "_unsafe_set_version_counter", None)
    if setter is None:
        return False
    try:
        setter(tuple(tensors), tuple(versions))
    except TypeError:
        for t, v in zip(tensors, versions):
            setter(t, v)
    return True
