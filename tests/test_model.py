"""attnbench model: the decoder against float64 through every CPU backend, step semantics (cache
append, chunked prefill), shares, the Amdahl arithmetic, the model_rows table and the command."""
from __future__ import annotations

import dataclasses
import sqlite3

import pytest
import torch

from attnbench.backends.base import Backend, DeviceInfo, Rejected
from attnbench.backends.registry import builtin
from attnbench.model import amdahl
from attnbench.model.check import check, yardstick
from attnbench.model.configs import CONFIGS, ConfigError, get_config
from attnbench.model.decoder import Decoder, KVCache, noop_attend, twin
from attnbench.model.share import profile_share, model_families, share_by_difference
from attnbench.model.steps import StepSpec, attention_workload, build
from attnbench.store import model_rows
from attnbench.workloads import Workload

BACKENDS = {b.name: b for b in builtin()}
FAST_CPU = ("reference", "sdpa-math", "sdpa-flash")
COMPILING = ("flex", "compile")
DT = {"fp32": torch.float32, "bf16": torch.bfloat16}
PLUGIN = '''
from attnbench.backends.base import Backend

class NoAttend(Backend):
    def prepare(self, w, inputs):
        raise NotImplementedError

BACKENDS = [NoAttend(name="no-attend", family="plugin")]
'''


def _model(dtype="fp32", attend=None, cfg=None, seed=0):
    return Decoder(cfg or get_config("tiny"), DT[dtype], "cpu", seed, attend=attend)


def _x(cfg, b, n, dtype=torch.float32, seed=1):
    return torch.randn(b, n, cfg.hidden, generator=torch.Generator().manual_seed(seed)).to(dtype)


def _agrees_with_float64(name: str, dtype: str, step: str) -> None:
    b = BACKENDS[name]
    spec = StepSpec(step, 1, 40)
    w = attention_workload(get_config("tiny"), spec, dtype)
    if b.supports(w, DeviceInfo("cpu")):
        pytest.skip(f"{name} does not offer {w.mode} on CPU")
    model = _model(dtype)
    ref = BACKENDS["reference"]
    ys = yardstick(model, twin(model, torch.float64, ref.attend), twin(model, model.dtype, ref.attend), spec, 0)
    with b.attend_session():
        model.attend = b.attend
        v = check(model, spec, ys, dtype)
    assert v.passed, v.reason
    assert set(v.detail) == ({"y", "dx"} if step == "train" else {"y"})


@pytest.mark.parametrize("step", ["train", "prefill", "decode"])
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("name", FAST_CPU)
def test_tiny_model_agrees_with_float64(name, dtype, step):
    _agrees_with_float64(name, dtype, step)


@pytest.mark.slow
@pytest.mark.parametrize("step", ["train", "prefill", "decode"])
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("name", COMPILING)
def test_tiny_model_agrees_with_float64_compiled(name, dtype, step):
    _agrees_with_float64(name, dtype, step)


def test_a_wrong_attention_fails_the_check():
    model = _model("fp32")
    ref = BACKENDS["reference"]
    spec = StepSpec("prefill", 1, 32)
    ys = yardstick(model, twin(model, torch.float64, ref.attend), twin(model, model.dtype, ref.attend), spec, 0)
    model.attend = lambda q, k, v, **kw: ref.attend(q, k, v, **{**kw, "causal": False})  # sees the future
    v = check(model, spec, ys, "fp32")
    assert not v.passed and "same-dtype reference model" in v.reason


@pytest.mark.parametrize("name", FAST_CPU)
def test_decode_with_cache_append_equals_the_full_forward(name):
    b = BACKENDS[name]
    cfg = get_config("tiny")
    model, x = _model(), _x(cfg, 2, 24)
    with b.attend_session(), torch.no_grad():
        model.attend = b.attend
        full = model(x)
        cache = KVCache(cfg, 2, 24, torch.float32, "cpu")
        model(x[:, :20], 0, cache)
        steps = [model(x[:, i:i + 1], i, cache) for i in range(20, 24)]  # four appends, one token each
    torch.testing.assert_close(torch.cat(steps, 1), full[:, 20:], atol=2e-5, rtol=1e-4)
    # the cache holds what the full forward's K projections made: position 23 written by the last append
    assert cache.k[0][:, :, 23].abs().sum() > 0


@pytest.mark.parametrize("name", FAST_CPU)
def test_chunked_prefill_equals_one_shot(name):
    b = BACKENDS[name]
    cfg = get_config("tiny")
    model, x = _model(), _x(cfg, 2, 48)
    with b.attend_session(), torch.no_grad():
        model.attend = b.attend
        one = model(x, 0, KVCache(cfg, 2, 48, torch.float32, "cpu"))
        cache = KVCache(cfg, 2, 48, torch.float32, "cpu")
        first = model(x[:, :17], 0, cache)  # chunk two attends bottom-right: 31 queries over 48 keys
        second = model(x[:, 17:], 17, cache)
    torch.testing.assert_close(torch.cat([first, second], 1), one, atol=2e-5, rtol=1e-4)


def test_top_left_alignment_would_break_chunked_prefill():
    """The second chunk is right only with bottom-right alignment: top-left hides cached keys."""
    ref = BACKENDS["reference"]
    cfg = get_config("tiny")
    model, x = _model(), _x(cfg, 1, 32)
    with torch.no_grad():
        model.attend = ref.attend
        one = model(x)
        model.attend = lambda q, k, v, **kw: ref.attend(q, k, v, **{**kw, "causal_align": "top_left"})
        cache = KVCache(cfg, 1, 32, torch.float32, "cpu")
        model(x[:, :16], 0, cache)
        second = model(x[:, 16:], 16, cache)
    assert (second - one[:, 16:]).abs().max() > 1e-3


def test_sliding_window_semantics():
    cfg = dataclasses.replace(get_config("tiny"), sliding_window=8)
    ref, flash, math = BACKENDS["reference"], BACKENDS["sdpa-flash"], BACKENDS["sdpa-math"]
    q, k, v = (torch.randn(1, 4, 20, 32) for _ in range(3))
    k, v = k[:, :2], v[:, :2]
    o = ref.attend(q, k, v, causal=True, window=8)
    # query 15 sees keys 8..15 only: changing key 7 leaves it unchanged, changing key 8 does not
    k2 = k.clone()
    k2[:, :, 7] += 5
    assert torch.equal(ref.attend(q, k2, v, causal=True, window=8)[:, :, 15], o[:, :, 15])
    k2[:, :, 8] += 5
    assert not torch.equal(ref.attend(q, k2, v, causal=True, window=8)[:, :, 15], o[:, :, 15])
    for b in (math, flash):  # SDPA gets the window as a boolean mask; a kernel that refuses it is Rejected
        with b.attend_session():
            try:
                got = b.attend(q, k, v, causal=True, window=8)
            except Rejected as e:
                assert "SDPA refused" in str(e)
                continue
        torch.testing.assert_close(got, o, atol=1e-5, rtol=1e-5)
    # the windowed model through the cache equals its full forward
    model, x = _model(cfg=cfg, attend=ref.attend), _x(cfg, 1, 24)
    with torch.no_grad():
        full = model(x)
        cache = KVCache(cfg, 1, 24, torch.float32, "cpu")
        model(x[:, :23], 0, cache)
        last = model(x[:, 23:], 23, cache)
    torch.testing.assert_close(last, full[:, 23:], atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("name", FAST_CPU)
def test_attend_is_differentiable_and_matches_the_math(name):
    from attnbench.backends.reference import attention_math

    b = BACKENDS[name]
    q = torch.randn(2, 4, 16, 32, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 2, 24, 32, dtype=torch.float64, requires_grad=True)
    v = torch.randn(2, 2, 24, 32, dtype=torch.float64, requires_grad=True)
    with b.attend_session():
        o = b.attend(q, k, v, causal=True, causal_align="bottom_right")
    ref = attention_math(q, k, v, True, "bottom_right", 32 ** -0.5)
    torch.testing.assert_close(o, ref)
    g = torch.autograd.grad(o.sum(), (q, k, v))
    assert all(t is not None and torch.isfinite(t).all() for t in g)


def test_attend_not_offered_by_default():
    plain = Backend(name="plain", family="plugin")
    assert not plain.offers_attend()
    # FlashInfer (plan-based) and the cuDNN frontend (graph-based) run on prepared inputs only
    prepared_only = {"flashinfer-prefill", "flashinfer-decode", "cudnn-fe"}
    assert all(b.offers_attend() for b in BACKENDS.values() if b.name not in prepared_only)
    with pytest.raises(Rejected, match="does not offer attend"):
        plain.attend(*(torch.zeros(1, 1, 1, 8) for _ in range(3)))


def test_configs_hold_public_shapes():
    c = get_config("llama3.1-8b")
    assert (c.hidden, c.layers, c.heads, c.kv_heads, c.head_dim, c.intermediate) == (4096, 32, 32, 8, 128, 14336)
    assert get_config("llama3.1-70b").heads == 64 and get_config("qwen2.5-7b").qkv_bias
    assert get_config("mistral-7b").sliding_window == 4096
    assert get_config("llama3.1-8b", 4).layers == 4
    assert 1e5 < get_config("tiny").params_per_layer() * get_config("tiny").layers * 4 < 8e6  # a few MB
    for name in CONFIGS:
        assert get_config(name).heads * get_config(name).head_dim >= get_config(name).hidden - 1
    with pytest.raises(ConfigError, match="--layers must be 1..2"):
        get_config("tiny", 3)
    with pytest.raises(ConfigError, match="unknown model config"):
        get_config("gpt-5")


def test_attention_workloads_of_the_steps():
    cfg = get_config("llama3.1-8b", 2)
    assert attention_workload(cfg, StepSpec("train", 4, 4096), "bf16") == Workload(
        "train_fwd_bwd", 4, 4096, 4096, 32, 8, 128, 128, "bf16", causal=True)
    d = attention_workload(cfg, StepSpec("decode", 32, 8192, "graph"), "bf16")
    assert (d.mode, d.q_len, d.kv_len, d.causal, d.launch) == ("decode", 1, 8192, False, "graph")


def test_shares_on_cpu():
    model = _model()
    spec = StepSpec("prefill", 2, 64)
    from attnbench.measure.dispatch import Classifier

    cls = Classifier.from_backends(BACKENDS.values())
    model.attend = noop_attend
    own = model_families(build(model, spec, 0).call, "cpu", cls)
    assert "pytorch-flash-cpu" not in own
    flash = BACKENDS["sdpa-flash"]
    with flash.attend_session():
        model.attend = flash.attend
        ps = profile_share(build(model, spec, 0).call, "cpu", flash, cls, own)
    assert ps.attributed == ["pytorch-flash-cpu"] and 0 < ps.family_share < 1 and ps.mismatch is None
    ref = BACKENDS["reference"]
    model.attend = ref.attend
    ps = profile_share(build(model, spec, 0).call, "cpu", ref, cls, own)
    assert ps.family_share is None and "model's own" in ps.note


def test_share_by_difference_sign_and_limits():
    assert share_by_difference(100.0, 60.0) == pytest.approx(0.4)
    assert share_by_difference(100.0, 0.0) == 1.0
    assert share_by_difference(100.0, 103.0) == pytest.approx(-0.03)  # noise: kept as measured
    with pytest.raises(ValueError):
        share_by_difference(0.0, 1.0)
    assert amdahl.choose_share(None, -0.03) == (0.0, "difference")
    assert amdahl.choose_share(0.3, 0.5) == (0.3, "profiler")
    assert amdahl.choose_share(None, None) == (None, None)


def test_amdahl_arithmetic():
    assert amdahl.amdahl(0.0, 7.0) == 1.0
    assert amdahl.amdahl(1.0, 7.0) == pytest.approx(7.0)
    assert amdahl.amdahl(0.5, 2.0) == pytest.approx(4 / 3)
    assert amdahl.amdahl(0.25, 0.5) == pytest.approx(0.8)  # a slower kernel predicts a slowdown
    assert amdahl.amdahl(0.9, 1e12) == pytest.approx(10.0)  # the limit 1 / (1 - f)
    for f, s in ((-0.1, 2.0), (1.1, 2.0), (0.5, 0.0)):
        with pytest.raises(ValueError):
            amdahl.amdahl(f, s)


def test_compare_and_kernel_lookup():
    import pandas as pd

    w = Workload("prefill", 1, 8192, 8192, 32, 8, 128, 128, "bf16", causal=True)
    rows = []
    for backend, us, status, dev in (("sdpa-flash", 100.0, "OK", "H200"), ("sdpa-flash", 110.0, "OK", "H200"),
                                     ("cudnn", 50.0, "OK", "H200"), ("cudnn", 1.0, "INCORRECT", "H200"),
                                     ("cudnn", 1.0, "OK", "H100")):
        rows.append({**w.to_dict(), "backend": backend, "median_us": us, "status": status, "device_name": dev})
    rows.append({**dataclasses.replace(w, batch=4).to_dict(), "backend": "cudnn", "median_us": 1.0, "status": "OK",
                 "device_name": "H200"})
    k = amdahl.kernel_medians(pd.DataFrame(rows), w, "H200")
    assert k == {"sdpa-flash": 105.0, "cudnn": 50.0}
    base = {"backend": "sdpa-flash", "median_us": 1000.0, "share_profiler": 0.5, "share_diff": 0.55,
            "attn_kernel_us": 500.0, "noop_us": 450.0}
    row = {"backend": "cudnn", "median_us": 800.0, "attn_kernel_us": 300.0, "noop_us": 450.0}
    c = amdahl.compare(row, base, k, calls=4)
    assert c["kernel_speedup"] == pytest.approx(2.1)
    assert c["predicted_speedup"] == pytest.approx(1 / (0.5 + 0.5 / 2.1))
    assert c["measured_speedup"] == pytest.approx(1.25)
    assert c["gap"] == pytest.approx(1.25 / c["predicted_speedup"] - 1)
    ex = c["explain"]
    assert ex["in_step_kernel_speedup"] == pytest.approx(500 / 300)
    assert ex["baseline_in_step_over_isolated"] == pytest.approx(500 / (105 * 4))
    assert ex["beyond_kernels_share"] == pytest.approx(0.05)
    assert "inside the step the kernel sped up 1.67x" in ex["why"]
    assert amdahl.compare(row, base, {}, 4)["explain"]["why"].startswith("no prediction")


def _row(i=0, **over):
    return {"row_key": f"k{i}", "run_id": "r", "backend": "sdpa-flash", "config": "tiny", "step": "prefill",
            "status": "OK", "samples_us": [3.0, 1.0, 2.0], "device_name": "CPU", "created_at": "2026-01-01T00:00:00Z",
            "explain": {"why": "x"}, "families": ["unfused-gemm"], "converged": True, **over}


def test_model_rows_round_trip(tmp_path):
    from attnbench.store.db import Store

    store = Store(tmp_path / "s.sqlite")
    ok = model_rows.finish(_row())
    assert ok["median_us"] == 2.0 and ok["p95_us"] == pytest.approx(2.9)
    model_rows.ensure(store.con)
    assert model_rows.insert(store.con, ok)
    assert not model_rows.insert(store.con, ok)  # one row per key
    bad = model_rows.finish(_row(1, status="UNSUPPORTED", reason="no attend", share_diff=0.3))
    assert bad["samples_us"] is None and bad["share_diff"] is None and bad["explain"] is None
    model_rows.insert(store.con, bad)
    store.close()
    store = Store(tmp_path / "s.sqlite", readonly=True)  # the store still opens, attempts untouched
    got = model_rows.rows(store.con)
    assert [r["row_key"] for r in got] == ["k0", "k1"] and store.count() == 0
    assert got[0]["explain"] == {"why": "x"} and got[0]["families"] == ["unfused-gemm"] and got[0]["converged"] == 1
    assert got[1]["reason"] == "no attend"
    store.close()
    with pytest.raises(model_rows.ModelRowError, match="lacks reason"):
        model_rows.finish(_row(status="ERROR"))
    with pytest.raises(model_rows.ModelRowError, match="lacks samples_us"):
        model_rows.finish(_row(samples_us=None))
    with pytest.raises(model_rows.ModelRowError, match="no model_rows column"):
        model_rows.finish(_row(bogus=1))
    with pytest.raises(model_rows.ModelRowError, match="unknown status"):
        model_rows.finish(_row(status="FINE"))


def _stored(db):
    con = sqlite3.connect(str(db))
    con.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in con.execute("SELECT * FROM model_rows ORDER BY rowid")]
    finally:
        con.close()


@pytest.fixture
def mcli(cli, monkeypatch):
    from rich.console import Console

    from attnbench.cli import console

    monkeypatch.setattr(console, "out", Console(width=80))
    monkeypatch.setattr(console, "err", Console(stderr=True, width=80))
    return cli


FAST = ["--device", "cpu", "--max-time", "0.02"]


@pytest.mark.slow
def test_command_runs_stores_and_resumes(mcli, tmp_path):
    db = tmp_path / "m.sqlite"
    res = mcli("model", "--db", db, "--steps", "prefill,decode", "--backends", "sdpa-flash,reference", *FAST)
    assert res.rc == 0, res.err
    rows = _stored(db)
    assert [(r["step"], r["backend"], r["status"]) for r in rows] == [
        ("prefill", "sdpa-flash", "OK"), ("prefill", "reference", "OK"),
        ("decode", "sdpa-flash", "OK"), ("decode", "reference", "OK")]
    flash = rows[0]
    assert flash["measured_speedup"] == 1.0 and flash["baseline"] == "sdpa-flash" and flash["share_profiler"] > 0
    assert flash["torch_version"] == torch.__version__ and flash["err_ratio"] <= 3 and flash["cold_start_us"] > 0
    assert rows[1]["share_profiler"] is None and rows[1]["share_diff"] is not None
    assert "prefill B2 N64" in res.out and "meas" in res.out
    assert max(len(line) for line in res.out.splitlines()) <= 80
    runs = sqlite3.connect(str(db)).execute("SELECT grid, finished_at FROM runs").fetchall()
    assert runs[0][0] == "model:tiny" and runs[0][1]
    res = mcli("model", "--db", db, "--steps", "prefill,decode", "--backends", "sdpa-flash,reference", *FAST)
    assert res.rc == 0 and len(_stored(db)) == 4  # resumed: nothing measured twice


@pytest.mark.slow
def test_prediction_from_a_kernel_store(mcli, tmp_path):
    """Kernel rows of the step's attention shape on this device give s, the prediction and the gap."""
    from attnbench.store.db import Store

    from conftest import make_row

    db, kdb = tmp_path / "m.sqlite", tmp_path / "k.sqlite"
    mcli("model", "--db", db, "--steps", "prefill", "--backends", "sdpa-flash,reference", *FAST)
    dev = _stored(db)[0]["device_name"]
    w = attention_workload(get_config("tiny"), StepSpec("prefill", 2, 64), "fp32")
    ks = Store(kdb)
    for i, (backend, us) in enumerate((("sdpa-flash", 10.0), ("reference", 20.0))):
        ks.insert_many([make_row(i, **{**w.to_dict(), "causal": 1}, backend=backend, device_name=dev,
                                 samples_us=[us] * 12, median_us=us, attempt_key=f"a{i}", workload_key=w.key())])
    ks.close()
    res = mcli("model", "--db", db, "--kernel-db", kdb, "--steps", "prefill", "--backends", "sdpa-flash,reference",
               "--tag", "two", *FAST)
    assert res.rc == 0, res.err
    ref = [r for r in _stored(db) if r["tag"] == "two" and r["backend"] == "reference"][0]
    assert ref["kernel_speedup"] == pytest.approx(0.5) and ref["f_source"] in ("profiler", "difference")
    assert ref["predicted_speedup"] == pytest.approx(amdahl.amdahl(ref["f_used"], 0.5))
    assert ref["gap"] == pytest.approx(ref["measured_speedup"] / ref["predicted_speedup"] - 1)


@pytest.mark.slow
def test_plugin_without_attend_is_unsupported(mcli, tmp_path):
    plugin = tmp_path / "noattend.py"
    plugin.write_text(PLUGIN)
    db = tmp_path / "m.sqlite"
    res = mcli("model", "--db", db, "--plugin", plugin, "--backends", "no-attend", "--steps", "prefill", *FAST)
    assert res.rc == 0, res.err
    rows = {r["backend"]: r for r in _stored(db)}
    assert rows["no-attend"]["status"] == "UNSUPPORTED"
    assert "does not offer attend()" in rows["no-attend"]["reason"]
    assert rows["sdpa-flash"]["status"] == "OK"  # the baseline always runs


BROKEN = '''
import os
import time

from attnbench.backends.reference import Reference

class Hangs(Reference):
    def attend(self, q, k, v, **kw):
        while True:
            time.sleep(1)

class KillsItsWorker(Reference):
    def attend(self, q, k, v, **kw):
        os._exit(3)

BACKENDS = [Hangs(name="model-hang", family="plugin"), KillsItsWorker(name="model-crash", family="plugin")]
'''


def test_a_hang_is_timeout_a_dead_worker_crash_and_the_run_goes_on_and_resumes(mcli, tmp_path):
    """Model steps run in workers: a step that hangs is killed at --timeout (TIMEOUT), one that kills its
    worker is CRASH; the backends after them still get their rows, compared against the baseline's; a
    second run measures nothing again."""
    plugin = tmp_path / "broken.py"
    plugin.write_text(BROKEN)
    db = tmp_path / "m.sqlite"
    # the timeout covers every step, the baseline's first one too (the decoder, the float64 yardstick and the
    # no-op step are made then): 30 s leaves room for a loaded host, where 10 s cut that step short
    argv = ("model", "--db", db, "--plugin", plugin, "--steps", "prefill", "--timeout", "30",
            "--backends", "sdpa-flash,model-hang,model-crash,reference", *FAST)
    res = mcli(*argv)
    assert res.rc == 0, res.err
    rows = _stored(db)
    assert [(r["backend"], r["status"]) for r in rows] == [
        ("sdpa-flash", "OK"), ("model-hang", "TIMEOUT"), ("model-crash", "CRASH"), ("reference", "OK")]
    assert "30" in rows[1]["reason"] and rows[1]["samples_us"] is None and rows[2]["reason"]
    assert rows[3]["baseline"] == "sdpa-flash" and rows[3]["measured_speedup"] > 0
    assert "TIMEOUT" in res.out and "CRASH" in res.out
    res = mcli(*argv)
    assert res.rc == 0, res.err
    assert _stored(db) == rows  # resumed: no row measured twice, none replaced
    runs = sqlite3.connect(str(db)).execute("SELECT run_id FROM runs").fetchall()
    assert len(runs) == 2 and {r["run_id"] for r in rows} == {runs[0][0]}


@pytest.mark.slow
def test_unsupported_combinations_are_rows(mcli, tmp_path):
    db = tmp_path / "m.sqlite"
    res = mcli("model", "--db", db, "--steps", "decode", "--launch", "graph", "--backends", "sdpa-flash", *FAST)
    assert res.rc == 0
    (row,) = _stored(db)
    assert row["status"] == "UNSUPPORTED" and "CUDA" in row["reason"] and row["samples_us"] is None


def test_kernel_grid_is_a_grid_attnbench_run_reads(mcli, tmp_path):
    from attnbench.workloads.grids import load_yaml_grid

    path = tmp_path / "k.yaml"
    res = mcli("model", "--config", "llama3.1-8b", "--layers", "2", "--steps", "prefill,decode", "--seqlen",
               "8k,32k", "--batch", "1", "--launch", "eager,graph", "--kernel-grid", path, "--device", "cpu")
    assert res.rc == 0, res.err
    _, ws = load_yaml_grid(str(path))
    cfg = get_config("llama3.1-8b", 2)
    want = [attention_workload(cfg, StepSpec(s, 1, n, launch), "fp32") for s in ("prefill", "decode")
            for n in (8192, 32768) for launch in (("eager", "graph") if s == "decode" else ("eager",))]
    assert ws == want
    assert not (tmp_path / "attnbench.sqlite").exists()


BAD = [
    (["--config", "gpt-5"], "unknown model config"),
    (["--layers", "0"], "--layers must be 1..2"),
    (["--layers", "3"], "--layers must be 1..2"),
    (["--steps", "train,infer"], "unknown step 'infer'"),
    (["--backends", "nope"], "unknown backend 'nope'"),
    (["--baseline", "nope"], "unknown backend 'nope'"),
    (["--seqlen", "3x"], "bad length"),
    (["--seqlen", "0"], "--seqlen values must be positive"),
    (["--batch", "0"], "--batch values must be positive"),
    (["--steps", "decode", "--seqlen", "1"], "at least 2 positions"),
    (["--launch", "fast"], "unknown launch 'fast'"),
    (["--dtype", "fp64"], "invalid choice"),
    (["--tol", "-1"], "--tol must be positive"),
    (["--max-time", "0"], "--max-time must be positive"),
    (["--timeout", "0"], "--timeout must be positive"),
    (["--tag", " "], "--tag is empty"),
    (["--device", "tpu"], "bad --device"),
    (["--kernel-db", "{d}/absent.sqlite"], "store not found"),
    (["--kernel-db", "{d}/not_a_store.txt"], "not a usable attnbench store"),
    (["--db", "{d}/no/such/dir/m.sqlite"], "directory of --db does not exist"),
    (["--db", "{d}"], "store path is a directory"),
    (["--plugin", "{d}/absent.py"], "plugin file not found"),
    (["--kernel-grid", "{d}/no/dir/k.yaml"], "--kernel-grid"),
    (["--compile-cache", "{d}/not_a_store.txt"], "--compile-cache"),
]


@pytest.mark.parametrize("args,text", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_exits_2_and_writes_nothing(mcli, tmp_path, args, text):
    d = tmp_path
    (d / "not_a_store.txt").write_text("hello")
    before = sorted(p.name for p in d.rglob("*"))
    argv = ["model", "--db", str(d / "m.sqlite")] + [a.format(d=d) for a in args]
    res = mcli(*(argv + ([] if "--device" in args else ["--device", "cpu"])))
    assert res.rc == 2, (res.out, res.err)
    assert text in res.err and len(res.err.strip().splitlines()) == 1, res.err
    assert sorted(p.name for p in d.rglob("*")) == before


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message of a CPU-only host")
def test_cuda_requested_on_a_cpu_only_host(mcli, tmp_path):
    res = mcli("model", "--db", tmp_path / "m.sqlite", "--device", "cuda")
    assert res.rc == 2 and "no CUDA device is visible" in res.err and not (tmp_path / "m.sqlite").exists()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("name", ["sdpa-flash", "sdpa-cudnn", "sdpa-efficient", "flex", "sdpa-math"])
@pytest.mark.parametrize("step", ["train", "prefill", "decode"])
def test_gpu_backends_agree_with_float64(name, step):
    b = BACKENDS[name]
    model = Decoder(get_config("tiny"), torch.bfloat16, "cuda", 0)
    spec = StepSpec(step, 1, 64)
    ref = BACKENDS["reference"]
    ys = yardstick(model, twin(model, torch.float64, ref.attend), twin(model, model.dtype, ref.attend), spec, 0)
    with b.attend_session():
        model.attend = b.attend
        try:
            v = check(model, spec, ys, "bf16")
        except Rejected as e:  # e.g. sdpa-efficient refuses GQA: a model run stores it as UNSUPPORTED
            pytest.skip(str(e))
    assert v.passed, v.reason


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("name", ["sdpa-flash", "flex"])
def test_gpu_graph_decode_equals_eager(name):
    from attnbench.measure.timing import capture_graph

    b = BACKENDS[name]
    model = Decoder(get_config("tiny"), torch.bfloat16, "cuda", 0)
    with b.attend_session():
        model.attend = b.attend
        st = build(model, StepSpec("decode", 4, 256, "graph"), 0)
        eager = st.call().clone()
        graph = capture_graph(st.call, 1, "cuda")
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(graph.last_output, eager)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_gpu_command_with_graph_decode(mcli, tmp_path):
    db = tmp_path / "m.sqlite"
    res = mcli("model", "--db", db, "--device", "cuda", "--steps", "decode,prefill", "--max-time", "0.05",
               "--backends", "sdpa-flash,sdpa-cudnn")
    assert res.rc == 0, res.err
    rows = _stored(db)
    assert {r["status"] for r in rows} == {"OK"}, [(r["backend"], r["reason"]) for r in rows]
    graph = [r for r in rows if r["launch"] == "graph"]
    assert graph and all(r["timer"] == "cuda_graph" and r["attn_kernel_us"] > 0 for r in graph)


def test_a_model_step_that_runs_out_of_memory_is_oom_and_says_where():
    """The model's steps classify failures as attempts do (status.failure): a library's
    out-of-memory words on any line of the error make the row OOM, and the reason quotes that line."""
    from attnbench.status import failure

    def _failure(e, device):
        status, reason = failure(e, device)
        return {"status": status.value, "reason": reason}

    deep = RuntimeError("NOT_FOUND: All configs failed during profiling\n"
                        "  config 0: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 64 bytes.")
    res = _failure(deep, "cpu")
    assert res == {"status": "OOM", "reason": "RuntimeError: NOT_FOUND: All configs failed during profiling "
                                              "(config 0: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 64 bytes.)"}
    assert _failure(ValueError("a bug\nmore"), "cpu") == {"status": "ERROR", "reason": "ValueError: a bug"}
