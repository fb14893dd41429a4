"""FlashInfer (`flashinfer-python`): prefill (single or batched over a ragged KV cache) and batch
decode over a paged KV cache. The wrappers' plan() runs in prepare(), outside the timed step; the
library JIT-compiles its kernels when a module is first needed (plan or first run). Causal is aligned
bottom-right (the last query sees the last key). BNHD inputs are zero-copy views: (B, N, H, D) becomes the
ragged (B*N, H, D) (BHND prefill inputs are copied inside the timed step); a dense decode cache, in
either layout, is B pages of one page each (NHD or HND pages), without a copy; a paged cache
(Workload.page_size, workloads/paged.py) is passed as its NHD pages, with indptr, indices and
last_page_len derived from its page table in prepare()."""
from __future__ import annotations

from ..workloads import Workload
from ..workloads.paged import last_page_len, pages_per_seq, paged
from ..workloads.varlen import cu_seqlens, packed
from .capabilities import ANY
from .base import CONTESTANT, Backend, DeviceInfo, Inputs, Prepared
from .kernels import KernelFamily
from .optional import bottom_right_only, call_rejecting, dist_version, from_bnhd, import_hint, to_bnhd

# flashinfer::SinglePrefillWithKVCacheKernel, BatchPrefillWithRaggedKVCacheKernel,
# BatchPrefillWithPagedKVCacheKernel, BatchDecodeWithPagedKVCacheKernel, MergeStates... (namespace
# flashinfer on every one of them).
KERNELS = (KernelFamily("flashinfer", r"flashinfer|(Single|Batch)(Prefill|Decode)With\w*KVCache", attention=True),)
HINT = "flashinfer is not importable: pip install 'attnbench[flashinfer]' (flashinfer-python; JIT needs nvcc)"
HEAD_DIMS = (64, 128, 256)
WORKSPACE_BYTES = 128 << 20


class FlashInfer(Backend):
    kind: str = "prefill"  # prefill | decode

    def availability(self) -> str | None:
        return import_hint("flashinfer", HINT)

    def version(self) -> str | None:
        return dist_version("flashinfer-python", "flashinfer")

    def extra_supports(self, w: Workload, dev: DeviceInfo) -> str | None:
        if w.head_dim != w.head_dim_v or w.head_dim not in HEAD_DIMS:
            return f"head_dim {w.head_dim}/{w.head_dim_v}: FlashInfer's kernels take equal head dims in {HEAD_DIMS}"
        if self.kind == "decode" and w.q_len != 1:
            return "batch decode takes one query token per sequence"
        return bottom_right_only(w, "FlashInfer")

    def prepare(self, w: Workload, inputs: Inputs) -> Prepared:
        import flashinfer
        import torch

        dev = inputs.q.device
        ws = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=dev)
        b, hq, hkv, d = w.batch, w.q_heads, w.kv_heads, w.head_dim
        # a sliding window of W keys is window_left = W - 1 keys left of the (bottom-right) diagonal
        win = {"window_left": w.window - 1} if w.window else {}
        if self.kind == "decode":
            # q (B, 1, Hq, D) or (B, Hq, 1, D) -> (B, Hq, D); the cache (B, Nkv, Hkv, D) is NHD pages of
            # Nkv tokens, (B, Hkv, Nkv, D) HND pages: one page per sequence, no copy either way.
            q = inputs.q.reshape(b, hq, d)
            if paged(w):
                # the pages (num_pages, page_size, Hkv, D) are NHD; sequence b's pages are row b of the
                # page table, in order: indptr steps by pages_per_seq, indices the table flattened
                kv_layout, page = "NHD", w.page_size
                indptr = torch.arange(b + 1, dtype=torch.int32, device=dev) * pages_per_seq(w)
                indices = inputs.page_table.reshape(-1)  # a view: a write into it fails the inputs' fingerprint
                last = torch.full((b,), last_page_len(w), dtype=torch.int32, device=dev)
            else:
                kv_layout, page = ("NHD" if w.layout == "BNHD" else "HND"), w.kv_len
                one = torch.arange(b + 1, dtype=torch.int32, device=dev)
                indptr, indices = one, one[:-1].contiguous()
                last = torch.full((b,), w.kv_len, dtype=torch.int32, device=dev)
            wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(ws, kv_layout=kv_layout)
            wrapper.plan(indptr, indices, last, hq, hkv, d, page, pos_encoding_mode="NONE", sm_scale=inputs.scale,
                         q_data_type=q.dtype, kv_data_type=inputs.k.dtype, **win)
            cache = (inputs.k, inputs.v)

            def step():
                return wrapper.run(q, cache).view(inputs.out.shape)  # (B, Hq, D) -> O's shape

            return Prepared(step=step, first_call=lambda: call_rejecting(step, "FlashInfer"),
                            state=(wrapper, ws, indptr, last))

        q, k, v = (to_bnhd(t, w.layout) for t in (inputs.q, inputs.k, inputs.v))  # (B, N, H, D)

        def ragged():
            """(B*N, H, D): views of BNHD tensors; a BHND workload's are copied here, inside the timed
            step, as a caller holding BHND tensors pays on every call."""
            return tuple(t.reshape(-1, t.shape[2], t.shape[3]) for t in (q, k, v))

        if b == 1 and not packed(w):
            def step():
                qr, kr, vr = ragged()
                o = flashinfer.single_prefill_with_kv_cache(qr, kr, vr, causal=w.causal, kv_layout="NHD",
                                                            sm_scale=inputs.scale, **win)
                return from_bnhd(o.view(1, w.q_len, hq, d), w.layout)

            return Prepared(step=step, first_call=lambda: call_rejecting(step, "FlashInfer"), state=ws)
        wrapper = flashinfer.BatchPrefillWithRaggedKVCacheWrapper(ws, kv_layout="NHD")
        if packed(w):  # a packed batch: the (1, T, H, D) tensors are the ragged ones, cu_seqlens the indptr
            qo_indptr = kv_indptr = torch.tensor(cu_seqlens(w), dtype=torch.int32, device=dev)
        else:
            qo_indptr = torch.arange(b + 1, dtype=torch.int32, device=dev) * w.q_len
            kv_indptr = torch.arange(b + 1, dtype=torch.int32, device=dev) * w.kv_len
        shape_o = q.shape[:3] + (d,)  # (B, Nq, Hq, D), or (1, T, Hq, D) packed
        wrapper.plan(qo_indptr, kv_indptr, hq, hkv, d, causal=w.causal, sm_scale=inputs.scale,
                     q_data_type=q.dtype, kv_data_type=k.dtype, **win)
        views = ragged() if w.layout == "BNHD" else None

        def step():
            qr, kr, vr = views or ragged()
            return from_bnhd(wrapper.run(qr, kr, vr).view(shape_o), w.layout)

        return Prepared(step=step, first_call=lambda: call_rejecting(step, "FlashInfer"), state=(wrapper, ws))


def make() -> list[Backend]:
    common = dict(family="flashinfer", role=CONTESTANT, devices=("cuda",), dtypes=("bf16", "fp16"),
                  min_capability=(8, 0), kernel_patterns=KERNELS, kernel_families={"cuda": frozenset({"flashinfer"})})
    prefill = FlashInfer(name="flashinfer-prefill", modes=("prefill",), accepts={"lengths": ANY},
                         description="FlashInfer prefill (single or ragged batch)", **common)
    # FlashInfer appends with a kernel of its own (append_paged_kv_cache) before the decode wrapper's run();
    # that call is not mapped, so an appending decode is refused
    decode = FlashInfer(name="flashinfer-decode", modes=("decode",), accepts={"page_size": ANY},
                        refusals={"decode_append": "FlashInfer's append (append_paged_kv_cache, a kernel of its own "
                                                   "before run()) is not mapped (not verified against the library)"},
                        description="FlashInfer batch decode (paged KV)", **common)
    decode.kind = "decode"
    return [prefill, decode]
