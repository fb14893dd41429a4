"""Example attnbench plugin: chunked-query attention in plain PyTorch.

Load it with

    attnbench run --plugin examples/my_kernel.py --backends chunked,sdpa-math

or register BACKENDS through an entry point (see docs/backends.md, "Adding a kernel").

The kernel processes the queries in blocks of `chunk_size` rows, so in prefill
and decode only a (B, Hq, chunk_size, Nkv) score matrix exists at any time
instead of the full (B, Hq, Nq, Nkv) one (in the training modes autograd still
keeps every block's probabilities for the backward). It handles:

- full attention and causal masks in both alignments (top_left: query i sees
  keys j <= i; bottom_right: j <= i + Nkv - Nq), with keys that no query of a
  block can see skipped rather than masked;
- MHA, GQA and MQA without copying K/V per query head (the G query heads of a
  KV group are folded into the row dimension of one matmul);
- both memory layouts (BHND and BNHD);
- every mode: the callable is plain differentiable PyTorch, so the runner's
  train_fwd / train_fwd_bwd steps get gradients through autograd.

Scores and softmax are computed in float32 and cast back to the input dtype
before the P·V product, so its error against the float64 reference is at or
below that of the same-dtype unfused reference (the correctness yardstick).

What the fields declared below mean (all of them are fields of
attnbench.backends.base.Backend; the runner applies every gate the same way to
built-in and plugin backends):

name             unique backend name, used by --backends and stored in every row.
family           library family stored in the `family` column ("plugin" here).
role             "contestant" (competes in `attnbench show`) or
                 "accuracy_reference" (measured, but left out of the contest
                 unless `show --all`).
kernel_families  device type -> the kernel families the dispatch probe must
                 observe. This kernel is matmul + softmax, so both CPU and CUDA
                 show GEMMs ("unfused-gemm"). If none of the declared families
                 is observed, or an undeclared fused attention family is, the
                 row is DISPATCH_MISMATCH. An empty dict skips the check.
modes            modes offered; others become UNSUPPORTED with a reason.
dtypes           input dtypes offered (fp32, bf16, fp16).
devices          device types offered ("cpu", "cuda").
layouts          memory layouts offered ("BHND", "BNHD").
max_head_dim     largest head dim accepted (None: no limit).
head_dim_multiple  head dims must be a multiple of this.
supports_gqa     False would make every kv_heads != q_heads workload UNSUPPORTED.
accepts          workload axis -> the non-default values this backend runs
                 (a tuple, or ANY); an axis at its default is always accepted
                 (attnbench/backends/capabilities.py lists the axes). Here
                 launch: ANY, the callable may be captured in a CUDA graph
                 (no host synchronisation, no data-dependent shapes); dropout
                 must stay unlisted: dropout output cannot be checked against
                 a deterministic float64 reference. refusals (axis -> text)
                 says why not in the backend's own words.
min_capability   lowest CUDA compute capability, e.g. (8, 0); None: any.
isolation        "worker": runs in the repeat's shared worker process;
                 "backend": a worker of its own per repeat (compile-based
                 backends); "attempt": a fresh process for every attempt.
description      one line shown by `attnbench backends`.
chunk_size       this plugin's own field: query rows per block.

Methods: supports() is inherited (it checks the fields above) and calls
extra_supports() for limits the fields cannot express; memory_estimate() feeds
the planner's OOM_PREDICTED check; prepare() returns a Prepared whose step (a
zero-argument callable) is checked, probed, measured and timed; Prepared can
also carry a first call, a context held for the attempt and an explicit
backward (see attnbench/backends/base.py). Raise attnbench.backends.Rejected
from prepare() (or from the first call) when the library refuses a
configuration: the row becomes UNSUPPORTED with your message as reason.
inputs.out is a NaN-poisoned output buffer any step may write into and return
instead of allocating (this one allocates: writing into one shared buffer under
autograd would chain graphs across calls).
"""
from __future__ import annotations

from dataclasses import dataclass

from attnbench.backends.base import ANY, CONTESTANT, Backend, DeviceInfo, Inputs, Prepared
from attnbench.backends.layout import causal_offset, from_bhnd, to_bhnd
from attnbench.workloads import Workload
from attnbench.workloads.cost import input_bytes

GEMM = frozenset({"unfused-gemm"})


@dataclass
class ChunkedAttention(Backend):
    """softmax(Q K^T · scale) V, a block of query rows at a time."""

    chunk_size: int = 64

    def extra_supports(self, w: Workload, dev: DeviceInfo) -> str | None:
        # bottom-right causal with Nq > Nkv leaves the first Nq - Nkv queries with no key to attend:
        # their softmax is undefined, so there is nothing correct to return.
        if w.causal and causal_offset(w.q_len, w.kv_len, w.causal_align) < 0:
            return "bottom-right causal with q_len > kv_len leaves queries with no visible key"
        return None

    def memory_estimate(self, w: Workload) -> int:
        # inputs + output, plus scores and probabilities (fp32) of one block and their autograd copies
        rows = min(self.chunk_size, w.q_len)
        block = w.batch * w.q_heads * rows * w.kv_len * 4
        # in the training modes autograd keeps every block's probabilities until backward
        training = w.mode in ("train_fwd", "train_fwd_bwd")
        saved = w.batch * w.q_heads * w.q_len * w.kv_len * 4 if training else 0
        return input_bytes(w) * 2 + 3 * block + 2 * saved

    def prepare(self, w: Workload, inputs: Inputs):
        import torch

        q, k, v = (to_bhnd(t, w.layout) for t in (inputs.q, inputs.k, inputs.v))
        hkv, g = w.kv_heads, w.gqa_group
        q_g = q.unflatten(1, (hkv, g))  # (B, Hkv, G, Nq, D): query head h uses KV head h // G
        k_t = k.transpose(-1, -2)  # (B, Hkv, D, Nkv)
        off = causal_offset(w.q_len, w.kv_len, w.causal_align) if w.causal else None
        rows = torch.arange(w.q_len, device=q.device)
        cols = torch.arange(w.kv_len, device=q.device)

        # Per block: query rows [s, e), keys [0, kv_end), and whether any pair inside needs masking.
        plan = []
        for s in range(0, w.q_len, self.chunk_size):
            e = min(s + self.chunk_size, w.q_len)
            if off is None:
                plan.append((s, e, w.kv_len, False))
            else:
                kv_end = min(w.kv_len, e - 1 + off + 1)  # last row of the block sees keys <= e-1+off
                plan.append((s, e, kv_end, s + off < kv_end - 1))

        def fn():
            outs = []
            for s, e, kv_end, masked in plan:
                c = e - s
                qc = q_g[:, :, :, s:e].reshape(w.batch, hkv, g * c, w.head_dim)  # (B, Hkv, G·c, D)
                sc = torch.matmul(qc, k_t[..., :kv_end]).unflatten(2, (g, c)).float() * inputs.scale
                if masked:  # (B, Hkv, G, c, kv_end)
                    keep = cols[:kv_end] <= rows[s:e, None] + off  # (c, kv_end)
                    sc = sc.masked_fill(~keep, float("-inf"))
                p = torch.softmax(sc, dim=-1).to(v.dtype).flatten(2, 3)  # (B, Hkv, G·c, kv_end)
                outs.append(torch.matmul(p, v[:, :, :kv_end]).unflatten(2, (g, c)))  # (B, Hkv, G, c, Dv)
            o = torch.cat(outs, dim=3).flatten(1, 2)  # (B, Hq, Nq, Dv)
            return from_bhnd(o, w.layout)

        return Prepared(step=fn)


BACKENDS = [
    ChunkedAttention(
        name="chunked",
        family="plugin",
        role=CONTESTANT,
        kernel_families={"cpu": GEMM, "cuda": GEMM},
        devices=("cpu", "cuda"),
        dtypes=("fp32", "bf16", "fp16"),
        layouts=("BHND", "BNHD"),
        supports_gqa=True,
        accepts={"launch": ANY},
        isolation="worker",
        description="chunked-query attention in plain PyTorch (example plugin)",
        chunk_size=64,
    )
]
