"""cuDNN's SDPA through the cuDNN frontend's Python graph API (`nvidia-cudnn-frontend`, import name
`cudnn`): one forward graph (and, for training, one backward graph) built and planned in prepare(),
executed in the step on the caller's stream. Tensors are described as (B, H, N, D) dims with the
workload's own strides, so either layout enters without a copy. Both causal alignments are flags of
the graph (use_causal_mask: top-left; use_causal_mask_bottom_right).

fp8_e4m3 (forward only, compute capability >= 9.0) builds `sdpa_fp8`: float8 Q, K, V and O, the
inputs' per-tensor scales as descale_q/k/v (Inputs.descale, not 1: the largest magnitude of each
tensor is its code 448), scale_o = 1.0 and float32 compute; the softmax output P
(in [0, 1]) is quantized with scale_s = FP8_MAX and dequantized with descale_s = 1/FP8_MAX, a
static choice that uses float8's range without a data-dependent amax (with 1.0, every probability
below 2^-10, i.e. most of a long row, would round to zero). The amax outputs are written and not
read. The fp8 graph's causal flag is use_causal_mask (top-left); bottom-right alignment with
q_len != kv_len is refused (its fp8 flag is not verified), except for one query row (decode), where
bottom-right causal masks nothing.

A paged decode cache (page_size > 0) is the same sdpa graph with paged_attention_k_table /
paged_attention_v_table: K and V are described as page containers (num_pages, Hkv, page_size, D)
through a permuted view of the token-major pages (strides (P·Hkv·D, D, Hkv·D, 1): no copy), the
page table as a (B, 1, pages_per_seq, 1) int32 view for both; use_padding_mask with seq_len_q = 1
and seq_len_kv = kv_len ((B, 1, 1, 1) int32, built in prepare) and paged_attention_max_seq_len_kv
= kv_len. A packed variable-length batch (lengths != fixed) is the ragged (THD) form: Q, K, V, O
described as (B, H, max_len, D) with BSHD strides and a ragged offset each, (B+1, 1, 1, 1) of
cu_seqlens · H · D elements, seq_len_q = seq_len_kv = the lengths, use_padding_mask. cuDNN's ragged
tensors are token-major: a BHND workload's packed Q, K, V are copied into token-major buffers
inside the timed step (as FlashAttention's varlen path copies them) and O is returned as a view of
a token-major buffer. fp8 takes neither form (refused). A sliding window is the diagonal band (left bound W, right bound 0,
aligned like the causal mask) on the dense and ragged graphs; decode, paged and fp8 refuse it."""
from __future__ import annotations

from ..workloads import FP8_MAX, Workload
from ..workloads.paged import paged, pages_per_seq
from ..workloads.varlen import cu_seqlens, packed, seq_lengths
from .capabilities import ANY
from .fp8_quant import SCHEMES
from .base import CONTESTANT, Backend, Inputs, Prepared, Rejected
from .layout import from_bhnd, to_bhnd
from .optional import call_rejecting, dist_version, import_hint, to_bnhd

HINT = "cudnn (cuDNN frontend) is not importable: pip install 'attnbench[cudnn]' (nvidia-cudnn-frontend)"


FP8 = "fp8_e4m3"
FP8_CAPABILITY = (9, 0)


def _io_type(cudnn, t):
    """cuDNN's data type of a bf16 or fp16 tensor (the fp8 graph has its own)."""
    import torch

    return {torch.bfloat16: cudnn.data_type.BFLOAT16, torch.float16: cudnn.data_type.HALF}[t.dtype]


def _graph(cudnn, handle, dtype):
    return cudnn.pygraph(io_data_type=dtype, intermediate_data_type=cudnn.data_type.FLOAT,
                         compute_data_type=cudnn.data_type.FLOAT, handle=handle)


def _finish(graph, cudnn):
    graph.validate()
    graph.build_operation_graph()
    graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    graph.check_support()
    graph.build_plans()


def _masks(w: Workload, cudnn=None) -> dict:
    """The graph's causal flags for the workload's alignment; a sliding window of W keys is the
    diagonal band instead: left bound W (query i keeps keys j > i + offset - W), right bound 0 (no
    key past the diagonal: causal), the diagonal aligned as the workload's causal mask (cuDNN's
    diagonal_alignment; the band's definition is the reference of the frontend's test_mhas.py)."""
    if w.window:
        align = cudnn.diagonal_alignment
        bottom = w.causal_align == "bottom_right" and w.q_len != w.kv_len
        return {"diagonal_band_left_bound": w.window, "diagonal_band_right_bound": 0,
                "diagonal_alignment": align.BOTTOM_RIGHT if bottom else align.TOP_LEFT}
    if not w.causal:
        return {"use_causal_mask": False, "use_causal_mask_bottom_right": False}
    bottom = w.causal_align == "bottom_right" and w.q_len != w.kv_len
    return {"use_causal_mask": not bottom, "use_causal_mask_bottom_right": bottom}


def _paged_masks(w: Workload) -> dict:
    """The causal flag of the paged decode graph (one query row per sequence): bottom-right keeps
    every cached key, so no flag is set (cuDNN's decode path needs none); top-left is
    use_causal_mask (the query sees key 0 only)."""
    return {"use_causal_mask": w.causal and w.causal_align == "top_left" and w.kv_len > 1}


def _forward(cudnn, handle, build, out, keep: list, copies=()) -> Prepared:
    """A prepared step of one forward graph: build() -> (graph, variant pack) under the library's
    refusal, its workspace, and a step that sets the stream, makes `copies` (dst, src; timed) and
    executes it, returning `out`. `keep` stays alive with the Prepared."""
    import torch

    fwd, pack = call_rejecting(build, "cuDNN frontend")
    ws = torch.empty(fwd.get_workspace_size(), dtype=torch.uint8, device=out.device)

    def step():
        # on the caller's stream (a CUDA-graph capture runs on a stream of its own)
        cudnn.set_stream(handle=handle, stream=torch.cuda.current_stream().cuda_stream)
        for dst, src in copies:
            dst.copy_(src)
        fwd.execute(pack, ws, handle=handle)
        return out

    return Prepared(step=step, first_call=lambda: call_rejecting(step, "cuDNN frontend"),
                    state=[handle, fwd, ws, *keep])


def _offset_dtype(torch, largest: int):
    """Ragged offsets are int32 while they fit (every cuDNN with THD takes int32), else int64."""
    return torch.int32 if largest < 2 ** 31 else torch.int64


def _fp8_refusal(w: Workload) -> str | None:
    """Why the fp8 graph cannot express this workload's mask (None: it can)."""
    if w.causal and w.causal_align == "bottom_right" and w.q_len != w.kv_len and w.q_len > 1:
        return ("fp8: bottom-right causal with q_len != kv_len is not mapped for sdpa_fp8 (its bottom-right "
                "flag is not verified against the library; refused rather than guessed)")
    return None


def _fp8_masks(w: Workload) -> dict:
    """sdpa_fp8's causal flag: top-left, or none where the mask keeps every key (one query row,
    bottom-right) or no mask applies."""
    return {"use_causal_mask": w.causal and not (w.causal_align == "bottom_right" and w.q_len != w.kv_len)}


class CudnnFrontend(Backend):
    # the quantisation sdpa_fp8 performs as driven here: the named scheme the fp8 contract judges it by
    fp8_scheme = SCHEMES["cudnn"]

    def extra_supports(self, w: Workload, dev) -> str | None:
        if w.window and (w.q_len == 1 or paged(w) or w.dtype == FP8):
            return ("sliding window: mapped for the dense and ragged sdpa graphs with more than one query "
                    "row only (the frontend's own tests exercise its band there, not in decode, paged or fp8)")
        if w.dtype == FP8:
            if paged(w) or packed(w):
                return ("fp8: a paged KV cache or a packed (ragged) batch is not mapped for sdpa_fp8 "
                        "(its paged and ragged forms are not verified against the library; refused rather than guessed)")
            if dev.capability is not None and tuple(dev.capability) < FP8_CAPABILITY:
                return (f"fp8 needs compute capability >= {FP8_CAPABILITY[0]}.{FP8_CAPABILITY[1]} (Hopper), "
                        f"device has {dev.capability[0]}.{dev.capability[1]}")
            return _fp8_refusal(w)
        return None

    def availability(self) -> str | None:
        return import_hint("cudnn", HINT, attr="pygraph")

    def version(self) -> str | None:
        return dist_version("nvidia-cudnn-frontend", "cudnn")

    def prepare(self, w: Workload, inputs: Inputs) -> Prepared:
        if w.dtype == FP8:
            return self._prepare_fp8(w, inputs)
        if paged(w):
            return self._prepare_paged(w, inputs)
        if packed(w):
            return self._prepare_ragged(w, inputs)
        import cudnn
        import torch

        dtype = _io_type(cudnn, inputs.q)
        handle = cudnn.create_handle()
        q, k, v = (to_bhnd(t, w.layout) for t in (inputs.q, inputs.k, inputs.v))  # (B, H, N, D) views
        o = to_bhnd(inputs.out, w.layout)  # the NaN-poisoned buffer, written in place
        train = w.needs_grad
        lse = torch.empty(w.batch, w.q_heads, w.q_len, 1, dtype=torch.float32, device=q.device) if train else None

        def build():
            g = _graph(cudnn, handle, dtype)
            tq, tk, tv = (g.tensor_like(t.detach()) for t in (q, k, v))
            to, tstats = g.sdpa(name="sdpa", q=tq, k=tk, v=tv, generate_stats=train, attn_scale=inputs.scale,
                                **_masks(w, cudnn))
            to.set_output(True).set_dim(list(o.shape)).set_stride(list(o.stride()))
            if train:
                tstats.set_output(True).set_data_type(cudnn.data_type.FLOAT)
            _finish(g, cudnn)
            pack = {tq: q.detach(), tk: k.detach(), tv: v.detach(), to: o}
            if train:
                pack[tstats] = lse
            return g, pack

        prepared = _forward(cudnn, handle, build, inputs.out, [])  # on the caller's stream (see _forward)
        if train:
            dq, dk, dv = (torch.empty_like(t) for t in (q, k, v))
            do = to_bhnd(inputs.do, w.layout)

            def build_bwd():
                g = _graph(cudnn, handle, dtype)
                tq, tk, tv, to_, tdo = (g.tensor_like(t.detach()) for t in (q, k, v, o, do))
                tstats = g.tensor_like(lse)
                tdq, tdk, tdv = g.sdpa_backward(name="sdpa_backward", q=tq, k=tk, v=tv, o=to_, dO=tdo,
                                                stats=tstats, attn_scale=inputs.scale, **_masks(w, cudnn))
                for t, ref in ((tdq, dq), (tdk, dk), (tdv, dv)):
                    t.set_output(True).set_dim(list(ref.shape)).set_stride(list(ref.stride()))
                _finish(g, cudnn)
                return g, {tq: q.detach(), tk: k.detach(), tv: v.detach(), to_: o, tdo: do.detach(), tstats: lse,
                           tdq: dq, tdk: dk, tdv: dv}

            bwd, bwd_pack = call_rejecting(build_bwd, "cuDNN frontend")
            bws = torch.empty(bwd.get_workspace_size(), dtype=torch.uint8, device=q.device)
            prepared.state += [bwd, bws]
            lay = w.layout

            def backward(out, d_out):
                if d_out is not inputs.do:  # the graph was planned on inputs.do's memory
                    raise ValueError("cudnn-fe's backward graph reads dO from inputs.do only")
                cudnn.set_stream(handle=handle, stream=torch.cuda.current_stream().cuda_stream)
                bwd.execute(bwd_pack, bws, handle=handle)
                return tuple(from_bhnd(t, lay) for t in (dq, dk, dv))

            prepared.backward = backward
        return prepared

    def _prepare_paged(self, w: Workload, inputs: Inputs) -> Prepared:
        """Decode against the paged cache: containers, tables and lengths as the module docstring says."""
        import cudnn
        import torch

        dtype = _io_type(cudnn, inputs.q)
        handle = cudnn.create_handle()
        q = to_bhnd(inputs.q, w.layout).detach()  # (B, Hq, 1, D)
        o = to_bhnd(inputs.out, w.layout)
        # (num_pages, P, Hkv, D) token-major pages -> (num_pages, Hkv, P, D) views: strides, no copy
        kc, vc = (t.detach().permute(0, 2, 1, 3) for t in (inputs.k, inputs.v))
        table = inputs.page_table.view(w.batch, 1, pages_per_seq(w), 1)  # the input itself, a view
        dev = q.device
        seq_q = torch.ones(w.batch, 1, 1, 1, dtype=torch.int32, device=dev)
        seq_kv = torch.full((w.batch, 1, 1, 1), w.kv_len, dtype=torch.int32, device=dev)

        def build():
            g = _graph(cudnn, handle, dtype)
            tq, tk, tv = (g.tensor_like(t) for t in (q, kc, vc))
            tk_table, tv_table = g.tensor_like(table), g.tensor_like(table)  # one table serves K and V
            tsq, tskv = g.tensor_like(seq_q), g.tensor_like(seq_kv)
            to, _stats = g.sdpa(name="sdpa_paged", q=tq, k=tk, v=tv, generate_stats=False, attn_scale=inputs.scale,
                                use_padding_mask=True, seq_len_q=tsq, seq_len_kv=tskv,
                                paged_attention_k_table=tk_table, paged_attention_v_table=tv_table,
                                paged_attention_max_seq_len_kv=w.kv_len, **_paged_masks(w))
            to.set_output(True).set_dim(list(o.shape)).set_stride(list(o.stride()))
            _finish(g, cudnn)
            return g, {tq: q, tk: kc, tv: vc, tk_table: table, tv_table: table, tsq: seq_q, tskv: seq_kv, to: o}

        return _forward(cudnn, handle, build, inputs.out, [seq_q, seq_kv])

    def _prepare_ragged(self, w: Workload, inputs: Inputs) -> Prepared:
        """A packed batch as ragged (THD) tensors: see the module docstring."""
        import cudnn
        import torch

        dtype = _io_type(cudnn, inputs.q)
        handle = cudnn.create_handle()
        lens, cu = seq_lengths(w), cu_seqlens(w)
        b, longest = len(lens), max(lens)
        q, k, v = (to_bnhd(t, w.layout).detach() for t in (inputs.q, inputs.k, inputs.v))  # (1, T, H, D)
        o = to_bnhd(inputs.out, w.layout)
        dev = q.device
        copies = []
        if w.layout == "BNHD" and all(t.is_contiguous() for t in (q, k, v, o)):
            out_view = inputs.out
        else:  # token-major buffers: Q, K, V copied in inside the step, O returned as a view
            src = (q, k, v)
            q, k, v = (torch.empty(t.shape, dtype=t.dtype, device=dev) for t in src)
            copies = list(zip((q, k, v), src))
            o = torch.full(o.shape, float("nan"), dtype=o.dtype, device=dev)
            out_view = o if w.layout == "BNHD" else o.transpose(1, 2)
        seq = torch.tensor(lens, dtype=torch.int32, device=dev).view(b, 1, 1, 1)

        def offsets(t):  # (B+1, 1, 1, 1): where each sequence starts, in elements of token-major t
            per_token = t.shape[2] * t.shape[3]
            return torch.tensor([c * per_token for c in cu], dtype=_offset_dtype(torch, cu[-1] * per_token),
                                device=dev).view(b + 1, 1, 1, 1)

        def dims(t):  # (B, H, max_len, D) with BSHD strides over the packed tokens
            h, d = t.shape[2], t.shape[3]
            return [b, h, longest, d], [longest * h * d, d, h * d, 1]

        offs = {name: offsets(t) for name, t in (("q", q), ("k", k), ("v", v), ("o", o))}

        def build():
            g = _graph(cudnn, handle, dtype)
            tens = {}
            for name, t in (("q", q), ("k", k), ("v", v)):
                dim, stride = dims(t)
                tens[name] = g.tensor(dim=dim, stride=stride, data_type=dtype)
            toffs = {name: g.tensor_like(t) for name, t in offs.items()}
            for name in ("q", "k", "v"):
                tens[name].set_ragged_offset(toffs[name])
            tsq, tskv = g.tensor_like(seq), g.tensor_like(seq)
            to, _stats = g.sdpa(name="sdpa_ragged", q=tens["q"], k=tens["k"], v=tens["v"], generate_stats=False,
                                attn_scale=inputs.scale, use_padding_mask=True, seq_len_q=tsq, seq_len_kv=tskv,
                                **_masks(w, cudnn))  # Nq == Nkv per sequence: causal is the square (top-left) mask
            dim, stride = dims(o)
            to.set_output(True).set_dim(dim).set_stride(stride).set_ragged_offset(toffs["o"])
            _finish(g, cudnn)
            pack = {tens["q"]: q, tens["k"]: k, tens["v"]: v, to: o, tsq: seq, tskv: seq}
            pack.update({toffs[name]: t for name, t in offs.items()})
            return g, pack

        # a BHND batch is copied into cuDNN's token-major form inside the (timed) step
        return _forward(cudnn, handle, build, out_view, [seq, offs, q, k, v, o], copies)

    def _prepare_fp8(self, w: Workload, inputs: Inputs) -> Prepared:
        """The forward fp8 graph (sdpa_fp8), O written in float8 into the poisoned buffer."""
        import cudnn
        import torch

        why = _fp8_refusal(w)
        if why:
            raise Rejected(why)
        handle = cudnn.create_handle()
        q, k, v = (to_bhnd(t, w.layout).detach() for t in (inputs.q, inputs.k, inputs.v))  # (B, H, N, D) views
        o = to_bhnd(inputs.out, w.layout)
        dev = q.device

        def scalar(x: float):
            return torch.full((1, 1, 1, 1), x, dtype=torch.float32, device=dev)

        # the inputs' per-tensor scales (code x s = value), bound as they are: a refill writes them in place
        ds = inputs.descale or {}
        scales = {f"descale_{n}": ds[n] if n in ds else scalar(1.0) for n in "qkv"}
        scales.update({"descale_s": scalar(1.0 / FP8_MAX), "scale_s": scalar(FP8_MAX), "scale_o": scalar(1.0)})
        amax = {"amax_s": scalar(0.0), "amax_o": scalar(0.0)}  # written by the graph, not read

        def build():
            # e4m3 (the fp8_e4m3 workload); float8_e5m2 tensors (lab/fp8_table3.py) build the e5m2 graph
            fp8 = cudnn.data_type.FP8_E5M2 if q.dtype == torch.float8_e5m2 else cudnn.data_type.FP8_E4M3
            g = _graph(cudnn, handle, fp8)
            tq, tk, tv = (g.tensor_like(t).set_data_type(fp8) for t in (q, k, v))
            tscale = {name: g.tensor_like(t) for name, t in scales.items()}
            to, _stats, tamax_s, tamax_o = g.sdpa_fp8(name="sdpa_fp8", q=tq, k=tk, v=tv, **tscale,
                                                       is_inference=True, attn_scale=inputs.scale, **_fp8_masks(w))
            to.set_output(True).set_dim(list(o.shape)).set_stride(list(o.stride())).set_data_type(fp8)
            for t in (tamax_s, tamax_o):
                t.set_output(True).set_dim([1, 1, 1, 1]).set_stride([1, 1, 1, 1]).set_data_type(
                    cudnn.data_type.FLOAT)
            _finish(g, cudnn)
            pack = {tq: q, tk: k, tv: v, to: o, tamax_s: amax["amax_s"], tamax_o: amax["amax_o"]}
            pack.update({tscale[name]: t for name, t in scales.items()})
            return g, pack

        return _forward(cudnn, handle, build, inputs.out, [scales, amax])


def make() -> list[Backend]:
    # The frontend's SDPA runs the same cudnn_generated_fort_native_sdpa_* kernels as SDPA's cuDNN
    # path: the family (cudnn, declared by sdpa.py) is reused deliberately.
    return [CudnnFrontend(name="cudnn-fe", family="cudnn-frontend", role=CONTESTANT, devices=("cuda",),
                          modes=("train_fwd_bwd", "prefill", "decode"), dtypes=("bf16", "fp16", FP8),
                          min_capability=(8, 0), max_head_dim=256, head_dim_multiple=8, supports_gqa=True,
                          accepts={"page_size": ANY, "lengths": ANY},
                          kernel_families={"cuda": frozenset({"cudnn"})},
                          description="cuDNN frontend SDPA graph")]
