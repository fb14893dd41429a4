"""The fp8_e4m3 dtype (issue 12): workload rules, saturated inputs, the provisional correctness check
(stored, marked not yet contract-checked, gross errors still INCORRECT), cuDNN frontend's sdpa_fp8
graph through a fake `cudnn` module, and `show` on a store holding an fp8 row."""
from __future__ import annotations

import sys
import types

import pytest
import torch

from attnbench.backends import registry
from attnbench.backends.base import DeviceInfo
from attnbench.measure import correctness, fp8_contract
from attnbench.measure.inputs import FP8_MAX, make_inputs
from attnbench.runner import attempt
from attnbench.workloads import DTYPE_BYTES, Workload, WorkloadError
from attnbench.workloads.cost import input_bytes, io_bytes

H100 = DeviceInfo("cuda", "NVIDIA H100", (9, 0))
A100 = DeviceInfo("cuda", "NVIDIA A100", (8, 0))
FAST = dict(warmup_s=0.0, warmup_max_s=0.1, min_samples=3, max_samples=5, max_time_s=0.05)
F8 = torch.float8_e4m3fn


def w_(**kw) -> Workload:
    base = dict(mode="prefill", batch=2, q_len=32, kv_len=32, q_heads=4, kv_heads=2, head_dim=16, head_dim_v=16,
                dtype="fp8_e4m3")
    return Workload(**{**base, **kw})


def backend(name):
    return {b.name: b for b in registry.builtin()}[name]


# ---- the workload axis --------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["train_fwd", "train_fwd_bwd"])
def test_fp8_training_is_an_impossible_workload_in_one_line(mode):
    with pytest.raises(WorkloadError) as e:
        w_(mode=mode)
    msg = str(e.value)
    assert "\n" not in msg and "fp8_e4m3 is offered for the forward modes only" in msg and mode in msg


def test_fp8_forward_workloads_cost_one_byte_per_element():
    w8, w16 = w_(), w_(dtype="fp16")
    assert DTYPE_BYTES["fp8_e4m3"] == 1 and "fp8_e4m3" in w8.label()
    assert io_bytes(w8) * 2 == io_bytes(w16) and input_bytes(w8) * 2 == input_bytes(w16)
    assert w_(mode="decode", q_len=1, kv_len=64).key() != w_(mode="decode", q_len=1, kv_len=64, dtype="bf16").key()


def test_workload_text_takes_the_fp8_spellings():
    from attnbench.cli.workload_text import parse_workload

    for word in ("fp8_e4m3", "float8_e4m3fn"):
        assert parse_workload(f"prefill B=1 N=64 Hq=4 D=64 {word}").dtype == "fp8_e4m3"


# ---- inputs -------------------------------------------------------------------------------------

@pytest.mark.parametrize("dist", ["normal", "outliers", "large-logits"])
def test_fp8_inputs_are_saturated_at_448_and_the_output_is_poisoned(dist, monkeypatch):
    import attnbench.measure.distributions as inputs_mod

    monkeypatch.setattr(inputs_mod, "OUTLIER_STD", 1000.0)  # outliers far beyond fp8's range
    monkeypatch.setattr(inputs_mod, "LARGE_LOGIT_STD", 300.0)
    w = w_(q_len=64, kv_len=64, head_dim=32, head_dim_v=32)
    inp = make_inputs(w, "cpu", 0, dist)
    for t in (inp.q, inp.k, inp.v):
        x = t.float()
        assert t.dtype == F8 and not t.requires_grad
        assert not x.isnan().any() and x.abs().max().item() <= FP8_MAX
    if dist != "normal":  # the tails were clipped, not turned into NaN
        assert max(t.float().abs().max().item() for t in (inp.q, inp.k, inp.v)) == FP8_MAX
    assert inp.out.dtype == F8 and inp.out.float().isnan().all()
    again = make_inputs(w, "cpu", 0, dist)
    assert torch.equal(again.q.float(), inp.q.float())  # reproducible


# ---- the provisional check ----------------------------------------------------------------------

def _attention32(inp, w, causal=None, quantize_p=True):
    """What an fp8 kernel computes: float32 math on the float8 inputs, P quantized to float8 with
    scale FP8_MAX, O rounded to float8 (BHND layout)."""
    ds = {n: t.item() for n, t in (inp.descale or {}).items()}
    q, k, v = (t.float() * ds.get(n, 1.0) for n, t in zip("qkv", (inp.q, inp.k, inp.v)))
    g = w.gqa_group
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    s = q @ k.transpose(-1, -2) * inp.scale
    if w.causal if causal is None else causal:
        n, m = s.shape[-2:]
        s = s.masked_fill(torch.ones(n, m, dtype=torch.bool).triu(1 + m - n), float("-inf"))
    p = torch.softmax(s, -1)
    if quantize_p:
        p = (p * FP8_MAX).to(F8).float() / FP8_MAX
    return (p @ v).to(F8)


@pytest.mark.parametrize("kw", [dict(), dict(causal=True), dict(mode="decode", q_len=1, kv_len=96, causal=True)])
@pytest.mark.parametrize("dist", ["normal", "outliers", "large-logits"])
def test_a_correct_fp8_output_passes_and_is_marked_provisional(kw, dist):
    w = w_(**kw)
    inp = make_inputs(w, "cpu", 0, dist)
    ref = correctness.Reference64(w, inp, 0)
    v = correctness.check(w, _attention32(inp, w), inp, ref, hard=dist != "normal")
    assert v.passed, v.reason
    assert v.detail["contract"].startswith("fp8-emulated") and 0 < v.err_ratio <= correctness.TOLERANCES["fp8_e4m3"]
    assert v.cosine > correctness.MIN_COSINE and v.detail["o"]["ratio"] == pytest.approx(v.err_ratio)
    # the floor is the float64 result rounded to fp8: nonzero, at most float8's half-ulp of the largest output
    top = max(ref.ref[0].abs().max().item(), ref.rows64.abs().max().item())
    assert 0 < v.ref_err <= 2 ** -4 * top


def test_the_reports_provisional_dtypes_are_the_checks():
    from attnbench.report import terminal

    assert set(terminal.PROVISIONAL_DTYPES) == set(correctness.CONTRACT)


def test_other_dtypes_carry_no_contract_key():
    w = w_(dtype="fp32")
    inp = make_inputs(w, "cpu", 0)
    ref = correctness.Reference64(w, inp, 0)
    v = correctness.check(w, _attention32(inp, w, quantize_p=False).float(), inp, ref)
    assert "contract" not in v.detail


def test_gross_fp8_errors_are_incorrect():
    w = w_(causal=True)
    inp = make_inputs(w, "cpu", 0)
    ref = correctness.Reference64(w, inp, 0)
    good = _attention32(inp, w)
    nan = good.clone()
    nan.view(-1)[5] = float("nan")
    cases = {
        "NaN": (nan, "NaN/Inf"),
        "wrong dtype": (good.to(torch.bfloat16), "expected float8_e4m3fn"),
        "wrong shape": (good[:, :, :-1], "has shape"),
        "no causal mask": (_attention32(inp, w, causal=False), "the emulated fp8 scheme's"),
        "sign flipped": ((-good.float()).to(F8), "the emulated fp8 scheme's"),
    }
    for name, (out, words) in cases.items():
        v = correctness.check(w, out, inp, ref)
        assert not v.passed and words in v.reason, (name, v.reason)


def test_a_low_cosine_fails_fp8_even_within_a_loose_tolerance():
    w = w_()
    inp = make_inputs(w, "cpu", 0)
    ref = correctness.Reference64(w, inp, 0)
    noise = torch.randn(inp.out.shape, generator=torch.Generator().manual_seed(1))
    noisy = (_attention32(inp, w).float() + 0.5 * noise).to(F8)
    v = correctness.check(w, noisy, inp, ref, tol=1e9)  # the ratio bound cannot fail it
    assert not v.passed and v.cosine < correctness.MIN_COSINE
    assert "the emulated fp8 scheme's" in v.reason and v.detail["contract"].startswith("fp8-emulated")


# ---- backends -----------------------------------------------------------------------------------

def test_every_backend_but_the_fp8_ones_refuses_fp8_by_its_dtypes():
    prefill, decode = w_(head_dim=64, head_dim_v=64), w_(mode="decode", q_len=1, kv_len=64, head_dim=64, head_dim_v=64)
    for b in registry.builtin():
        dev = H100 if "cuda" in b.devices else DeviceInfo("cpu")
        w = prefill if "prefill" in b.modes else decode
        why = b.supports(w, dev)
        if b.name == "cudnn-fe":
            assert why is None and "fp8_e4m3" in b.dtypes
        elif getattr(b, "fp8_scheme", None):  # an fp8 kernel of its own (the triton ladder), held to its scheme
            continue
        else:
            assert "fp8_e4m3" not in b.dtypes and why and "dtype fp8_e4m3 not offered" in why, (b.name, why)


def test_cudnn_fe_fp8_needs_hopper_and_refuses_an_unmapped_alignment():
    be = backend("cudnn-fe")
    assert "fp8 needs compute capability >= 9.0" in be.supports(w_(head_dim=64, head_dim_v=64), A100)
    assert be.supports(w_(head_dim=64, head_dim_v=64, dtype="bf16"), A100) is None  # bf16 unchanged
    rect = w_(causal=True, q_len=16, kv_len=32)
    assert "bottom-right causal with q_len != kv_len is not mapped for sdpa_fp8" in be.supports(rect, H100)
    assert be.supports(w_(dtype="bf16", causal=True, q_len=16, kv_len=32), H100) is None
    for ok in (w_(causal=True, causal_align="top_left", q_len=16, kv_len=32), w_(causal=True),
               w_(mode="decode", q_len=1, kv_len=64, causal=True)):
        assert be.supports(ok, H100) is None, ok.label()


def _mm8(a, b, sa: float, sb: float):
    """a @ b of float8 (..., M, K) and (..., K, N) through torch._scaled_mm, one matrix at a time, float32 out."""
    lead = a.shape[:-2]
    a2, b2 = a.reshape(-1, *a.shape[-2:]), b.reshape(-1, *b.shape[-2:])
    one = torch.tensor

    out = [torch._scaled_mm(x.contiguous(), y.t().contiguous().t(), scale_a=one(sa), scale_b=one(sb),
                            out_dtype=torch.float32) for x, y in zip(a2, b2)]
    return torch.stack(out).reshape(*lead, a.shape[-2], b.shape[-1])


def fake_cudnn_fp8(monkeypatch, *, ignore_mask: bool = False):
    """A cudnn module whose sdpa_fp8 graph computes the attention in float32 from the float8 tensors
    it is given (descaled, P quantized by scale_s, O scaled by scale_o), writing O in float8."""
    log = []

    class T:
        def __init__(self, like=None):
            self.like, self.calls = like, []

        def __getattr__(self, name):  # set_output, set_dim, set_stride, set_data_type: chainable, recorded
            def f(*a, **k):
                self.calls.append((name, a))
                return self
            return f

    class Graph:
        def __init__(self, **kw):
            log.append(("graph", kw))
            self.kw = None

        def tensor_like(self, t):
            return T(t)

        def sdpa_fp8(self, **kw):
            log.append(("sdpa_fp8", kw))
            self.kw, self.outs = kw, (T(), T(), T(), T())
            return self.outs

        def get_workspace_size(self):
            return 0

        def execute(self, pack, ws, handle=None):
            kw, (to, stats, amax_s, amax_o) = self.kw, self.outs
            assert stats not in pack  # is_inference: no stats tensor is bound
            sc = {n: pack[kw[n]].item() for n in ("descale_q", "descale_k", "descale_v", "descale_s", "scale_s",
                                                  "scale_o")}
            q, k, v = (pack[kw[n]] for n in "qkv")
            g = q.shape[1] // k.shape[1]
            k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
            # float8 GEMMs (torch's _scaled_mm, as a float8 kernel's products), descaled as cuDNN does
            s = _mm8(q, k.transpose(-1, -2), sc["descale_q"], sc["descale_k"]) * kw["attn_scale"]
            if kw["use_causal_mask"] and not ignore_mask:  # top-left
                n, m = s.shape[-2:]
                s = s.masked_fill(torch.ones(n, m, dtype=torch.bool).triu(1), float("-inf"))
            p = torch.softmax(s, -1)
            p8 = (p * sc["scale_s"]).clamp(-FP8_MAX, FP8_MAX).to(F8)
            o = _mm8(p8, v, sc["descale_s"], sc["descale_v"]) * sc["scale_o"]
            pack[to].copy_(o.to(F8))
            pack[amax_s].fill_(p.max().item())
            pack[amax_o].fill_(o.abs().max().item())
            log.append(("execute", None))

        def __getattr__(self, name):  # validate, build_operation_graph, ...
            return lambda *a, **k: None

    ns = types.SimpleNamespace
    mod = types.ModuleType("cudnn")
    for k, v in dict(pygraph=Graph, create_handle=lambda: "handle", set_stream=lambda **k: None,
                     data_type=ns(BFLOAT16="bf16", HALF="fp16", FLOAT="fp32", FP8_E4M3="fp8e4m3"),
                     heur_mode=ns(A="A", FALLBACK="F")).items():
        setattr(mod, k, v)
    monkeypatch.setitem(sys.modules, "cudnn", mod)
    # the step sets cuDNN's stream from torch's current CUDA stream; there is none on this CPU machine
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *a, **k: ns(cuda_stream=0))
    return log


@pytest.mark.parametrize("kw,causal", [(dict(), False), (dict(causal=True), True),
                                       (dict(causal=True, causal_align="top_left", q_len=16, kv_len=32), True),
                                       (dict(mode="decode", q_len=1, kv_len=64, causal=True), False),
                                       (dict(layout="BNHD"), False)])
def test_cudnn_fe_fp8_graph_arguments(monkeypatch, kw, causal):
    log = fake_cudnn_fp8(monkeypatch)
    w = w_(**kw)
    inp = make_inputs(w, "cpu", 0)
    prepared = backend("cudnn-fe").prepare(w, inp)
    (graph,) = [c for k, c in log if k == "graph"]
    assert graph["io_data_type"] == "fp8e4m3" and graph["intermediate_data_type"] == "fp32"
    assert graph["compute_data_type"] == "fp32"
    (call,) = [c for k, c in log if k == "sdpa_fp8"]
    assert not [k for k, _ in log if k == "sdpa"]  # not the bf16/fp16 graph
    assert call["is_inference"] is True and call["use_causal_mask"] is causal
    assert "use_causal_mask_bottom_right" not in call  # not passed: unverified for sdpa_fp8
    assert call["attn_scale"] == pytest.approx(w.head_dim ** -0.5)
    scales = {n: call[n].like for n in ("descale_q", "descale_k", "descale_v", "descale_s", "scale_s", "scale_o")}
    for n, t in scales.items():
        assert t.shape == (1, 1, 1, 1) and t.dtype == torch.float32, n
    # the inputs' own per-tensor scales, not 1 (measure/distributions.py)
    assert [scales[n].item() for n in ("descale_q", "descale_k", "descale_v")] == pytest.approx(
        [inp.descale[n].item() for n in "qkv"]) and scales["scale_o"].item() == 1.0
    assert all(inp.descale[n].item() != 1.0 for n in "qkv")
    assert scales["scale_s"].item() == FP8_MAX and scales["descale_s"].item() == pytest.approx(1 / FP8_MAX)
    assert call["q"].like.shape == (w.batch, w.q_heads, w.q_len, w.head_dim) and call["q"].like.dtype == F8
    assert ("set_data_type", ("fp8e4m3",)) in call["q"].calls
    assert prepared.backward is None
    out = prepared.step()
    assert out is inp.out and out.dtype == F8 and not out.float().isnan().any()  # written in place


def test_cudnn_fe_fp8_refuses_bottom_right_in_prepare_too(monkeypatch):
    from attnbench.backends.base import Rejected

    fake_cudnn_fp8(monkeypatch)
    w = w_(causal=True, q_len=16, kv_len=32)
    with pytest.raises(Rejected, match="not mapped for sdpa_fp8"):
        backend("cudnn-fe").prepare(w, make_inputs(w, "cpu", 0))


def _attempt(w: Workload) -> dict:
    spec = {"op": "attempt", "workload": w.to_dict(), "device": "cpu", "seed": 0, "timing": FAST}
    return attempt.run(spec, backend("cudnn-fe"), attempt.WorkloadCache())


@pytest.mark.parametrize("kw", [dict(causal=True), dict(mode="decode", q_len=1, kv_len=96), dict(layout="BNHD")])
def test_a_cudnn_fe_fp8_attempt_is_ok_and_stored_as_provisional(monkeypatch, kw):
    fake_cudnn_fp8(monkeypatch)
    res = _attempt(w_(**kw))
    assert res["status"] == "OK", res["reason"]
    assert res["check_detail"]["contract"].startswith("fp8-emulated")
    assert 0 < res["fp8_ratio"] <= fp8_contract.FACTOR and res["rel_l2"] > 0
    assert res["check_detail"]["fp8"]["scheme"] == "e4m3,tensor,p-e4m3x448,o-e4m3"
    assert res["cosine"] > correctness.MIN_COSINE and min(res["samples_us"]) > 0


def test_a_cudnn_fe_fp8_graph_that_drops_the_mask_is_incorrect(monkeypatch):
    fake_cudnn_fp8(monkeypatch, ignore_mask=True)
    res = _attempt(w_(causal=True))
    assert res["status"] == "INCORRECT" and "the emulated fp8 scheme's" in res["reason"], res["reason"]
    assert res["check_detail"]["contract"].startswith("fp8-emulated")


# ---- show ---------------------------------------------------------------------------------------

def test_show_lists_an_fp8_row_beside_a_bf16_one(cli, tmp_path, monkeypatch):
    from conftest import make_row

    from attnbench.store.db import Store
    from attnbench.workloads.cost import flops

    fake_cudnn_fp8(monkeypatch)
    w = Workload(mode="prefill", batch=1, q_len=64, kv_len=64, q_heads=4, kv_heads=2, head_dim=32, head_dim_v=32,
                 dtype="fp8_e4m3")
    res = _attempt(w)
    assert res["status"] == "OK", res["reason"]
    fp8 = make_row(0, backend="cudnn-fe", family="cudnn-frontend", workload_key=w.key(), **{**w.to_dict(), "causal": 0},
                   attempt_key="k-fp8", flops=float(flops(w)), bytes=float(io_bytes(w)),
                   check_detail=res["check_detail"], err_ratio=res["err_ratio"], cosine=res["cosine"],
                   max_abs_err=res["max_abs_err"], ref_err=res["ref_err"], median_us=12.0)
    db = tmp_path / "s.sqlite"
    s = Store(db)
    s.insert_many([make_row(0, backend="fast"), fp8])
    stored = [r for r in s.con.execute("SELECT dtype, check_detail FROM attempts")]
    s.close()
    assert any(d == "fp8_e4m3" and '"contract": "fp8-emulated' in c for d, c in stored), stored
    out = cli("show", "--db", db)
    assert out.rc == 0, out.err
    text = " ".join(out.out.split())
    assert "fp8_e4m3" in text and "cudnn-fe" in text and "bf16" in text, text
    assert "fp8_e4m3 rows: judged by the fp8 contract" in text and "emulated error" in text
    site = tmp_path / "site"
    rep = cli("report", db, "--out", site)  # the HTML report builds with the fp8 row too
    assert rep.rc == 0, rep.err
    assert "fp8_e4m3" in " ".join(p.read_text() for p in site.rglob("*.html"))
    s = Store(db)  # without an fp8 row the note is not printed
    s.con.execute("DELETE FROM attempts WHERE dtype = 'fp8_e4m3'")
    s.con.commit()
    s.close()
    out = cli("show", "--db", db)
    assert out.rc == 0 and "fp8 contract" not in out.out and "bf16" in out.out


# ---- grids --------------------------------------------------------------------------------------

def test_named_grids_hold_no_fp8_and_the_documented_fp8_grid_loads(tmp_path):
    import pathlib
    import re

    from attnbench.workloads import grids

    for name in ("smoke", "quick", "portability", "fa3_paper"):
        assert all(w.dtype != "fp8_e4m3" for w in getattr(grids, name)()), name
    doc = (pathlib.Path(__file__).parent.parent / "docs" / "grids.md").read_text()
    (block,) = re.findall(r"```yaml\n(name: fp8-forward\n.*?)```", doc, re.S)
    path = tmp_path / "fp8.yaml"
    path.write_text(block)
    name, ws = grids.load_yaml_grid(path)
    assert name == "fp8-forward" and {w.dtype for w in ws} == {"bf16", "fp8_e4m3"}
    be = backend("cudnn-fe")
    assert all(be.supports(w, H100) is None for w in ws)  # the documented grid is one cudnn-fe runs
