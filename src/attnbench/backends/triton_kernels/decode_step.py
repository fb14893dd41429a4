"""The step of triton-decode: the workload's cache (contiguous in its layout, or paged) bound once, the split count and block chosen on the first call."""
from __future__ import annotations

from . import decode, named, tuning

INTERPRETER = [{"BLOCK_N": 16, "num_warps": 4, "num_stages": 1}]
CUDA = [{"BLOCK_N": 64, "num_warps": 4, "num_stages": 3}, {"BLOCK_N": 128, "num_warps": 4, "num_stages": 2}]


def build(w, inputs, to_bhnd, causal_offset, config: dict):
    """(first_call, step) returning O as a (B, Hq, 1, Dv) view of inputs.out; `config` receives the choice."""
    import torch

    dev = inputs.q.device
    q = to_bhnd(inputs.q.detach(), w.layout)
    o = to_bhnd(inputs.out, w.layout)
    paged = bool(w.page_size)
    k, v = (inputs.k.detach(), inputs.v.detach()) if paged else (to_bhnd(t.detach(), w.layout)
                                                                  for t in (inputs.k, inputs.v))
    table = inputs.page_table if paged else None
    n_vis = min(w.kv_len, causal_offset(1, w.kv_len, w.causal_align) + 1) if w.causal else w.kv_len
    sms = torch.cuda.get_device_properties(dev).multi_processor_count if dev.type == "cuda" else 8
    plans = {}
    for cfg in (CUDA if dev.type == "cuda" else INTERPRETER):
        ns = decode.splits_for(w.batch, w.kv_heads, n_vis, cfg["BLOCK_N"], sms)
        plans[cfg["BLOCK_N"]] = (ns, decode.buffers(w.batch, w.q_heads, ns, w.head_dim_v, dev))

    def run(cfg):
        ns, bufs = plans[cfg["BLOCK_N"]]
        named.run("tri_dec_fwd", lambda: decode.forward(q, k, v, o, table, w.page_size, n_vis, inputs.scale, ns, bufs,
                                                        cfg), q)

    key = (w.head_dim, w.dtype, paged, tuning.shape_class(w.kv_len), w.batch, w.q_heads // w.kv_heads)

    def first():
        got = tuning.choose("dec", key, CUDA if dev.type == "cuda" else INTERPRETER, run, dev)
        config["dec"] = {**got, "splits": plans[got["BLOCK_N"]][0]}
        return o

    def step():
        run(config["dec"])
        return o

    return first, step
