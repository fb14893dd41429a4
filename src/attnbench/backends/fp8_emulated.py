"""FP8 attention emulated exactly (backends/fp8_quant.py): one accuracy-reference backend per quantisation scheme.

For Table 3 and the fp8 contract's evidence.

Each quantises Q, K, V (and P) as its scheme says and computes the rest in float64, on CPU or GPU,
for bf16/fp16/fp32 workloads (the scheme's quantisation of the drawn values: FlashAttention-3's
Table 3 protocol) and fp8_e4m3 ones (the stored float8 codes, dequantised by their descales: only P
and O are rounded). Its output is returned in the workload's dtype; its error against float64 is the
scheme's own, so the fp8 contract scores it about 1. Not a built-in: a run names this file as a
plugin (`--plugin "$(python -c 'import attnbench.backends.fp8_emulated as m; print(m.__file__)')"`),
so that default runs stay as they were."""
from __future__ import annotations

from attnbench.backends.base import ACCURACY_REFERENCE, Backend, Inputs
from attnbench.backends import fp8_quant
from attnbench.backends.fp8_quant import Scheme, emulate
from attnbench.backends.layout import from_bhnd, keep_mask, to_bhnd

MAX_SCORES = 1 << 28  # float64 score elements one call may hold (2 GiB; a few temporaries of it)
# one backend per named scheme (fp8_quant.SCHEMES): fp8-emu-tensor, fp8-emu-block-incoherent, ..., fp8-emu-cudnn
SCHEMES = {f"fp8-emu-{name}": scheme for name, scheme in fp8_quant.SCHEMES.items()}


class Fp8Emulated(Backend):
    fp8_scheme: Scheme | None = None  # set per instance (make)
    quantises_inputs = True  # a 16-bit row is quantised here: judged by its scheme (measure/fp8_contract.py)

    def extra_supports(self, w, dev) -> str | None:
        if w.window or w.lengths != "fixed" or w.page_size:
            return "the fp8 emulator takes dense fixed-length workloads without a sliding window"
        if self.fp8_scheme.incoherent and w.head_dim & (w.head_dim - 1):
            return f"incoherent processing needs a power-of-two head dim, not {w.head_dim}"
        if w.batch * w.q_heads * w.q_len * w.kv_len > MAX_SCORES:
            return f"more than {MAX_SCORES} float64 scores per call (the emulator holds them all)"
        return None

    def prepare(self, w, inputs: Inputs):
        import torch

        scheme = self.fp8_scheme
        fp8 = inputs.q.element_size() == 1
        ds = {n: t for n, t in (inputs.descale or {}).items()}

        def step():
            q, k, v = (to_bhnd(t, w.layout).to(torch.float64) * (ds[n].double() if n in ds else 1.0)
                       for n, t in zip("qkv", (inputs.q, inputs.k, inputs.v)))
            keep = keep_mask(q.shape[2], k.shape[2], w.causal_align, q.device, w.window) if w.causal else None
            o = emulate(q, k, v, scheme, inputs.scale, keep, quantised=fp8)
            if fp8:
                o = o.clamp(-448.0, 448.0)
            return from_bhnd(o.to(inputs.q.dtype), w.layout)

        return step


def make() -> list[Backend]:
    out = []
    for name, scheme in SCHEMES.items():
        b = Fp8Emulated(name=name, family="fp8-emulated", role=ACCURACY_REFERENCE, devices=("cpu", "cuda"),
                        modes=("prefill", "decode"), dtypes=("fp32", "bf16", "fp16", "fp8_e4m3"),
                        supports_gqa=True, kernel_families={"cuda": frozenset({"unfused-gemm"}),
                                                            "cpu": frozenset({"unfused-gemm"})},
                        description=f"exact float64 attention after the fp8 scheme {scheme.name}")
        b.fp8_scheme = scheme
        out.append(b)
    return out


BACKENDS = make()
