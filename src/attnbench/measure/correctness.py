"""Correctness: outputs and gradients against a float64 reference, before and after timing.

The verdict is a ratio: the backend's error over the error of the unfused reference computed in
the workload's own dtype on the same inputs. A kernel as accurate as plain PyTorch in that dtype
scores about 1; a wrong or partly unwritten one scores orders of magnitude more (or NaN). Two
more tests look for what an elementwise ratio misses: a systematic error (a fitted slope of output
against reference that is not 1, or an offset, beyond their statistical error) and the output's
dtype, shape and autograd connection. Tolerances are per dtype, set from the measured spread of
correct kernels (docs/methodology.md, "Tolerances")."""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from ..backends.layout import appended, causal_offset, dense_kv, to_bhnd
from ..backends.reference import attention_math
from ..workloads import Workload
from . import distributions, fp8_contract
from ..workloads.varlen import cu_seqlens, packed, seq_lengths, tensor_dims

EPS = {"fp32": 1.2e-7, "bf16": 7.8e-3, "fp16": 9.8e-4, "fp8_e4m3": 0.125}  # fp8: 2^-3, float8_e4m3fn's eps
# Largest error ratio a correct kernel may show, per dtype: a margin above the largest ratio measured
# on correct fused and unfused kernels (CPU and H200, forward and backward, every input distribution;
# lab/tolerance_spread.py, figures in docs/methodology.md "Tolerances"). In float32 the same-dtype
# reference is so exact that a correct kernel's other summation order alone scores several times its
# error (CPU flash backward: dQ 5.6 on N(0, 1), 20 with logits of std 30), hence the wider bounds; a
# float32 kernel that computes in TF32 or bf16 inside still scores 1e3 and more.
TOLERANCES = {"fp32": 16.0, "bf16": 3.0, "fp16": 3.0, "fp8_e4m3": 2.0}
DEFAULT_TOL = TOLERANCES["bf16"]
# On hard inputs (measure/inputs.py: outliers, large logits) the reference's luck varies more.
HARD_TOLERANCES = {"fp32": 64.0, "bf16": 4.0, "fp16": 4.0, "fp8_e4m3": 4.0}
# A systematic error (slope or offset of output against reference, beyond SYS_SIGMAS standard
# errors) may be at most this many times the same-dtype reference's RMS error: (N(0, 1), hard inputs).
# Correct kernels reach 0.07 (bf16, fp16) and 2.9 (fp32: SDPA's memory-efficient kernel on the H200)
# on N(0, 1), 0.29 and 5.3 on hard inputs; a 1.5 % scale error in bf16 scores about 2.
SYS_TOLERANCES = {"fp32": (8.0, 16.0), "bf16": (1.0, 1.0), "fp16": (1.0, 1.0), "fp8_e4m3": (1.0, 1.0)}
# Dtypes whose accuracy rule is not settled yet (issue 12: FP8). Their fp8_e4m3 entries above are
# provisional, not measured on correct kernels: no same-dtype reference exists in float8 (PyTorch has
# no float8 softmax), so the floor is the float64 result rounded to the dtype (the error of a perfect
# kernel with float8 output) and EPS·magnitude (EPS = 2^-3). Their rows carry check_detail["contract"]
# = CONTRACT[dtype]: checked and stored, not yet contract-checked. Gross errors still fail: NaN/Inf,
# wrong shape/dtype/device, an error ratio beyond the provisional tolerance, or a cosine similarity
# to float64 below MIN_COSINE in any checked slice or row set (docs/methodology.md, "FP8").
CONTRACT = {"fp8_e4m3": "fp8-emulated"}
MIN_COSINE = 0.99
SYS_SIGMAS = 4.0
MAX_SLICES = 64  # (batch, kv-head) slices checked in full, gradients too: together every batch index and KV head
# Query rows checked in every batch index and every head: attention rows are independent, so a few
# rows of each head are cheap next to a full slice and leave no head or batch index unchecked.
MAX_ROWS = 32
NAMES = ("o", "dq", "dk", "dv")


def tolerance(dtype: str, tol: float | None = None, hard: bool = False) -> float:
    """The error-ratio bound for `dtype` (a `--tol` given by the user overrides it)."""
    if tol is not None:
        return tol
    return (HARD_TOLERANCES if hard else TOLERANCES)[dtype]


@dataclass
class Verdict:
    passed: bool
    reason: str | None
    max_abs_err: float | None = None
    rmse: float | None = None
    cosine: float | None = None
    err_ratio: float | None = None
    ref_err: float | None = None
    detail: dict = field(default_factory=dict)
    rel_l2: float | None = None


def pick_slices(w: Workload, seed: int) -> list[tuple[int, int]]:
    """(batch, kv-head) slices checked in full: all of them when few, else max(B, Hkv) slices
    pairing shuffled batch indices with shuffled KV heads, so that together they cover every batch
    index and every KV head (gradients of every KV head are checked)."""
    batch = tensor_dims(w)[0]  # a packed batch is one tensor: every sequence lies in each slice
    pairs = [(b, g) for b in range(batch) for g in range(w.kv_heads)]
    n = min(max(batch, w.kv_heads), MAX_SLICES)
    if len(pairs) <= n:
        return pairs
    rng = random.Random(seed)
    bs, gs = rng.sample(range(batch), batch), rng.sample(range(w.kv_heads), w.kv_heads)
    return sorted({(bs[i % batch], gs[i % w.kv_heads]) for i in range(n)})


def _slice(w: Workload, tensors, sides: str, b: int, g: int):
    """Slices of one (batch, kv-group), BHND: 'q' tensors give (1, G, Nq, .), 'k' tensors (1, 1, Nkv, .)."""
    gq = w.gqa_group
    pick = {"q": slice(g * gq, (g + 1) * gq), "k": slice(g, g + 1)}
    return [to_bhnd(t, w.layout)[b:b + 1, pick[side]] for t, side in zip(tensors, sides)]


def _run_math(w: Workload, q, k, v, do, scale: float, dtype):
    """Reference math in `dtype` on one slice; returns [O, dQ, dK, dV] (grads for fwd+bwd only)."""
    import torch

    leaves = [t.detach().to(dtype).requires_grad_(w.needs_grad) for t in (q, k, v)]
    with torch.enable_grad():
        o = attention_math(*leaves, w.causal, w.causal_align, scale, w.window,
                           seq_lengths(w) if packed(w) else None)
        if not w.needs_grad:
            return [o.detach()]
        grads = torch.autograd.grad(o, leaves, do.to(dtype))
    return [o.detach(), *grads]


def pick_rows(q_len: int, seed: int) -> list[int]:
    """Query rows checked in every (batch, head): evenly spread (first and last included) and random."""
    if q_len <= MAX_ROWS:
        return list(range(q_len))
    half = MAX_ROWS // 2
    even = {round(i * (q_len - 1) / (half - 1)) for i in range(half)}
    return sorted(even | set(random.Random(seed).sample(range(q_len), half)))


def _rows_math(w: Workload, q, k, v, rows: list[int], scale: float, dtype):
    """Attention output of the given query rows for every batch index and head, in `dtype`:
    (B, Hq, R, Dv). K and V are not expanded for GQA: the query heads of a group share them."""
    import torch

    qb, kb, vb = (to_bhnd(t, w.layout).detach() for t in (q, k, v))
    g, r = w.gqa_group, len(rows)
    batch, nq, nkv = tensor_dims(w)
    idx = torch.tensor(rows, device=qb.device)
    off = causal_offset(nq, nkv, w.causal_align) if not packed(w) else 0  # packed: Nq == Nkv per sequence
    j, pos = torch.arange(nkv, device=qb.device)[None, :], idx[:, None] + off
    keep = None
    if w.causal:  # the rule of layout.keep_mask, for the sampled rows only
        keep = (j <= pos) & (j > pos - w.window) if w.window else j <= pos
    if packed(w):  # a query sees only the keys of its own sequence
        seq = torch.bucketize(torch.arange(nkv, device=qb.device), torch.tensor(cu_seqlens(w)[1:-1],
                                                                                device=qb.device), right=True)
        same = seq[None, :] == seq[idx][:, None]
        keep = same if keep is None else keep & same
    out = []
    for b in range(batch):  # one batch index at a time: float64 temporaries stay small
        qs = qb[b, :, rows].to(dtype).reshape(w.kv_heads, g * r, w.head_dim)  # (Hkv, G·R, D)
        s = torch.matmul(qs, kb[b].to(dtype).transpose(-1, -2)) * scale  # (Hkv, G·R, Nkv)
        if keep is not None:
            s = s.masked_fill(~keep.repeat(g, 1), float("-inf"))
        o = torch.matmul(torch.softmax(s, dim=-1), vb[b].to(dtype))  # (Hkv, G·R, Dv)
        out.append(o.reshape(w.q_heads, r, w.head_dim_v))
    return torch.stack(out)


class Reference64:
    """float64 results for the checked slices of one workload (stacked: one leading slice dimension
    per tensor) and for sampled query rows of every batch index and head, with the error statistics
    of the same-dtype reference (`low_err`: per tensor, per slice)."""

    def __init__(self, w: Workload, inputs, seed: int):
        # an appending decode is checked against the cache its step attends: the new token in slot
        # kv_len - 1 (layout.appended), whatever the slot holds now; the slot is put back after
        with appended(w, inputs):
            self._compute(w, inputs, seed)

    def _compute(self, w: Workload, inputs, seed: int) -> None:
        import torch

        self.w = w
        self.slices = pick_slices(w, seed)
        low = inputs.q.dtype
        ks, vs = dense_kv(w, inputs)  # a paged cache gathered through its page table: the math is unchanged
        # float8 codes stand for code x descale (measure/distributions.py): the reference dequantises
        # through the softmax scale (s_q·s_k) and the output (s_v), exactly
        ds = distributions.descales(inputs)
        sm, ov = inputs.scale * ds.get("q", 1.0) * ds.get("k", 1.0), ds.get("v", 1.0)
        self.descale = (ds.get("q", 1.0), ds.get("k", 1.0), ov)
        self.softmax_scale = inputs.scale
        self.whole = (inputs.q, ks, vs)  # views: the fp8 contract's per-tensor scales see whole tensors
        r64s, rlos = [], []
        self.qkv = []  # the slices' inputs, kept for the fp8 contract's emulation (float8 ones are small)
        for b, g in self.slices:  # one slice at a time: float64 score matrices stay small
            q, k, v, *do = _slice(w, [inputs.q, ks, vs] + ([inputs.do] if w.needs_grad else []),
                                  "qkkq", b, g)
            do = do[0] if do else None
            self.qkv.append((q, k, v))  # views: nothing copied
            r64s.append([t * ov for t in _run_math(w, q, k, v, do, sm, torch.float64)])
            rlos.append(_rounded(r64s[-1], low) if _no_math(low) else _run_math(w, q, k, v, do, inputs.scale, low))
        self.ref = [torch.stack(t) for t in zip(*r64s)]  # per tensor: (S, 1, G|1, N, D)
        self.low_err = [_stats(torch.stack(lo), hi) for lo, hi in zip(zip(*rlos), self.ref)]
        self.rows = pick_rows(tensor_dims(w)[1], seed)
        self.rows64 = _rows_math(w, inputs.q, ks, vs, self.rows, sm, torch.float64)[None] * ov
        rows_low = (_rounded([self.rows64], low)[0] if _no_math(low)
                    else _rows_math(w, inputs.q, ks, vs, self.rows, inputs.scale, low)[None])
        self.rows_low_err = _stats(rows_low, self.rows64)


def _no_math(dtype) -> bool:
    """A storage-only dtype (float8): no same-dtype attention math exists to serve as the floor."""
    return dtype.itemsize == 1


def _rounded(tensors, dtype) -> list:
    """The float64 results rounded (saturating) to `dtype`: the floor of a float8 workload."""
    import torch

    top = torch.finfo(dtype).max
    return [t.clamp(-top, top).to(dtype) for t in tensors]


_STATS = ("max_abs", "rmse", "cos", "ref_max", "ref_rms", "slope", "offset", "excess")


def _stats(x, ref) -> list[dict]:
    """Per slice (leading dimension) of x against its float64 reference: max and RMS error, cosine,
    the reference's max and RMS, and the systematic fit (see `systematic`). One device-to-host
    transfer for all slices."""
    import torch

    xf, rf = x.detach().double().flatten(1), ref.flatten(1)
    n = rf.shape[1]
    d = xf - rf
    ref_rms = rf.pow(2).mean(1).sqrt()
    cols = [d.abs().amax(1), d.pow(2).mean(1).sqrt(), torch.nn.functional.cosine_similarity(xf, rf, dim=1),
            rf.abs().amax(1), ref_rms]
    rm, ym = rf.mean(1), xf.mean(1)
    rc = rf - rm[:, None]
    sxx = rc.pow(2).sum(1)
    flat = sxx == 0
    safe = torch.where(flat, torch.ones_like(sxx), sxx)
    b = torch.where(flat, torch.ones_like(sxx), (rc * (xf - ym[:, None])).sum(1) / safe)
    a = ym - b * rm
    s2 = (xf - a[:, None] - b[:, None] * rf).pow(2).sum(1) / max(n - 2, 1)
    se_b, se_a = (s2 / safe).sqrt(), (s2 * (1.0 / n + rm * rm / safe)).sqrt()
    excess = ((b - 1).abs() - SYS_SIGMAS * se_b).clamp(min=0) * ref_rms + (a.abs() - SYS_SIGMAS * se_a).clamp(min=0)
    if n < 3:
        excess = torch.zeros_like(excess)
    cols += [b, a, torch.where(flat, torch.zeros_like(excess), excess)]
    return [dict(zip(_STATS, row)) for row in torch.stack(cols, 1).tolist()]


def systematic(x, ref) -> dict:
    """Least-squares fit x = a + b·ref over every element: the slope b, the offset a, and `excess`,
    the RMS size of the part of a + (b - 1)·ref that lies beyond SYS_SIGMAS standard errors of the
    fit (0 when the fit cannot tell b from 1 and a from 0)."""
    st = _stats(x[None], ref[None])[0]
    return {"slope": st["slope"], "offset": st["offset"], "excess": st["excess"]}


def check(w: Workload, result, inputs, ref: Reference64, tol: float | None = None, hard: bool = False,
          scheme=None) -> Verdict:
    """result: O, or (O, dQ, dK, dV), in the workload's layout. `tol`: the error-ratio bound
    (default: the dtype's, TOLERANCES, or HARD_TOLERANCES for `hard` inputs); a `tol` given
    scales the systematic-error bound (SYS_TOLERANCES) by the same factor. `scheme`: the FP8
    quantisation the backend declares (backends/fp8_quant.py; an fp8 workload defaults to
    fp8_contract.DEFAULT_SCHEMES): the output's error must then stay within fp8_contract.FACTOR x the
    emulated scheme's error on the same inputs (measure/fp8_contract.py)."""
    import torch

    base = tolerance(w.dtype, None, hard)
    tol = base if tol is None else tol
    sys_tol = SYS_TOLERANCES[w.dtype][hard] * tol / base
    outs = list(result) if isinstance(result, (tuple, list)) else [result]
    # the values as stored: a tensor subclass could answer the check's reads with values its timed
    # calls never computed (an output that computes when it is read); autograd stays attached
    outs = [t.as_subclass(torch.Tensor) if isinstance(t, torch.Tensor) and type(t) is not torch.Tensor else t
            for t in outs]
    want = 4 if w.needs_grad else 1
    if len(outs) != want:
        return Verdict(False, f"expected {want} tensor(s) from the step, got {len(outs)}")
    expect_shapes = [inputs.out.shape, inputs.q.shape, inputs.k.shape, inputs.v.shape]
    for name, t, s in zip(NAMES, outs, expect_shapes):
        if not isinstance(t, torch.Tensor) or tuple(t.shape) != tuple(s):
            got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            return Verdict(False, f"{name} has shape {got}, expected {tuple(s)} ({w.layout})")
        if t.device != inputs.q.device:
            return Verdict(False, f"{name} is on {t.device}, expected {inputs.q.device} (the inputs' device)")
        if t.dtype != inputs.q.dtype:
            return Verdict(False, f"{name} is {str(t.dtype).replace('torch.', '')}, expected "
                                  f"{str(inputs.q.dtype).replace('torch.', '')} (the workload's dtype)")
        finite = torch.isfinite(t.float() if t.element_size() == 1 else t)  # no isfinite for float8
        if not finite.all().item():
            bad = (~finite).sum().item()
            return Verdict(False, f"{name}: {bad} of {t.numel()} elements are NaN/Inf (unwritten or overflow)")
    if w.mode == "train_fwd" and not outs[0].requires_grad:
        return Verdict(False, "o does not require grad: a training forward must stay differentiable, "
                              "not detached from its inputs")
    eps = EPS[w.dtype]
    worst, worst_sys, detail = 0.0, 0.0, {}
    max_abs, cosine, rmse_o, ref_err = 0.0, 1.0, 0.0, 0.0
    # full slices (output and gradients), then the sampled rows of every batch index and head (output)
    got = [[_slice(w, outs, "qqkk", b, g)[i] for b, g in ref.slices] for i in range(want)]
    groups = [(name, torch.stack(x), hi, le) for name, x, hi, le in zip(NAMES, got, ref.ref, ref.low_err)]
    groups.append(("o", to_bhnd(outs[0], w.layout)[:, :, ref.rows][None], ref.rows64, ref.rows_low_err))
    for name, x, hi, lerr in groups:
        for e, le in zip(_stats(x, hi), lerr):
            r_max = e["max_abs"] / max(le["max_abs"], eps * le["ref_max"], 1e-30)
            r_rms = e["rmse"] / max(le["rmse"], eps * le["ref_rms"], 1e-30)
            ratio = max(r_max, r_rms)
            if ratio != ratio:  # NaN
                ratio = float("inf")
            r_sys = e["excess"] / max(le["rmse"], eps * le["ref_rms"], 1e-30)
            worst = max(worst, ratio)
            worst_sys = max(worst_sys, r_sys)
            max_abs = max(max_abs, e["max_abs"])
            cosine = min(cosine, e["cos"])
            d = detail.setdefault(name, {"max_abs": 0.0, "ratio": 0.0, "ref_max_abs": 0.0, "sys": 0.0,
                                         "slope": 1.0})
            d["max_abs"] = max(d["max_abs"], e["max_abs"])
            d["ratio"] = max(d["ratio"], ratio)
            d["ref_max_abs"] = max(d["ref_max_abs"], le["max_abs"])
            if r_sys >= d["sys"]:
                d["sys"], d["slope"] = r_sys, e["slope"]
            if name == "o":
                rmse_o = max(rmse_o, e["rmse"])
                ref_err = max(ref_err, le["max_abs"])
    rel_l2 = max((e["rmse"] / max(e["ref_rms"], 1e-30) for _, x, hi, _ in groups[:1] + groups[-1:]
                  for e in _stats(x, hi)), default=None)
    scheme = scheme if scheme is not None else fp8_contract.DEFAULT_SCHEMES.get(w.dtype)
    judged = fp8_contract.judge(w, groups[0][1], ref, scheme) if scheme is not None else None
    if judged:
        detail["contract"] = judged["contract"]
        detail["fp8"] = judged
    reason = None
    if judged and judged.get("ratio") is not None and not judged["ratio"] <= fp8_contract.FACTOR:
        reason = (f"o: error {judged['rmse']:.3g} (RMS) is {judged['ratio']:.3g}x the emulated fp8 scheme's "
                  f"({judged['emulated_rmse']:.3g}, {judged['scheme']}); contract {fp8_contract.FACTOR:g}x")
    elif judged and judged.get("ratio") is not None:
        # the contract replaces O's same-dtype bound (the float8 floor is the emulation); gradients keep theirs
        grads = [n for n in ("dq", "dk", "dv") if n in detail and detail[n]["ratio"] > tol]
        if grads:
            name = max(grads, key=lambda n: detail[n]["ratio"])
            reason = (f"{name}: error {detail[name]['max_abs']:.3g} is {detail[name]['ratio']:.3g}x the same-dtype "
                      f"reference's ({detail[name]['ref_max_abs']:.3g}); tolerance {tol:g}x")
    elif worst > tol:
        name = max(detail, key=lambda n: detail[n]["ratio"])
        reason = (f"{name}: error {detail[name]['max_abs']:.3g} is {detail[name]['ratio']:.3g}x the same-dtype "
                  f"reference's ({detail[name]['ref_max_abs']:.3g}); tolerance {tol:g}x")
    elif worst_sys > sys_tol:
        name = max(detail, key=lambda n: detail[n]["sys"])
        reason = (f"{name}: systematic error (fitted slope {detail[name]['slope']:.5g} against float64) is "
                  f"{detail[name]['sys']:.3g}x the same-dtype reference's RMS error; tolerance {sys_tol:g}x")
    if reason is None and w.dtype in CONTRACT and not cosine >= MIN_COSINE:  # NaN included
        reason = f"cosine similarity to float64 {cosine:.4g} < {MIN_COSINE:g} (a gross error)"
    if w.dtype in CONTRACT and "contract" not in detail:  # no emulation possible (a packed batch)
        detail["contract"] = "gross-errors-only"
    return Verdict(reason is None, reason, max_abs, rmse_o, cosine, worst, ref_err, detail, rel_l2)
