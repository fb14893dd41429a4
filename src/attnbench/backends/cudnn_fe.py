"""cuDNN's SDPA through the cuDNN frontend's Python graph API (`nvidia-cudnn-frontend`, import name
`cudnn`): one forward graph (and, for training, one backward graph) built and planned in prepare(),
executed in the step on the caller's stream. Tensors are described as (B, H, N, D) dims with the
workload's own strides, so either layout enters without a copy. Both causal alignments are flags of
the graph (use_causal_mask: top-left; use_causal_mask_bottom_right)."""
from __future__ import annotations

from ..workloads import Workload
from .base import CONTESTANT, Backend, Inputs, Prepared
from .layout import from_bhnd, to_bhnd
from .optional import call_rejecting, dist_version, import_hint

HINT = "cudnn (cuDNN frontend) is not importable: pip install 'attnbench[cudnn]' (nvidia-cudnn-frontend)"


def _graph(cudnn, handle, dtype):
    return cudnn.pygraph(io_data_type=dtype, intermediate_data_type=cudnn.data_type.FLOAT,
                         compute_data_type=cudnn.data_type.FLOAT, handle=handle)


def _finish(graph, cudnn):
    graph.validate()
    graph.build_operation_graph()
    graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    graph.check_support()
    graph.build_plans()


def _masks(w: Workload) -> dict:
    """The graph's causal flags for the workload's alignment."""
    if not w.causal:
        return {"use_causal_mask": False, "use_causal_mask_bottom_right": False}
    bottom = w.causal_align == "bottom_right" and w.q_len != w.kv_len
    return {"use_causal_mask": not bottom, "use_causal_mask_bottom_right": bottom}


class CudnnFrontend(Backend):
    def extra_supports(self, w: Workload, dev) -> str | None:
        if w.window:
            return ("sliding window: the cuDNN frontend's window arguments are not mapped by attnbench "
                    "(not verified against the library; refused rather than guessed)")
        return None

    def availability(self) -> str | None:
        return import_hint("cudnn", HINT, attr="pygraph")

    def version(self) -> str | None:
        return dist_version("nvidia-cudnn-frontend", "cudnn")

    def prepare(self, w: Workload, inputs: Inputs) -> Prepared:
        import cudnn
        import torch

        dtype = {torch.bfloat16: cudnn.data_type.BFLOAT16, torch.float16: cudnn.data_type.HALF}[inputs.q.dtype]
        handle = cudnn.create_handle()
        q, k, v = (to_bhnd(t, w.layout) for t in (inputs.q, inputs.k, inputs.v))  # (B, H, N, D) views
        o = to_bhnd(inputs.out, w.layout)  # the NaN-poisoned buffer, written in place
        train = w.needs_grad
        lse = torch.empty(w.batch, w.q_heads, w.q_len, 1, dtype=torch.float32, device=q.device) if train else None

        def build():
            g = _graph(cudnn, handle, dtype)
            tq, tk, tv = (g.tensor_like(t.detach()) for t in (q, k, v))
            to, tstats = g.sdpa(name="sdpa", q=tq, k=tk, v=tv, generate_stats=train, attn_scale=inputs.scale,
                                **_masks(w))
            to.set_output(True).set_dim(list(o.shape)).set_stride(list(o.stride()))
            if train:
                tstats.set_output(True).set_data_type(cudnn.data_type.FLOAT)
            _finish(g, cudnn)
            pack = {tq: q.detach(), tk: k.detach(), tv: v.detach(), to: o}
            if train:
                pack[tstats] = lse
            return g, pack

        fwd, fwd_pack = call_rejecting(build, "cuDNN frontend")
        ws = torch.empty(fwd.get_workspace_size(), dtype=torch.uint8, device=q.device)

        def step():
            # on the caller's stream (a CUDA-graph capture runs on a stream of its own)
            cudnn.set_stream(handle=handle, stream=torch.cuda.current_stream().cuda_stream)
            fwd.execute(fwd_pack, ws, handle=handle)
            return inputs.out

        state = [handle, fwd, ws]
        backward = None
        if train:
            dq, dk, dv = (torch.empty_like(t) for t in (q, k, v))
            do = to_bhnd(inputs.do, w.layout)

            def build_bwd():
                g = _graph(cudnn, handle, dtype)
                tq, tk, tv, to_, tdo = (g.tensor_like(t.detach()) for t in (q, k, v, o, do))
                tstats = g.tensor_like(lse)
                tdq, tdk, tdv = g.sdpa_backward(name="sdpa_backward", q=tq, k=tk, v=tv, o=to_, dO=tdo,
                                                stats=tstats, attn_scale=inputs.scale, **_masks(w))
                for t, ref in ((tdq, dq), (tdk, dk), (tdv, dv)):
                    t.set_output(True).set_dim(list(ref.shape)).set_stride(list(ref.stride()))
                _finish(g, cudnn)
                return g, {tq: q.detach(), tk: k.detach(), tv: v.detach(), to_: o, tdo: do.detach(), tstats: lse,
                           tdq: dq, tdk: dk, tdv: dv}

            bwd, bwd_pack = call_rejecting(build_bwd, "cuDNN frontend")
            bws = torch.empty(bwd.get_workspace_size(), dtype=torch.uint8, device=q.device)
            state += [bwd, bws]
            lay = w.layout

            def backward(out, d_out):
                if d_out is not inputs.do:  # the graph was planned on inputs.do's memory
                    raise ValueError("cudnn-fe's backward graph reads dO from inputs.do only")
                cudnn.set_stream(handle=handle, stream=torch.cuda.current_stream().cuda_stream)
                bwd.execute(bwd_pack, bws, handle=handle)
                return tuple(from_bhnd(t, lay) for t in (dq, dk, dv))

        return Prepared(step=step, first_call=lambda: call_rejecting(step, "cuDNN frontend"), backward=backward,
                        state=state)


def make() -> list[Backend]:
    # The frontend's SDPA runs the same cudnn_generated_fort_native_sdpa_* kernels as SDPA's cuDNN
    # path: the family (cudnn, declared by sdpa.py) is reused deliberately.
    return [CudnnFrontend(name="cudnn-fe", family="cudnn-frontend", role=CONTESTANT, devices=("cuda",),
                          modes=("train_fwd_bwd", "prefill", "decode"), dtypes=("bf16", "fp16"),
                          min_capability=(8, 0), max_head_dim=256, head_dim_multiple=8, supports_gqa=True,
                          kernel_families={"cuda": frozenset({"cudnn"})},
                          description="cuDNN frontend SDPA graph")]
