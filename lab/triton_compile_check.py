"""Compile every ladder kernel, with every candidate config and variant the backends can choose, for a GPU target
without a GPU (Triton's own ptxas): compiler refusals, shared memory beyond the SM's, spills, and which matmul
instruction each got (wgmma on sm_90), before a lent GPU's time is spent on them.

Usage: python3 lab/triton_compile_check.py [--arch 90] [--quick]   (TRITON_INTERPRET must not be set)"""
from __future__ import annotations

import argparse
import inspect
import os
import re
import subprocess
import sys
import tempfile
import time

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from attnbench.backends.triton_kernels import decode, decode_step, fa1, fa2_bwd, fa2_fwd, fp8, fp8_step, hopper, prefill

SMEM = {90: 232448, 80: 166912, 89: 101376, 100: 232448}  # bytes a block may use


def signature(fn, types: dict, consts: dict) -> dict:
    return {n: "constexpr" if n in consts else types.get(n, "i32") for n in inspect.signature(fn.fn).parameters}


# What Triton's launcher specialises at the anchor shapes (contiguous BHND or BNHD views, N and heads multiples of
# 16): an integer argument equal to 1 (the unit stride along D) becomes a constant, pointers and the other strides and
# sizes are known divisible by 16. Without this the check compiles a kernel the GPU never runs (scalar address
# arithmetic over a runtime stride, unvectorised loads: registers and spills overstated).
UNIT = {"sqd", "skd", "svd", "sdd", "sod", "skgd", "svgd", "sgd"}
DIVISIBLE = {"NQ", "NKV", "HQ"}


def launch_like(fn, types: dict, consts: dict) -> tuple[dict, dict]:
    """(constexprs, attrs) as the launcher would make them for the anchor shapes."""
    names = list(inspect.signature(fn.fn).parameters)
    consts = {**consts, **{n: 1 for n in names if n in UNIT and n not in consts}}
    attrs = {}
    for i, n in enumerate(names):
        if n in consts:
            continue
        t = types.get(n, "i32")
        if t.startswith("*") or (t == "i32" and (n in DIVISIBLE or (n[0] == "s" and len(n) in (3, 4, 5)))):
            attrs[(i,)] = [["tt.divisibility", 16]]
    return consts, attrs


def compile_one(fn, types, consts, cfg, arch) -> tuple[str, str]:
    consts, attrs = launch_like(fn, types, consts)
    src = ASTSource(fn=fn, signature=signature(fn, types, consts), constexprs=consts, attrs=attrs)
    opts = {"num_warps": cfg.get("num_warps", 4), "num_stages": cfg.get("num_stages", 2),
            **({"maxnreg": cfg["maxnreg"]} if cfg.get("maxnreg") else {})}
    try:
        k = triton.compile(src, target=GPUTarget("cuda", arch, 32), options=opts)
    except Exception as e:  # the compiler's refusal, said in its last line
        text = str(e).strip().splitlines()
        return "REFUSED", f"{type(e).__name__}: {text[-1][:200] if text else ''}"
    ptx = k.asm.get("ptx", "")
    mma = "wgmma" if "wgmma.mma_async" in ptx else "mma" if "mma.sync" in ptx else "no-mma"
    smem = k.metadata.shared
    over = smem > SMEM.get(arch, 232448)
    return ("OVER-SMEM" if over else "ok"), f"{mma} smem {smem // 1024} KiB {resources(k.asm.get('cubin'))}"


def resources(cubin) -> str:
    """Registers per thread and spill stack (bytes) of the compiled kernel, read from its cubin by Triton's cuobjdump
    (n_regs and n_spills are set only when a kernel is loaded on a GPU)."""
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    if not cubin or not os.path.exists(tool):
        return "regs ? stack ?"
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        out = subprocess.run([tool, "-res-usage", f.name], capture_output=True, text=True).stdout
    m = re.search(r"REG:(\d+) STACK:(\d+)", out)
    return f"regs {m.group(1)} stack {m.group(2)} B" if m else "regs ? stack ?"


def cases(quick: bool):
    bf = {"Q": "*bf16", "K": "*bf16", "V": "*bf16", "O": "*bf16", "LSE": "*fp32", "qk_scale": "fp32",
          "sm_scale": "fp32", "DO": "*bf16", "DELTA": "*fp32", "DQ": "*bf16", "DK": "*bf16", "DV": "*bf16"}
    dims = (128,) if quick else (64, 128, 256)
    for d in dims:
        for cfg in prefill.FWD[d]:
            for causal in (False, True):
                yield f"fa2_fwd D{d} causal={causal}", fa2_fwd.tri_fa2_fwd, bf, dict(
                    CAUSAL=causal, BLOCK_M=cfg["BLOCK_M"], BLOCK_N=cfg["BLOCK_N"], HEAD_D=d, HEAD_DV=d, UPCAST=False), cfg
        for cfg in prefill.BWD[d]:
            for atomic in (False, True):
                t = {**bf, "DK": "*fp32", "DV": "*fp32"} if atomic else bf
                yield f"fa2_bwd_dkdv D{d} atomic={atomic}", fa2_bwd.tri_fa2_bwd_dkdv, t, dict(
                    CAUSAL=True, ATOMIC=atomic, BLOCK_M=cfg["BWD_M"], BLOCK_N=cfg["BLOCK_N"], HEAD_D=d, HEAD_DV=d,
                    UPCAST=False), cfg
            yield f"fa2_bwd_dq D{d}", fa2_bwd.tri_fa2_bwd_dq, bf, dict(
                CAUSAL=True, BLOCK_M=cfg["BLOCK_M"], BLOCK_N=cfg["BWD_N"], HEAD_D=d, HEAD_DV=d, UPCAST=False), cfg
        yield f"fa2_bwd_pre D{d}", fa2_bwd.tri_fa2_bwd_pre, bf, dict(BLOCK_M=64, HEAD_DV=d), {"num_warps": 4}
        for cfg in prefill.FA1.get(d, []):
            yield f"fa1_fwd D{d}", fa1.tri_fa1_fwd, {**bf, "ACC": "*fp32", "M": "*fp32", "L": "*fp32"}, dict(
                CAUSAL=True, BLOCK_M=cfg["BLOCK_M"], BLOCK_N=cfg["BLOCK_N"], HEAD_D=d, HEAD_DV=d, UPCAST=False), cfg
        for _, feats, _ in HOPPER:
            for cfg, causal in ((c, x) for c in prefill.hopper_candidates(_Cuda, d, feats)
                                for x in ((True, False) if feats.get("tune") else (True,))):
                name = f"hop_fwd D{d} causal={causal} {sorted(k for k in feats if feats[k])}"
                yield name, hopper.tri_hop_fwd, bf, dict(
                    CAUSAL=causal, BLOCK_M=cfg["BLOCK_M"], BLOCK_N=cfg["BLOCK_N"], HEAD_D=d, HEAD_DV=d,
                    WS=bool(cfg.get("WS", feats.get("ws"))), PERSISTENT=bool(cfg.get("PERSISTENT", feats.get("persistent"))),
                    SPLIT=bool(cfg.get("SPLIT")), UPCAST=False), cfg
        f8 = {"Q8": "*fp8e4nv", "K8": "*fp8e4nv", "VT8": "*fp8e4nv", "SQ": "*fp32", "SK": "*fp32", "SV": "*fp32",
              "O": "*bf16", "qk_scale": "fp32"}
        for cfg in fp8_step.CUDA[d]:
            for per_tensor, o_fp8 in ((False, False), (True, True)):
                fn = fp8.tri_fp8_fwd_tma if cfg.get("TMA") else fp8.tri_fp8_fwd  # v2 (TMA) or v1
                yield f"fp8_fwd{'_tma' if cfg.get('TMA') else ''} D{d} per_tensor={per_tensor}", fn, \
                    {**f8, "O": "*fp8e4nv"} if o_fp8 else f8, \
                    dict(CAUSAL=True, BLOCK_M=cfg["BLOCK_M"], BLOCK_N=cfg["BLOCK_N"], QB=fp8.QBLOCK, HEAD_D=d,
                         HEAD_DV=d, PER_TENSOR=per_tensor, O_FP8=o_fp8, UPCAST=False,
                         **({"SPLIT": bool(cfg.get("SPLIT"))} if cfg.get("TMA") else {})), cfg
        for had, tr in ((True, False), (False, True)):
            yield f"fp8_quant D{d} hadamard={had} transpose={tr}", fp8.tri_fp8_quant, {
                "X": "*bf16", "M": "*bf16", "CODES": "*fp8e4nv", "SCALES": "*fp32", "inv_sqrt_d": "fp32"}, dict(
                HADAMARD=had, TRANSPOSE=tr, QB=fp8.QBLOCK, HEAD_D=d, UPCAST=False), {"num_warps": fp8.QUANT_WARPS}
        for cfg in decode_step.CUDA:
            for paged in (False, True):
                yield f"dec_split D{d} paged={paged}", decode.tri_dec_split, {
                    "Q": "*bf16", "K": "*bf16", "V": "*bf16", "TABLE": "*i32", "PART_O": "*fp32", "PART_L": "*fp32",
                    "qk_scale": "fp32"}, dict(PAGED=paged, BLOCK_H=16, BLOCK_N=cfg["BLOCK_N"], HEAD_D=d, HEAD_DV=d,
                                              UPCAST=False), cfg
        yield f"dec_reduce D{d}", decode.tri_dec_reduce, {"PART_O": "*fp32", "PART_L": "*fp32", "O": "*bf16"}, dict(
            BLOCK_S=128, HEAD_DV=d), {"num_warps": 4}


class _Cuda:  # what hopper_candidates asks of a device
    type = "cuda"


def main() -> int:
    from attnbench.backends.triton_ladder import HOPPER_VARIANTS

    global HOPPER
    HOPPER = HOPPER_VARIANTS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", type=int, default=90)
    ap.add_argument("--quick", action="store_true", help="D=128 only")
    args = ap.parse_args()
    bad = 0
    for name, fn, types, consts, cfg in cases(args.quick):
        t = time.time()
        verdict, detail = compile_one(fn, types, consts, cfg, args.arch)
        bad += verdict != "ok"
        tile = {k: v for k, v in cfg.items() if k.isupper() or k in ("num_warps", "num_stages")}
        print(f"{verdict:9s} {name:52s} {str(tile):86s} {detail} ({time.time() - t:.1f} s)", flush=True)
    print(f"{bad} not ok")
    return 1 if bad else 0


HOPPER = ()

if __name__ == "__main__":
    sys.exit(main())
