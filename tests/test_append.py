"""The decode append inside the timed step (Workload.decode_append, workloads/append.py): the axis (keys of
existing workloads unchanged, validation, YAML, --where, import, cost), the inputs (a new token that the
cache's slot kv_len - 1 does not hold yet), the float64 reference computed with the new token in the slot,
the exact cache check (a kernel that skips the append, writes the wrong slot or writes other entries too
is INCORRECT even when its output is right), the shared inputs left clean for the next backend, each
backend's mapping or refusal (FlashAttention-2/3 through the fake flash_attn_with_kvcache of
tests/test_new_backends.py), the store's schema 8, and a run through the CLI."""
from __future__ import annotations

import functools
import hashlib
import sqlite3
import sys

import pytest
import torch

from attnbench.backends import registry
from attnbench.backends.base import ANY, Backend
from attnbench.backends.layout import appended, cache_slot, dense_kv, new_token, to_bhnd, write_slot
from attnbench.backends.reference import attention_math
from attnbench.measure import correctness
from attnbench.measure.inputs import fingerprint, make_inputs, refill
from attnbench.runner import attempt
from attnbench.workloads import Workload, WorkloadError, cost
from attnbench.workloads.axes import parse_filters, select, varying
from attnbench.workloads.grids import GRIDS, load_yaml_grid
from attnbench.workloads.paged import num_pages

from test_new_backends import A100, CPU, FAST, H100, backend, fake_flash, run


def d_(**kw) -> Workload:
    base = dict(mode="decode", batch=2, q_len=1, kv_len=40, q_heads=4, kv_heads=2, head_dim=16, head_dim_v=16,
                dtype="fp32", decode_append="included")
    return Workload(**{**base, **kw})


def spec(w: Workload, **over) -> dict:
    return {"op": "attempt", "workload": w.to_dict(), "device": "cpu", "seed": 0, "timing": FAST, **over}


# ---- the axis -----------------------------------------------------------------------------------

def test_keys_of_existing_workloads_are_unchanged():
    """The keys attnbench had before the axis (computed on the commit before it): every workload of the
    named grids, and a few literal ones, keep theirs, so older stores resume."""
    def digest(ws):
        return hashlib.sha1(" ".join(sorted(w.key() for w in ws)).encode()).hexdigest()[:16]

    before = {"smoke": "9b2974bc05fb13b7", "quick": "7aa8ce9fbda03e25", "portability": "cd332e7fe01f5c8b",
              "fa3-paper": "a07bd66092ad72cc"}
    for name, want in before.items():
        assert digest(GRIDS[name]()) == want, name
    # features gained its appending workloads; the 22 it had keep their keys
    assert digest([w for w in GRIDS["features"]() if w.decode_append != "included"]) == "01df08260319b5ce"
    assert d_(decode_append="excluded").key() == "a4d008200892dd24"
    assert d_(decode_append="excluded", page_size=16).key() == "4d9a61a18c9ecf1d"
    prefill = Workload(mode="prefill", batch=1, q_len=32, kv_len=32, q_heads=2, kv_heads=1, head_dim=16,
                       head_dim_v=16, dtype="fp32")
    assert prefill.key() == "435b988f2c32e86a" and prefill.decode_append is None
    assert len({d_().key(), d_(decode_append="excluded").key(), d_(page_size=16).key()}) == 3


def test_the_axis_is_for_decode_only():
    w = dict(batch=1, q_len=8, kv_len=8, q_heads=2, kv_heads=1, head_dim=8, head_dim_v=8)
    for mode in ("prefill", "train_fwd", "train_fwd_bwd"):
        with pytest.raises(WorkloadError, match="decode_append 'included' is defined for decode only"):
            Workload(mode=mode, decode_append="included", **w)
        # the default, written or not, is the same workload: None, as its stored row says (NULL)
        assert Workload(mode=mode, decode_append="excluded", **w) == Workload(mode=mode, **w)
        assert Workload(mode=mode, **w).decode_append is None
    with pytest.raises(WorkloadError, match="not in"):
        d_(decode_append="sometimes")
    assert d_(decode_append=None).decode_append == "excluded"  # a decode row read back
    assert "append" in d_().label() and "append" not in d_(decode_append="excluded").label()


def test_yaml_where_and_show_columns_take_the_axis(tmp_path):
    p = tmp_path / "g.yaml"
    p.write_text("name: a\nworkloads:\n  - {mode: decode, batch: 2, q_heads: 8, kv_heads: 2, head_dim: 64,\n"
                 "     kv_len: 1k, decode_append: [excluded, included], page_size: [0, 256]}\n"
                 "  - {mode: prefill, batch: 1, q_heads: 8, head_dim: 64, seqlen: 1k}\n")
    _, ws = load_yaml_grid(p)
    assert sorted((w.mode, w.decode_append, w.page_size) for w in ws if w.mode == "decode") == [
        ("decode", "excluded", 0), ("decode", "excluded", 256), ("decode", "included", 0), ("decode", "included", 256)]
    assert len(select(ws, parse_filters(["decode_append=included"]))) == 2
    assert len(select(ws, parse_filters(["decode_append=excluded"]))) == 2  # prefill has none (NULL)
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: b\nworkloads:\n  - {mode: prefill, batch: 1, q_heads: 2, head_dim: 8, seqlen: 8,\n"
                   "     decode_append: included}\n")
    with pytest.raises(Exception, match="defined for decode only"):
        load_yaml_grid(bad)
    # a store of prefill rows (NULL) and decode rows that all exclude the append: nothing varies
    assert varying([{"decode_append": None}, {"decode_append": "excluded"}], ["decode_append"]) == []
    assert varying([{"decode_append": None}, {"decode_append": "included"}, {"decode_append": "excluded"}],
                   ["decode_append"]) == ["decode_append"]


def test_cost_adds_the_written_token():
    w, plain = d_(), d_(decode_append="excluded")
    assert cost.forward_flops(w) == cost.forward_flops(plain)
    # B 2 · Hkv 2 · (D 16 + Dv 16) · 4 bytes written into the cache
    assert cost.append_bytes(w) == 512 and cost.append_bytes(plain) == 0
    assert cost.io_bytes(w) == cost.io_bytes(plain) + 512
    assert cost.input_bytes(w) == cost.input_bytes(plain) + 512  # the new-token inputs
    assert cost.io_bytes(d_(page_size=16)) == cost.io_bytes(d_(decode_append="excluded", page_size=16)) + 512


def test_table_import_reads_the_axis():
    from attnbench.store.table_import import attempt_row

    r = attempt_row({"device": "X", "backend": "b", "mode": "decode", "batch": "2", "q_heads": "4", "head_dim": "16",
                     "dtype": "bf16", "seqlen": "40", "decode_append": "included", "median_us": "5"}, "run", "now")
    assert r["decode_append"] == "included" and r["workload_key"] == d_(dtype="bf16", kv_heads=4).key()


# ---- inputs and the reference -------------------------------------------------------------------

@pytest.mark.parametrize("kw", [dict(), dict(layout="BNHD"), dict(page_size=16)])
def test_the_new_token_is_not_in_the_cache_yet_and_refill_restores_it(kw):
    w = d_(**kw)
    inp = make_inputs(w, "cpu", 0)
    want = (w.batch, w.kv_heads, 1, w.head_dim) if w.layout == "BHND" else (w.batch, 1, w.kv_heads, w.head_dim)
    assert tuple(inp.k_new.shape) == want and tuple(inp.v_new.shape[:-1]) == want[:-1]
    for t, new in ((inp.k, inp.k_new), (inp.v, inp.v_new)):
        old = cache_slot(w, inp, t)
        assert tuple(old.shape) == (w.batch, w.kv_heads, w.head_dim)
        assert not (old == new_token(w, new)).all(dim=-1).any()  # no (sequence, head) holds it already
    clean = fingerprint(inp)
    assert {"k_new", "v_new"} <= set(clean)
    write_slot(w, inp, inp.k, new_token(w, inp.k_new))
    assert fingerprint(inp)["k"] != clean["k"]
    refill(inp, w, 0)
    assert fingerprint(inp) == clean  # the slot's own values again
    assert make_inputs(d_(decode_append="excluded"), "cpu", 0).k_new is None


@pytest.mark.parametrize("kw", [dict(), dict(layout="BNHD"), dict(page_size=16)])
def test_the_reference_attends_the_new_token_and_leaves_the_inputs(kw):
    w = d_(**kw)
    inp = make_inputs(w, "cpu", 0)
    clean = fingerprint(inp)
    ref = correctness.Reference64(w, inp, 0)
    assert fingerprint(inp) == clean  # the slot put back
    with appended(w, inp):
        k, v = (to_bhnd(t, w.layout).double() for t in dense_kv(w, inp))
        assert torch.equal(k[:, :, w.kv_len - 1].float(), new_token(w, inp.k_new))
    q = to_bhnd(inp.q, w.layout).double()
    want = attention_math(q, k, v, False, "bottom_right", inp.scale)
    assert torch.allclose(ref.rows64[0], want, atol=1e-12)
    stale = attention_math(q, *(to_bhnd(t, w.layout).double() for t in dense_kv(w, inp)), False, "bottom_right",
                           inp.scale)
    assert not torch.allclose(ref.rows64[0], stale, atol=1e-6)  # the slot's old values would be another answer


# ---- the cache check ----------------------------------------------------------------------------

class _Fault(Backend):
    """Attends the right cache (a snapshot taken in prepare with the new token in its slot), so its
    output passes the first check, and writes the cache as `fault` says: "" the append done right,
    "skip" nothing, "wrong-slot" the new token into slot kv_len - 2, "scribble" the append and one more
    entry, "late" the append after attending the cache as it was (the output then misses the token)."""

    fault: str = ""

    def prepare(self, w, inputs):
        with appended(w, inputs):
            k0, v0 = (to_bhnd(t, w.layout).clone() for t in (inputs.k, inputs.v))

        def write(at):
            for t, new in ((inputs.k, inputs.k_new), (inputs.v, inputs.v_new)):
                to_bhnd(t, w.layout)[:, :, at].copy_(new_token(w, new))

        def step():
            if self.fault == "late":
                o = attention_math(to_bhnd(inputs.q, w.layout), to_bhnd(inputs.k, w.layout),
                                   to_bhnd(inputs.v, w.layout), False, "bottom_right", inputs.scale)
                write(w.kv_len - 1)
                return o
            if self.fault != "skip":
                write(w.kv_len - 2 if self.fault == "wrong-slot" else w.kv_len - 1)
            if self.fault == "scribble":
                to_bhnd(inputs.v, w.layout)[:, :, 3].mul_(2)
            return attention_math(to_bhnd(inputs.q, w.layout), k0, v0, False, "bottom_right", inputs.scale)

        return step


def fault(kind: str) -> _Fault:
    b = _Fault(name=f"fault-{kind or 'none'}", family="plugin", accepts={"decode_append": ANY})
    b.fault = kind
    return b


@pytest.mark.parametrize("kind,text", [
    ("skip", "the KV cache after the first call: the append was skipped: k is unchanged, slot 39"),
    ("wrong-slot", "slot 39 (kv_len - 1) does not hold the new token's values bit for bit (written into the wrong"),
    ("scribble", "v holds the new token in slot 39, but other entries of the cache were written too"),
])
def test_a_cache_that_is_not_exactly_the_append_is_incorrect(kind, text):
    res = attempt.run(spec(d_()), fault(kind), attempt.WorkloadCache())
    assert res["status"] == "INCORRECT" and text in res["reason"], res["reason"]
    assert res["err_ratio"] is not None and res["err_ratio"] <= 16  # its output was right: the cache told
    assert "samples_us" not in res


def test_an_append_after_attending_fails_the_output_check():
    res = attempt.run(spec(d_()), fault("late"), attempt.WorkloadCache())
    assert res["status"] == "INCORRECT" and res["reason"].startswith("o: error"), res["reason"]


def test_a_snapshot_that_ignores_new_values_fails_after_timing():
    """The correct append on a snapshot's output: right on the drawn values, wrong on new ones (the hard
    inputs say so before timing)."""
    res = attempt.run(spec(d_()), fault(""), attempt.WorkloadCache())
    assert res["status"] == "INCORRECT" and "on outliers inputs" in res["reason"], res["reason"]


def test_the_append_is_checked_again_after_timing(monkeypatch):
    """A backend that appends on its first calls and stops later (a graph that replays nothing, a
    cached path): the cache after timing lacks the new token."""
    from attnbench.measure import timing

    real = timing.measure

    def measure(step, *a, **kw):
        t = real(step, *a, **kw)
        refill(cache.inputs, w, 0)  # the slot back to its old values, as if no timed call had appended
        return t

    w, cache = d_(), attempt.WorkloadCache()
    monkeypatch.setattr(timing, "measure", measure)
    res = attempt.run(spec(w), backend("reference"), cache)
    assert res["status"] == "INCORRECT" and "after timing: the append was skipped" in res["reason"], res["reason"]


SHAPES = [dict(), dict(layout="BNHD", kv_heads=4), dict(causal=True, window=8)]


# every shape for the eager backends, one for the compiled ones (each shape is a compile). flex's is 48
# long: on an AVX2-only CPU torch 2.13.0's compiled flex_attention returns wrong values (NaN) at a KV
# length of 40, with or without the append, and right ones at the other lengths tried from 16 to 130
# (attnbench rightly calls it INCORRECT)
@pytest.mark.parametrize("name,kw", [(n, kw) for n in ("reference", "sdpa-math", "sdpa-flash") for kw in SHAPES]
                         + [("flex", dict(kv_len=48)), ("compile", SHAPES[0])])
def test_torch_backends_append_and_are_ok(name, kw):
    w = d_(**kw)
    assert backend(name).supports(w, CPU) is None
    res = run(name, w)
    assert res["status"] == "OK", res.get("reason")


def test_the_reference_appends_through_the_page_table():
    w = d_(page_size=16)
    assert backend("reference").supports(w, CPU) is None
    assert run("reference", w)["status"] == "OK"


def test_the_shared_inputs_stay_clean_for_the_next_backend():
    """An OK attempt leaves the cache as drawn (its recheck refills it): the next backend gets the same
    tensors without a redraw, and a backend that skips the append after a correct one is still caught."""
    w, cache = d_(), attempt.WorkloadCache()
    assert attempt.run(spec(w), backend("sdpa-math"), cache)["status"] == "OK"
    inputs, clean = cache.inputs, cache.clean
    assert fingerprint(inputs) == clean and cache.after["k"] != clean["k"]
    assert attempt.run(spec(w), backend("reference"), cache)["status"] == "OK"
    assert cache.inputs is inputs  # not redrawn
    res = attempt.run(spec(w), fault("skip"), cache)
    assert res["status"] == "INCORRECT" and "append was skipped" in res["reason"]
    # what worker_main does after a failed attempt; a cache left appended would be redrawn anyway
    write_slot(w, cache.inputs, cache.inputs.k, new_token(w, cache.inputs.k_new))
    cache.get(w, "cpu", 0)
    assert fingerprint(cache.inputs) == cache.clean


# ---- refusals -----------------------------------------------------------------------------------

def test_backends_without_an_append_path_refuse_with_a_reason():
    w16 = d_(dtype="bf16", head_dim=64, head_dim_v=64)
    able = {"reference", "sdpa-math", "sdpa-flash", "sdpa-efficient", "sdpa-cudnn", "flex", "compile", "fa2", "fa3"}
    for b in registry.builtin():
        dev = H100 if "cuda" in b.devices and "cpu" not in b.devices else CPU
        why = b.supports(w16, dev)
        if b.name in able:
            assert why is None, (b.name, why)
        elif "decode" in b.modes and w16.dtype in b.dtypes and dev.type in b.devices:
            assert why is not None and why.startswith("decode_append included:"), (b.name, why)
    assert "no cache-append entry point" in backend("fa4").supports(w16, H100)
    assert "append_paged_kv_cache" in backend("flashinfer-decode").supports(w16, A100)
    assert backend("flashinfer-decode").supports(d_(dtype="bf16", head_dim=64, head_dim_v=64,
                                                    decode_append="excluded"), A100) is None


def test_a_plugin_declares_the_append_or_is_refused():
    plain = Backend(name="p", family="plugin")
    assert plain.supports(d_(), CPU) == "decode_append included: no path that appends K/V to the cache in the step"
    assert plain.supports(d_(decode_append="excluded"), CPU) is None


# ---- FlashAttention-2/3: flash_attn_with_kvcache(k=, v=, cache_seqlens=kv_len - 1) ----------------

FA = [("fa2", "flash_attn", 256, 600), ("fa3", "flash_attn_interface", 16, 40)]


@pytest.mark.parametrize("name,module,page,kv_len", FA)
@pytest.mark.parametrize("kw", [dict(), dict(layout="BNHD"), dict(causal=True, window=8), dict(paged=True)])
def test_flash_attention_appends_through_kvcache(monkeypatch, name, module, page, kv_len, kw):
    calls = fake_flash(monkeypatch, module, False)
    paged = kw.pop("paged", False)
    w = d_(kv_len=kv_len, page_size=page if paged else 0, **kw)
    assert backend(name).supports(d_(dtype="bf16", kv_len=kv_len, page_size=page if paged else 0), H100) is None
    res = run(name, w)
    assert res["status"] == "OK", res.get("reason")
    assert calls and all("kvcache" in c for c in calls)  # never the dense flash_attn_func
    c = calls[0]
    # the cache holds kv_len - 1 tokens before the call; the library writes the new one at that position
    assert c["seqlens"].dtype == torch.int32 and c["seqlens"].tolist() == [kv_len - 1] * w.batch
    assert c["k_new"] == c["v_new"] == (w.batch, 1, w.kv_heads, w.head_dim)
    assert c["shape"] == (w.batch, 1, w.q_heads, w.head_dim)
    if paged:
        assert c["k_shape"] == (num_pages(w), page, w.kv_heads, w.head_dim) and c["table"] is not None
    else:
        assert c["k_shape"] == (w.batch, kv_len, w.kv_heads, w.head_dim) and c["table"] is None
    assert c["window_size"] == ((w.window - 1, 0) if w.window else (-1, -1))


@pytest.mark.parametrize("name,module,page,kv_len", FA)
def test_flash_attention_without_the_append_is_incorrect(monkeypatch, name, module, page, kv_len):
    """A build that drops k=, v= and attends the kv_len tokens the cache holds: its output misses the new
    token, and the cache says the append was skipped."""
    fake_flash(monkeypatch, module, False)
    lib = sys.modules[module]
    inner = lib.flash_attn_with_kvcache

    @functools.wraps(inner)
    def no_append(q, k_cache, v_cache, k=None, v=None, **kw):  # attends the cache as it is, kv_len tokens
        kw["cache_seqlens"] = kw["cache_seqlens"] + 1
        return inner(q, k_cache, v_cache, **kw)

    lib.flash_attn_with_kvcache = no_append
    res = run(name, d_(kv_len=kv_len))
    assert res["status"] == "INCORRECT" and "append was skipped" in res["reason"], res["reason"]


def test_a_flash_build_without_k_and_v_is_unsupported(monkeypatch):
    fake_flash(monkeypatch, "flash_attn_interface", False)
    sys.modules["flash_attn_interface"].flash_attn_with_kvcache = \
        lambda q, k_cache, v_cache, cache_seqlens=None, page_table=None, softmax_scale=None, causal=False: q
    res = run("fa3", d_())
    assert res["status"] == "UNSUPPORTED" and "takes no k, v" in res["reason"], res["reason"]


# ---- the store: schema 8 and later, rows, a run through the CLI -------------------------------------------

def test_a_version_7_store_is_migrated_and_keeps_its_rows(tmp_path):
    from conftest import make_row

    from attnbench.store.db import Store
    from attnbench.store.schema import SCHEMA_VERSION

    p = tmp_path / "v7.sqlite"
    s = Store(p)
    dec = d_(decode_append="excluded", dtype="bf16")
    s.insert(make_row(0))  # prefill: NULL
    s.insert(make_row(1, **{**dec.to_dict(), "causal": 0}, workload_key=dec.key()))
    s.close()
    con = sqlite3.connect(p)  # as schema 7 left it: the same columns, the version before
    con.execute("UPDATE meta SET value='7' WHERE key='schema_version'")
    con.commit()
    con.close()
    ro = Store(p, readonly=True)
    assert [r["decode_append"] for r in ro.attempts()] == [None, "excluded"]
    ro.close()
    s = Store(p, create=False)
    assert s.con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    rows = s.attempts()
    assert [r["decode_append"] for r in rows] == [None, "excluded"]
    assert rows[1]["workload_key"] == Workload(**{k: rows[1][k] for k in dec.to_dict()} | {"causal": False, "fresh_inputs": False}).key()
    s.close()


@pytest.mark.slow
def test_run_stores_appending_rows_and_show_filters_them(tmp_path, capsys):
    from attnbench.cli.main import main
    from attnbench.store.db import Store

    grid, db = tmp_path / "g.yaml", tmp_path / "d.sqlite"
    grid.write_text("name: a\nworkloads:\n  - {mode: decode, batch: 2, q_heads: 4, kv_heads: 2, head_dim: 16,\n"
                    "     kv_len: 40, dtype: fp32, decode_append: [excluded, included]}\n"
                    "  - {mode: prefill, batch: 1, q_heads: 2, head_dim: 16, seqlen: 16, dtype: fp32}\n")
    assert main(["run", "--repeats", "1", "--config", str(grid), "--backends", "sdpa-math,fa4", "--db", str(db),
                 "--device", "cpu", "--max-time", "0.02"]) == 0
    s = Store(db, create=False)
    rows = {(r["mode"], r["decode_append"], r["backend"]): r for r in s.attempts()}
    s.close()
    ok = rows[("decode", "included", "sdpa-math")]
    assert ok["status"] == "OK" and ok["workload_key"] == d_().key() and ok["bytes"] == cost.io_bytes(d_())
    assert rows[("decode", "excluded", "sdpa-math")]["workload_key"] == "a4d008200892dd24"
    assert rows[("prefill", None, "sdpa-math")]["status"] == "OK"
    capsys.readouterr()
    assert main(["show", "--db", str(db), "--where", "decode_append=included"]) == 0
    out = capsys.readouterr()
    assert "2 attempts (OK 1, UNSUPPORTED 1)" in out.out + out.err, out
