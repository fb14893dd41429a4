"""The step of triton-decode: the workload's cache (contiguous in its layout, or paged) bound once, the split count and block chosen on the first call."""
from __future__ import annotations

from . import decode, interpreting, named, tuning

INTERPRETER = [{"BLOCK_N": 16, "num_warps": 4, "num_stages": 1, "per_sm": 2, "fill": "over"}]
# per_sm and fill: the split rule (decode.splits_for). A split count changes no compiled kernel (the split kernel
# takes it at run time), so the two counts of BLOCK_N 64 cost one compile; the last candidate is v1's rule.
CUDA = [{"BLOCK_N": 64, "num_warps": 4, "num_stages": 3, "per_sm": 2, "fill": "under"},
        {"BLOCK_N": 64, "num_warps": 4, "num_stages": 3, "per_sm": 3, "fill": "under"},
        {"BLOCK_N": 128, "num_warps": 4, "num_stages": 2, "per_sm": 2, "fill": "under"},
        {"BLOCK_N": 64, "num_warps": 4, "num_stages": 3, "per_sm": 2, "fill": "over"}]


def build(w, inputs, to_bhnd, causal_offset, config: dict):
    """(first_call, step) returning O as a (B, Hq, 1, Dv) view of inputs.out; `config` receives the choice.
    On CUDA a step is the chosen plan's two launches past the JIT (launch.Launch): no tensor made, no torch op, no
    host synchronisation; on the interpreter each launch goes through the JIT inside its named operator."""
    import torch

    dev = inputs.q.device
    q = to_bhnd(inputs.q.detach(), w.layout)
    o = to_bhnd(inputs.out, w.layout)
    paged = bool(w.page_size)
    k, v = (inputs.k.detach(), inputs.v.detach()) if paged else (to_bhnd(t.detach(), w.layout)
                                                                  for t in (inputs.k, inputs.v))
    table = inputs.page_table if paged else None
    n_vis = min(w.kv_len, causal_offset(1, w.kv_len, w.causal_align) + 1) if w.causal else w.kv_len
    cuda = dev.type == "cuda"
    sms = torch.cuda.get_device_properties(dev).multi_processor_count if cuda else 8
    fast = cuda and not interpreting()
    candidates = CUDA if cuda else INTERPRETER
    plans, bufs = [], {}
    for cfg in candidates:
        ns = decode.splits_for(w.batch, w.kv_heads, n_vis, cfg["BLOCK_N"], sms, cfg["per_sm"], cfg["fill"])
        if ns not in bufs:
            bufs[ns] = decode.buffers(w.batch, w.q_heads, ns, w.head_dim_v, dev)
        plans.append((ns, decode.plan(q, k, v, o, table, w.page_size, n_vis, inputs.scale, ns, bufs[ns], cfg, fast)))

    def plan_of(cfg: dict):
        """The plan of a candidate (cfg: the candidate, or the config tuning returned: the candidate plus how
        it was chosen)."""
        return next(p for c, p in zip(candidates, plans) if all(cfg.get(key) == val for key, val in c.items()))

    def run(cfg):
        split, reduce = plan_of(cfg)[1]
        if fast:
            split()
            reduce()
        else:
            named.run("tri_dec_fwd", lambda: (split(), reduce()), q)

    key = (w.head_dim, w.dtype, paged, tuning.shape_class(w.kv_len), w.batch, w.q_heads // w.kv_heads)
    chosen = []

    def first():
        got = tuning.choose("dec", key, candidates, run, dev)
        ns, launches = plan_of(got)
        if fast:  # once past the JIT before it is said (a config cached by an earlier attempt has run the JIT only)
            run(got)
        # how a step launches: "direct" past the JIT (CUDA), "jit" (the interpreter, or a refused direct launch)
        config["dec"] = {**got, "splits": ns, "launch": "direct" if all(x.direct for x in launches) else "jit"}
        chosen[:] = [lambda: run(got)] if not fast else launches
        return o

    def step():
        for launch in chosen or [lambda: run(config["dec"])]:
            launch()
        return o

    return first, step
