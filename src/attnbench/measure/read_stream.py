"""A read-only stream written in Triton, the read ceiling's widest variant (measure/ceilings.py): a persistent
grid of programs, each summing a strided share of the buffer with wide loads, reads it once and writes a few
bytes. Torch's reductions are built for reducing, not for streaming: on the H200 the fastest of them read
4.2-4.3 TB/s while cuDNN's decode read its KV cache at 4.44, so a ceiling made of them alone is one a real
kernel passes."""
from __future__ import annotations

try:  # Triton is optional: where it is absent (or on CPU) the probe is simply not one of the variants
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - depends on the installation
    triton = None

BLOCK = 4096  # float32 per program per step: 16 KiB in flight per program, 128-bit loads per thread
PROGRAMS_PER_SM = 4

if triton is not None:
    @triton.jit
    def _stream(x, out, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        step = tl.num_programs(0) * BLOCK
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(pid * BLOCK, n, step):
            offs = start + tl.arange(0, BLOCK)
            acc += tl.load(x + offs, mask=offs < n, other=0.0)
        tl.store(out + pid, tl.sum(acc, axis=0))


def stream_probe(vals):
    """A callable that reads every element of `vals` (a flat contiguous float32 CUDA tensor) once, or None where
    Triton is absent or the tensor is not on a CUDA device."""
    if triton is None or vals.device.type != "cuda":
        return None
    import torch

    sms = torch.cuda.get_device_properties(vals.device).multi_processor_count
    programs = sms * PROGRAMS_PER_SM
    out = torch.empty(programs, device=vals.device, dtype=torch.float32)
    n = vals.numel()

    def run():
        _stream[(programs,)](vals, out, n, BLOCK=BLOCK, num_warps=8)
        return out
    return run
