"""The triton ladder (issue 41): each rung's kernels through attnbench's own runner and gates (float64 reference,
gradients, hard inputs, dispatch, recheck) on CPU under Triton's interpreter at tiny sizes, and on a GPU (marked gpu).

The interpreter must be on before triton itself is imported (triton.language's own jit functions are made then),
and other tests of this process may have imported triton already (torch.compile does): the CPU attempts run in a
child process started with TRITON_INTERPRET=1, several attempts per child. The interpreter is slow: the default
tier runs one workload per kind of kernel, the rest is in the full tier (tests/tiers.py). Without triton these
tests skip, saying so."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from attnbench.backends import registry
from attnbench.backends.base import DeviceInfo
from attnbench.runner import attempt
from attnbench.workloads import Workload

triton = pytest.importorskip("triton", reason="triton is not installed (pip install triton): the ladder's kernels "
                                              "cannot run here, not even on the interpreter")

FAST = dict(warmup_s=0.0, warmup_max_s=0.05, min_samples=3, max_samples=4, max_time_s=0.02)
TINY = dict(batch=1, q_len=16, kv_len=16, q_heads=2, kv_heads=1, head_dim=16, head_dim_v=16, dtype="bf16")
CHILD = """
import json, sys
from attnbench.backends import registry
from attnbench.runner import attempt
from attnbench.workloads import Workload
cases, fast = json.load(sys.stdin)
by_name = {b.name: b for b in registry.builtin()}
cache = attempt.WorkloadCache()
out = []
for name, w in cases:
    spec = {"op": "attempt", "workload": Workload(**w).to_dict(), "device": "cpu", "seed": 0, "timing": fast}
    out.append(attempt.run(spec, by_name[name], cache))
print("ROWS" + json.dumps(out, default=str))
"""


def backend(name):
    return {b.name: b for b in registry.builtin()}[name]


def interpreted(cases: list[tuple[str, dict]]) -> list[dict]:
    """The rows of (backend, workload keywords over TINY) attempts run on CPU in one child under the interpreter."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    payload = json.dumps([[[n, {**TINY, **kw}] for n, kw in cases], FAST])
    done = subprocess.run([sys.executable, "-c", CHILD], input=payload, capture_output=True, text=True, env=env,
                          timeout=600)
    line = next((x for x in done.stdout.splitlines() if x.startswith("ROWS")), None)
    assert line, done.stderr[-3000:]
    return json.loads(line[4:])


def run(name: str, device: str = "cpu", **kw) -> dict:
    w = Workload(**{**TINY, **kw})
    spec = {"op": "attempt", "workload": w.to_dict(), "device": device, "seed": 0, "timing": FAST}
    return attempt.run(spec, backend(name), attempt.WorkloadCache())


def ok(r: dict, family: str) -> None:
    """The row passed every gate and the rung's own kernel ran (not another attention path)."""
    assert r["status"] == "OK", r["reason"]
    assert r["dispatch_attention_family"] == family and r["dispatch_families"] == [family], r["dispatch_kernels"]
    assert r["kernel_config"] and r["kernel_config"][next(iter(r["kernel_config"]))]["tuned_over"] >= 1


DEFAULT = [  # the forward+backward row checks O too
    ("triton-fa2", dict(mode="train_fwd_bwd", causal=True, q_len=24, kv_len=40)),
    ("triton-decode", dict(mode="decode", q_len=1, kv_len=40, batch=2, q_heads=4, kv_heads=2, page_size=16)),
]


@pytest.fixture(scope="module")
def default_rows():
    return interpreted(DEFAULT)


# ---- the default tier: one workload per kind of kernel ---------------------------------------------------

def test_fa2_forward_and_backward_bottom_right_causal_gqa_pass_every_gate(default_rows):
    r = default_rows[0]
    ok(r, "triton-fa2")
    assert set(r["kernel_config"]) == {"fwd", "bwd"}
    assert {"dq", "dk", "dv"} <= set(r["check_detail"])  # the gradients were checked against float64


def test_decode_paged_gqa_splits_and_reduces(default_rows):
    r = default_rows[1]
    ok(r, "triton-decode")
    assert r["kernel_config"]["dec"]["splits"] > 1  # the reduction kernel merged several partial results


def test_on_cpu_without_the_interpreter_every_rung_refuses_in_one_line(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    ladder = [b for b in registry.builtin() if b.family == "triton"]
    assert {"triton-fa1", "triton-fa2", "triton-decode"} <= {b.name for b in ladder}
    w = Workload(mode="prefill", **{k: v for k, v in TINY.items()})
    for b in ladder:
        why = b.supports(w if b.rung != "decode" else Workload(**{**TINY, "mode": "decode", "q_len": 1}),
                         DeviceInfo("cpu"))
        assert why and "TRITON_INTERPRET=1" in why, (b.name, why)


def test_head_dims_the_kernels_cannot_tile_are_refused(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    b = backend("triton-fa2")
    assert "power-of-two" in b.supports(Workload(**{**TINY, "mode": "prefill", "head_dim": 24, "head_dim_v": 24}),
                                        DeviceInfo("cpu"))
    assert b.supports(Workload(**{**TINY, "mode": "prefill", "head_dim": 512, "head_dim_v": 512}),
                      DeviceInfo("cuda", "NVIDIA H200", (9, 0)))


# ---- the full tier (tests/tiers.py): the other rungs, variants, layouts and dtypes ---------------------

FULL = [
    ("triton-fa2", dict(mode="prefill", causal=True, q_len=24, kv_len=40)),
    ("triton-fa1", dict(mode="prefill", causal=True, q_len=24, kv_len=40)),
    ("triton-fa1", dict(mode="prefill", causal=False, layout="BNHD", dtype="fp16")),
    ("triton-fa2", dict(mode="prefill", causal=True, causal_align="top_left", q_len=40, kv_len=24)),
    ("triton-fa2", dict(mode="train_fwd_bwd", causal=False, q_heads=4, kv_heads=1, dtype="fp16", layout="BNHD")),
    ("triton-fa2-atomic", dict(mode="train_fwd_bwd", causal=True, q_heads=4, kv_heads=2)),
    ("triton-decode", dict(mode="decode", q_len=1, kv_len=40, batch=2, q_heads=4, kv_heads=2, layout="BNHD")),
    ("triton-hopper-base", dict(mode="prefill", causal=True, q_len=24, kv_len=40)),
    ("triton-hopper", dict(mode="train_fwd_bwd", causal=False, layout="BNHD")),
    ("triton-fp8", dict(mode="prefill", causal=True, dtype="fp8_e4m3", layout="BNHD", q_len=24, kv_len=40)),
    ("triton-fp8-incoherent", dict(mode="prefill", causal=False, q_len=24, kv_len=40)),
    ("triton-fa2", dict(mode="train_fwd", causal=True, q_len=24, kv_len=40, layout="BNHD")),
]
FULL_IDS = ["fa2-forward", "fa1-causal", "fa1-bnhd-fp16", "fa2-top-left", "fa2-bwd-mqa-bnhd", "fa2-atomic-bwd",
            "decode-contiguous", "hopper-base-causal", "hopper-bwd-bnhd", "fp8-codes", "fp8-incoherent-bf16",
            "fa2-train-fwd"]
FAMILY = {"triton-fa1": "triton-fa1", "triton-decode": "triton-decode", "triton-hopper-base": "triton-hopper",
          "triton-fp8": "triton-fp8", "triton-fp8-incoherent": "triton-fp8"}


@pytest.fixture(scope="module")
def full_rows():
    return dict(zip(FULL_IDS, interpreted(FULL)))


@pytest.mark.parametrize("case", FULL_IDS)
def test_every_rung_passes_every_gate(full_rows, case):
    name, kw = FULL[FULL_IDS.index(case)]
    if name == "triton-hopper":  # its forward and FA2's backward: both families, the forward's the attention one
        r = full_rows[case]
        assert r["status"] == "OK", r["reason"]
        assert r["dispatch_families"] == ["triton-fa2", "triton-hopper"], r["dispatch_kernels"]
        # the flagship tunes persistent on and off (the interpreter takes the first, non-persistent candidate)
        assert r["kernel_config"]["fwd"]["features"] == ["pipe", "tma", "ws"]
        assert r["kernel_config"]["fwd"]["tuned_features"] == ["persistent", "split", "ws"]
        return
    ok(full_rows[case], FAMILY.get(name, "triton-fa2"))
    if name.startswith("triton-fp8"):  # judged by the fp8 contract against its declared scheme's emulation
        fp8 = full_rows[case]["check_detail"]["fp8"]
        assert fp8["scheme"] == backend(name).fp8_scheme and fp8["ratio"] <= 1.5, fp8


# ---- GPU -------------------------------------------------------------------------------------------------

GPU_CASES = [
    ("triton-fa2", dict(mode="prefill", causal=True, q_len=1024, kv_len=1024, q_heads=8, kv_heads=2, head_dim=128,
                        head_dim_v=128)),
    ("triton-fa2", dict(mode="train_fwd_bwd", causal=True, q_len=512, kv_len=512, q_heads=8, kv_heads=2,
                        head_dim=128, head_dim_v=128)),
    ("triton-fa2", dict(mode="prefill", causal=False, q_len=300, kv_len=700, q_heads=4, kv_heads=4, head_dim=256,
                        head_dim_v=256, dtype="fp16")),
    ("triton-fa2-atomic", dict(mode="train_fwd_bwd", causal=False, q_len=256, kv_len=256, q_heads=8, kv_heads=2,
                               head_dim=64, head_dim_v=64)),
    ("triton-fa1", dict(mode="prefill", causal=True, q_len=1024, kv_len=1024, q_heads=8, kv_heads=2, head_dim=128,
                        head_dim_v=128)),
    ("triton-decode", dict(mode="decode", q_len=1, kv_len=4096, batch=8, q_heads=32, kv_heads=8, head_dim=128,
                           head_dim_v=128)),
    ("triton-decode", dict(mode="decode", q_len=1, kv_len=4000, batch=8, q_heads=32, kv_heads=8, head_dim=128,
                           head_dim_v=128, page_size=64)),
] + [(n, dict(mode="prefill", causal=True, q_len=2048, kv_len=2048, q_heads=8, kv_heads=2, head_dim=128,
             head_dim_v=128, dtype=dt))
      for n, dt in (("triton-fp8", "bf16"), ("triton-fp8-incoherent", "bf16"), ("triton-fp8", "fp8_e4m3"))] + [
    # last: warp specialisation is the compiler path least tried on sm_90 (a compiler abort ends this process)
    (n, dict(mode="prefill", causal=c, q_len=2000, kv_len=2048, q_heads=8, kv_heads=2, head_dim=128, head_dim_v=128))
    for n, c in (("triton-hopper-base", True), ("triton-hopper-ws", False), ("triton-hopper-persistent", True),
                 ("triton-hopper", True))]


@pytest.mark.parametrize("name,kw", GPU_CASES, ids=[f"{n}-{k['mode']}-{i}" for i, (n, k) in enumerate(GPU_CASES)])
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_rung_on_gpu_passes_every_gate(name, kw):
    fam = "triton-hopper" if name.startswith("triton-hopper") else FAMILY.get(name, "triton-fa2")
    if name.startswith("triton-fp8") and torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("e4m3 needs compute capability 8.9")
    ok(run(name, device="cuda", **kw), fam)


ATTEND = """
import torch
from attnbench.backends.registry import builtin
from attnbench.backends.reference import attention_math
b = {x.name: x for x in builtin()}["triton-fa2"]
q = torch.randn(1, 4, 24, 32, dtype=torch.bfloat16, requires_grad=True)
k, v = (torch.randn(1, 2, 40, 32, dtype=torch.bfloat16, requires_grad=True) for _ in range(2))
with b.attend_session():
    o = b.attend(q, k, v, causal=True)
do = torch.randn_like(o)
got = (o, *torch.autograd.grad(o, (q, k, v), do))
leaves = [x.detach().double().requires_grad_() for x in (q, k, v)]
ref = attention_math(*leaves, True, "bottom_right", 32 ** -0.5)
want = (ref, *torch.autograd.grad(ref, leaves, do.double()))
print("ERR", max((a.double() - w).abs().max().item() / w.abs().max().item() for a, w in zip(got, want)))
"""


def test_attend_serves_a_models_forward_and_backward():
    """attnbench model's door: attend() on a model's own tensors returns O that autograd differentiates through the
    rung's backward (bf16: within 2 % of float64 relative to the largest value)."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run([sys.executable, "-c", ATTEND], capture_output=True, text=True, env=env, timeout=300)
    line = next((x for x in done.stdout.splitlines() if x.startswith("ERR")), None)
    assert line and float(line.split()[1]) < 0.02, done.stderr[-2000:]
    assert backend("triton-fa2").offers_attend() and backend("triton-hopper").offers_attend()


# ---- the ladder as a result: analyze's section and the report's page ------------------------------------

def test_the_ladder_section_and_page_show_each_rung_beside_sdpa_flash(tmp_path):
    """A store with two rungs and sdpa-flash (CPU, interpreter): analyze's ladder section lists both rungs with their
    chosen config and sdpa-flash beside them, and the report has a ladder page naming them."""
    yaml = tmp_path / "g.yaml"
    yaml.write_text("name: tiny\nworkloads:\n  - {mode: prefill, batch: 1, seqlen: 32, q_heads: 2, kv_heads: 1, "
                    "head_dim: 16, causal: true}\n")
    db, env = tmp_path / "s.sqlite", {**os.environ, "TRITON_INTERPRET": "1",
                                      "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    cli = [sys.executable, "-m", "attnbench"]
    done = subprocess.run(cli + ["run", "--config", str(yaml), "--backends", "sdpa-flash,triton-fa2,triton-fa1",
                                 "--repeats", "1", "--max-time", "0.05", "--db", str(db), "--device", "cpu"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    subprocess.run(cli + ["analyze", str(db), "--json", str(tmp_path / "a.json")], check=True, capture_output=True,
                   env=env, timeout=300)
    rungs = json.loads((tmp_path / "a.json").read_text())["ladder"]
    assert {r["rung"] for r in rungs} == {"triton-fa1", "triton-fa2"}
    assert all(r["sdpa_flash"] is not None and "BLOCK_M" in r["kernel_config"] for r in rungs)
    assert [r["target"] for r in rungs if r["rung"] == "triton-fa2"] == [0.70]
    subprocess.run(cli + ["report", str(db), "--out", str(tmp_path / "site")], check=True, capture_output=True,
                   env=env, timeout=300)
    page = (tmp_path / "site" / "ladder.html").read_text()
    assert "triton-fa1" in page and "triton-fa2" in page
