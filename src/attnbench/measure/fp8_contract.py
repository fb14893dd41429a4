"""The FP8 numerical contract: output error at most FACTOR x its declared quantisation scheme's, emulated exactly.

A backend's output error against float64 is set against its scheme's, emulated on the same inputs.

A backend declares its scheme as `fp8_scheme` (a Scheme or its name, backends/fp8_quant.py); an fp8
workload's backend that declares none is held to DEFAULT_SCHEMES. The emulation (`emulate`) quantises
as the scheme says and computes the rest in float64: its RMS error is what the quantiser alone must
cost. The kernel's RMS error over it, per checked (batch, kv-head) slice, worst slice, is the
contract ratio; beyond FACTOR the row is INCORRECT with the ratio in its reason. An fp8 workload's
inputs already are the per-tensor float8 codes (measure/distributions.py), so only P and O are
rounded by the emulation there. FACTOR's evidence: docs/method/fp8.md."""
from __future__ import annotations

from ..backends.fp8_quant import CUDNN_FP8, Scheme, emulate, parse_scheme, tensor_amax
from ..backends.layout import keep_mask, to_bhnd
from ..workloads import Workload
from ..workloads.varlen import packed

# Largest kernel-over-emulation RMS ratio a correct kernel may show. Evidence (CPU, tests/plugins/fp8_fakes.py,
# tests/test_fp8_contract.py): a tiled float8 kernel of cuDNN's scheme (float8 GEMMs, online softmax over
# 128-key tiles, P rounded against the running maximum) scores 0.99-1.00 over normal, outlier and
# large-logit inputs at KV 128-1024; the smallest real defect among the fakes, Q/K/V re-rounded to e5m2
# inside, scores 3.1-19; a skipped tile 27; dropped descales 2.7e4. 1.5 leaves room for cuDNN's own
# arithmetic (exp2 approximations, its accumulation order), which lab/h200_fp8.sh measures. Below its
# resolution: P cast toward zero instead of to nearest (1.0-1.5, the O rounding to e4m3 dominates).
FACTOR = 1.5
# an fp8 workload's scheme where its backend declares none: cuDNN's (backends/fp8_quant.SCHEMES, the one table)
DEFAULT_SCHEMES = {"fp8_e4m3": CUDNN_FP8}


def scheme_of(backend, w: Workload) -> Scheme | None:
    """The scheme `backend` declares, for the rows it quantises: an fp8 workload's, or any row of a backend that
    quantises 16-bit inputs itself (`quantises_inputs`: the emulator, the Triton fp8 rungs). A backend's 16-bit
    rows without quantisation (cudnn-fe's bf16) are judged as every 16-bit row is (None: no scheme)."""
    if w.dtype not in DEFAULT_SCHEMES and not getattr(backend, "quantises_inputs", False):
        return None
    s = getattr(backend, "fp8_scheme", None)
    if isinstance(s, str):
        s = parse_scheme(s)
    return s if s is not None else DEFAULT_SCHEMES.get(w.dtype)


def _rms(d) -> list[float]:
    return d.pow(2).flatten(1).mean(1).sqrt().tolist()


def judge(w: Workload, x, ref, scheme: Scheme) -> dict | None:
    """x: the output's checked slices (S, 1, G, Nq, Dv) as ref.ref[0] holds them; ref: the workload's
    Reference64. Returns the contract's figures (scheme, rmse, emulated_rmse, ratio, worst slice) or
    None where no emulation applies (a packed batch)."""
    import torch

    if packed(w):
        return None
    sq, sk, sv = ref.descale
    hi = ref.ref[0]
    fp8 = ref.qkv[0][0].element_size() == 1
    amax = None
    if scheme.granularity == "tensor" and not fp8:  # the slices are quantised with the whole tensors' scales
        amax = tensor_amax(*(to_bhnd(t.detach(), w.layout).to(torch.float64) for t in ref.whole), scheme)
    emus = []
    for q, k, v in ref.qkv:
        q64, k64, v64 = (t.detach().to(torch.float64) * f for t, f in ((q, sq), (k, sk), (v, sv)))
        keep = keep_mask(q.shape[2], k.shape[2], w.causal_align, q.device, w.window) if w.causal else None
        emus.append(emulate(q64, k64, v64, scheme, ref_scale(ref), keep, quantised=fp8, amax=amax))
    emu = torch.stack(emus)
    if scheme.o_fmt is None:  # O is written in the workload's dtype whatever the scheme: that rounding is owed too
        top = torch.finfo(x.dtype).max
        emu = emu.clamp(-top, top).to(x.dtype).to(torch.float64)
    floor = 1e-9 * hi.pow(2).mean().sqrt().item()
    got, want = _rms(x.detach().to(torch.float64) - hi), _rms(emu - hi)
    ratios = [g / max(e, floor, 1e-300) for g, e in zip(got, want)]
    ratios = [r if r == r else float("inf") for r in ratios]  # NaN: as bad as can be
    i = max(range(len(ratios)), key=ratios.__getitem__)
    return {"contract": f"fp8-emulated:{FACTOR:g}x", "scheme": scheme.name, "rmse": got[i],
            "emulated_rmse": want[i], "ratio": ratios[i], "slice": list(ref.slices[i]),
            # an fp8 workload's inputs are float8 codes already: their quantisation is not in the timed step;
            # a 16-bit workload's fp8 backend quantises inside its step, so its time includes it
            "quantisation_timed": not fp8}


def ref_scale(ref) -> float:
    return ref.softmax_scale
