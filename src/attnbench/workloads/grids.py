"""Named grids as plain Python functions, and user grids from YAML."""
from __future__ import annotations

import itertools
from pathlib import Path
from typing import Callable

from . import Workload, WorkloadError
from . import axes

KI = axes.KI
PREFILL_N = [256, 512, 1 * KI, 2 * KI, 4 * KI, 8 * KI]
DECODE_N = [512, 1 * KI, 2 * KI, 4 * KI, 8 * KI, 16 * KI]


def smoke() -> list[Workload]:
    """CPU-sized: all four modes, GQA, both causal alignments, a non-square prefill."""
    base = dict(batch=1, q_heads=4, kv_heads=2, head_dim=32, head_dim_v=32, dtype="bf16")
    return [
        Workload(mode="train_fwd", q_len=128, kv_len=128, causal=True, **base),
        Workload(mode="train_fwd_bwd", q_len=64, kv_len=64, causal=True, **base),
        Workload(mode="prefill", q_len=128, kv_len=128, causal=False, **base),
        Workload(mode="prefill", q_len=64, kv_len=128, causal=True, causal_align="top_left", **base),
        Workload(mode="prefill", q_len=64, kv_len=128, causal=True, causal_align="bottom_right", **base),
        Workload(mode="decode", q_len=1, kv_len=256, causal=False, **base),
    ]


def quick() -> list[Workload]:
    """One GPU in minutes: bf16 D=128 causal prefill, non-causal prefill at 16k tokens per batch
    (the shapes of published throughput anchors), a few fwd+bwd, decode eager and CUDA graph."""
    d = dict(head_dim=128, head_dim_v=128, dtype="bf16")
    out = [
        Workload(mode="prefill", batch=b, q_len=n, kv_len=n, q_heads=32, kv_heads=32, causal=True, **d)
        for b in (1, 4, 16)
        for n in PREFILL_N
    ]
    out += [
        Workload(mode="prefill", batch=b, q_len=n, kv_len=n, q_heads=32, kv_heads=32, causal=False, **d)
        for b, n in ((16, 1 * KI), (4, 4 * KI))
    ]
    out += [
        Workload(mode="train_fwd_bwd", batch=4, q_len=n, kv_len=n, q_heads=32, kv_heads=32, causal=True, **d)
        for n in (1 * KI, 4 * KI, 8 * KI)
    ]
    out += [
        Workload(mode="decode", batch=b, q_len=1, kv_len=n, q_heads=32, kv_heads=8, launch=launch, **d)
        for launch in ("eager", "graph")
        for b in (1, 8, 32, 64)
        for n in DECODE_N
    ]
    return out


def portability() -> list[Workload]:
    """The cross-GPU grid: prefill and decode, bf16 and fp16, D 64 and 128, causal both."""
    out = []
    for dtype, dim in itertools.product(("bf16", "fp16"), (64, 128)):
        d = dict(head_dim=dim, head_dim_v=dim, dtype=dtype)
        for b, n, causal in itertools.product((1, 4, 16), PREFILL_N, (False, True)):
            out.append(Workload(mode="prefill", batch=b, q_len=n, kv_len=n, q_heads=32, kv_heads=32,
                                causal=causal, **d))
        # decode: bottom-right causal at q_len=1 equals no mask, so only the unmasked case is run
        for launch, hkv, b, n in itertools.product(("eager", "graph"), (8, 32), (1, 8, 32, 64), DECODE_N):
            out.append(Workload(mode="decode", batch=b, q_len=1, kv_len=n, q_heads=32, kv_heads=hkv,
                                launch=launch, **d))
    return out


def fa3_paper() -> list[Workload]:
    """16k tokens per batch, hidden 2048, D 64/128/256, N 512..16k, causal both, fwd and fwd+bwd."""
    out = []
    for mode, dim, n, causal in itertools.product(("train_fwd", "train_fwd_bwd"), (64, 128, 256), DECODE_N,
                                                  (False, True)):
        heads = 2048 // dim
        out.append(Workload(mode=mode, batch=16 * KI // n, q_len=n, kv_len=n, q_heads=heads, kv_heads=heads,
                            head_dim=dim, head_dim_v=dim, dtype="bf16", causal=causal))
    return out


def features() -> list[Workload]:
    """The workload features of deployed kernels at serving shapes (bf16 D=128, GQA 32/8 unless an
    anchor shape needs MHA): sliding windows, packed (varlen) prefill, paged KV decode with the
    contiguous cache beside it, decode with the K/V append inside the timed step (beside the same
    decode without it, in the paged block), and the fp8 forward at the anchor shapes of bf16 in `quick`."""
    gqa = dict(q_heads=32, kv_heads=8, head_dim=128, head_dim_v=128, dtype="bf16")
    out = [Workload(mode="prefill", batch=1, q_len=n, kv_len=n, causal=True, window=win, **gqa)
           for n in (4 * KI, 16 * KI) for win in (1 * KI, 4 * KI)]
    out.append(Workload(mode="decode", batch=32, q_len=1, kv_len=16 * KI, causal=True, window=4 * KI, **gqa))
    out += [Workload(mode="prefill", batch=8, q_len=4 * KI, kv_len=4 * KI, causal=True, lengths=kind, **gqa)
            for kind in ("fixed", "uniform", "longtail")]
    out += [Workload(mode="decode", batch=b, q_len=1, kv_len=16 * KI, page_size=p, launch=launch, **gqa)
            for b in (8, 32) for p in (0, 16, 256) for launch in ("eager", "graph")]
    # page 256: the one page size every paged backend takes (FlashAttention-2's multiple of 256)
    out += [Workload(mode="decode", batch=32, q_len=1, kv_len=16 * KI, page_size=p, launch=launch,
                     decode_append="included", **gqa) for p, launch in ((0, "eager"), (0, "graph"), (256, "eager"))]
    mha = dict(q_heads=32, kv_heads=32, head_dim=128, head_dim_v=128, dtype="fp8_e4m3")
    out += [Workload(mode="prefill", batch=4, q_len=n, kv_len=n, causal=causal, **mha)
            for n, causal in ((4 * KI, False), (8 * KI, True))]
    return out


FP8_TILE_KV = (127, 128, 129, 255, 256, 257) + tuple(128 * i for i in range(3, 9))  # issue 40: 384..1024 too


def fp8() -> list[Workload]:
    """The fp8 contract's grid (issue 40, docs/method/fp8.md), in the order a cut-short run should keep: the
    throughput anchor of cuDNN's FP8 forward (B 1, Hq 64, Hkv 8, D 128, N 16k) in fp8_e4m3 and bf16; then a
    tile-boundary sweep, KV 1024 first (Table 3's in-tool rows), then 127/128/129, 255/256/257 and every
    multiple of 128 below 1024 (square prefill, B 1, 8 heads, D 128), each in fp8_e4m3 (non-causal and
    causal) and fp16 (the 16-bit rows and the emulator's schemes)."""
    out = [Workload(mode="prefill", batch=1, q_len=16 * KI, kv_len=16 * KI, q_heads=64, kv_heads=8, head_dim=128,
                    head_dim_v=128, dtype=dt) for dt in ("fp8_e4m3", "bf16")]
    head = dict(batch=1, q_heads=8, kv_heads=8, head_dim=128, head_dim_v=128)
    lengths = (1024,) + tuple(n for n in FP8_TILE_KV if n != 1024)
    out += [Workload(mode="prefill", q_len=n, kv_len=n, dtype=dt, causal=causal, **head)
            for n in lengths for dt, causal in (("fp8_e4m3", False), ("fp16", False), ("fp8_e4m3", True))]
    return out


def ladder() -> list[Workload]:
    """Issue 41's ladder grid, bf16 D=128: prefill at the published-config shape B=1 Hq/Hkv=64/8 N=16k (causal
    both; forward+backward causal; fp8_e4m3 causal) and quick's N >= 4k prefill rows (B 1/4/16, N 4k/8k causal,
    B=4 N=4k non-causal; 32 heads); decode Hq/Hkv=32/8, B 8/32, KV 4k/16k, eager and CUDA graph (a 30 µs kernel beside a Triton launch's host
    cost), and B=8 KV 16k paged (page 64)."""
    d = dict(head_dim=128, head_dim_v=128, dtype="bf16")
    anchor = dict(batch=1, q_len=16 * KI, kv_len=16 * KI, q_heads=64, kv_heads=8, head_dim=128, head_dim_v=128)
    out = [Workload(mode="prefill", causal=c, dtype="bf16", **anchor) for c in (True, False)]
    out += [Workload(mode="train_fwd_bwd", causal=True, dtype="bf16", **anchor),
            Workload(mode="prefill", causal=True, dtype="fp8_e4m3", **anchor)]
    out += [Workload(mode="prefill", batch=b, q_len=n, kv_len=n, q_heads=32, kv_heads=32, causal=True, **d)
            for b in (1, 4, 16) for n in (4 * KI, 8 * KI)]
    out += [Workload(mode="prefill", batch=4, q_len=4 * KI, kv_len=4 * KI, q_heads=32, kv_heads=32, causal=False, **d)]
    out += [Workload(mode="decode", batch=b, q_len=1, kv_len=n, q_heads=32, kv_heads=8, causal=False, launch=launch,
                     **d) for b in (8, 32) for n in (4 * KI, 16 * KI) for launch in ("eager", "graph")]
    out += [Workload(mode="decode", batch=8, q_len=1, kv_len=16 * KI, q_heads=32, kv_heads=8, causal=False,
                     page_size=64, **d)]
    return out


def ablation() -> list[Workload]:
    """Issue 41's Hopper ablation (FA3 Table 2's setting, bf16 D=128 non-causal B=2 16 heads N=8k; and the
    published-config shape B=1 Hq/Hkv=64/8 N=16k, causal both): one grid for the triton-hopper variants."""
    d = dict(head_dim=128, head_dim_v=128, dtype="bf16")
    out = [Workload(mode="prefill", batch=2, q_len=8 * KI, kv_len=8 * KI, q_heads=16, kv_heads=16, causal=False, **d)]
    out += [Workload(mode="prefill", batch=1, q_len=16 * KI, kv_len=16 * KI, q_heads=64, kv_heads=8, causal=c, **d)
            for c in (False, True)]
    return out


GRIDS: dict[str, Callable[[], list[Workload]]] = {
    "smoke": smoke,
    "quick": quick,
    "portability": portability,
    "fa3-paper": fa3_paper,
    "features": features,
    "fp8": fp8,
    "ladder": ladder,  # issue 41
    "ablation": ablation,  # issue 41
}


class GridError(ValueError):
    """A grid that cannot be built (unknown name, malformed file, impossible workload)."""


def get_grid(name: str) -> list[Workload]:
    if name not in GRIDS:
        raise GridError(f"unknown grid {name!r}; known grids: {', '.join(GRIDS)}")
    return GRIDS[name]()


def expand_block(block: dict) -> list[Workload]:
    """Cartesian product of one YAML block; kv_len and head_dim_v default to q_len and head_dim,
    q_len defaults to 1 for decode, kv_heads to q_heads."""
    if not isinstance(block, dict):
        raise GridError(f"each entry of 'workloads' must be a mapping, got {type(block).__name__}")
    unknown = set(block) - set(axes.NAMES) - {"seqlen"}
    if unknown:
        raise GridError(f"unknown field(s) in grid block: {', '.join(sorted(unknown))}")
    values = {k: (v if isinstance(v, list) else [v]) for k, v in block.items()}
    if "seqlen" in values:
        if "q_len" in values or "kv_len" in values:
            raise GridError("give either seqlen or q_len/kv_len in one block, not both")
        values["kv_len"] = values.pop("seqlen")
    for k in ("mode", "batch", "q_heads", "head_dim"):
        if k not in values:
            raise GridError(f"grid block lacks required field {k!r}")
    names = list(values)
    out = []
    for combo in itertools.product(*(values[n] for n in names)):
        d = dict(zip(names, combo))
        for k in names:  # lengths may be written 4k; other values are checked by Workload itself
            if axes.axis(k).length:
                d[k] = parse_size(d[k])
        if d.get("mode") == "decode" and "kv_len" not in d:
            raise GridError("a decode block needs kv_len (or seqlen): the KV-cache length")
        if "q_len" not in d:
            d["q_len"] = 1 if d.get("mode") == "decode" else d.get("kv_len")
        d.setdefault("kv_len", d["q_len"])
        d.setdefault("kv_heads", d["q_heads"])
        d.setdefault("head_dim_v", d["head_dim"])
        if d["q_len"] is None:
            raise GridError("grid block needs seqlen, q_len or kv_len")
        try:
            out.append(Workload(**d))
        except (WorkloadError, TypeError) as e:
            raise GridError(str(e)) from None
    return out


def load_yaml_grid(path: str | Path) -> tuple[str, list[Workload]]:
    """Read a user grid: {name: str, workloads: [block, ...]}."""
    import yaml

    p = Path(path)
    if not p.is_file():
        raise GridError(f"config file not found: {p}")
    try:
        doc = yaml.safe_load(p.read_text())
    except yaml.YAMLError as e:
        line = getattr(getattr(e, "problem_mark", None), "line", None)
        where = f" (line {line + 1})" if line is not None else ""
        raise GridError(f"malformed YAML in {p}{where}: {getattr(e, 'problem', e)}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("workloads"), list) or not doc["workloads"]:
        raise GridError(f"{p}: expected a mapping with a non-empty 'workloads' list")
    extra = set(doc) - {"name", "workloads"}
    if extra:
        raise GridError(f"{p}: unknown top-level key(s) {', '.join(sorted(map(str, extra)))}; "
                        "expected name and workloads")
    out: list[Workload] = []
    for block in doc["workloads"]:
        out.extend(expand_block(block))
    return str(doc.get("name") or p.stem), list(dict.fromkeys(out))


def parse_size(x) -> int:
    """A length of a grid: '4k' -> 4096 (workloads.axes.parse_size, failing as a GridError)."""
    try:
        return axes.parse_size(x)
    except WorkloadError as e:
        raise GridError(str(e)) from None
