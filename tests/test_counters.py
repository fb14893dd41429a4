"""The counters phase (issue 39): the ncu CSV parser, the aggregate, the bound rule, every way counters cannot be
read, run --counters through the real runner with fake collectors, explain on a store, export/import of the
table, and analyze's mechanism section. GPU tests (marked gpu) assert mechanism facts on a real GPU."""
from __future__ import annotations

import sqlite3
import stat
import sys
from pathlib import Path

import pytest

from attnbench.measure import counters, counters_bound, counters_ncu
from attnbench.record.counters import CountersError, finish
from attnbench.store import counters as store_counters

from conftest import FAKES, finished_store, make_row

# Real output of `ncu --csv --page raw --print-units base --nvtx ...` on the H200 (ncu 2025.3,
# lab/h200_probe_counters.sh, 2026-12-03): the program's own lines and ==PROF== lines, NVTX columns, device attributes, a units row, thousands
# separators; cuDNN's wgmma prefill kernel, FlashAttention-2's mma.sync kernel (prefill, then decode B8 H32 KV 16k).
FIXTURE = Path(__file__).parent / "fixtures" / "ncu_raw_h200_sdpa.csv"
GPU = pytest.mark.gpu


def test_parse_csv_reads_each_kernel_in_base_units():
    kernels = counters_ncu.parse_csv(FIXTURE.read_text())
    assert [k["name"][:30] for k in kernels] == ["cudnn_generated_fort_native_sd", "void pytorch_flash::flash_fwd_",
                                                 "void pytorch_flash::flash_fwd_"]
    wgmma, mma, decode = kernels
    assert wgmma["dram_read_bytes"] == 402_736_128 and wgmma["duration_ns"] == 2_027_040
    assert wgmma["tensor_pct"] == 76.11 and mma["tensor_pct"] == 56.82 and wgmma["xu_pct"] == 39.3
    assert wgmma["smem_dynamic"] == 232_448 and wgmma["registers"] == 168 and wgmma["sm_clock_hz"] > 1.3e9
    assert wgmma["grid"] == "(132, 1, 1)" and mma["block"] == "(128, 1, 1)"
    assert decode["dram_read_bytes"] == pytest.approx(2 * 8 * 32 * 16384 * 128 * 2, rel=1e-3)  # the KV, once


def test_parse_csv_tolerates_other_layouts():
    assert counters_ncu.parse_csv("==PROF== nothing profiled\n") == []
    text = ('"ID","Kernel Name","Grid Size","Block Size","gpu__time_duration.sum","dram__bytes_read.sum","extra.col"\n'
            '"0","k","(1, 1, 1)","(32, 1, 1)","2.5","n/a","7"\n')  # no units row; units of the default (us)
    (k,) = counters_ncu.parse_csv(text)
    assert k["duration_ns"] == 2.5 and k["dram_read_bytes"] is None and "extra.col" not in k
    assert counters_ncu._number("1,234.5", "Kbyte") == 1_234_500.0 and counters_ncu._number("3", "usecond") == 3000.0


def test_aggregate_weights_shares_by_time():
    agg = counters.aggregate(counters.FAKES["fake"].collect({"workload": {}}, "standard"))
    assert agg["kernel_count"] == 2 and agg["profiled_us"] == 1.0
    assert agg["tensor_pct"] == 63.0  # (70 * 900 + 0 * 100) / 1000
    assert agg["dram_read_bytes"] == 4.0e6 and agg["main_kernel"] == "fake_attention_kernel"
    assert agg["smem_per_block"] == 196608 and agg["profiled_clock_mhz"] == 1755.0


@pytest.mark.parametrize("values, host, bound", [
    ({"dram_pct": 85, "tensor_pct": 10, "xu_pct": 5, "shared_pct": 1}, 0, "memory"),
    ({"dram_pct": 20, "tensor_pct": 76, "xu_pct": 40, "shared_pct": 1}, 0, "tensor"),
    ({"dram_pct": 20, "tensor_pct": 50, "xu_pct": 65, "shared_pct": 1}, None, "sfu"),
    ({"dram_pct": 20, "tensor_pct": 30, "xu_pct": 30, "shared_pct": 70}, 0, "shared"),
    ({"dram_pct": 20, "tensor_pct": 30, "xu_pct": 30, "shared_pct": 5, "warps_active_pct": 9}, 0, "latency"),
    ({"dram_pct": 85, "tensor_pct": 10}, 1, "host"),
])
def test_bound_rule(values, host, bound):
    got, evidence = counters_bound.classify({**values, "kernels": [{}]}, host)
    assert got == bound and evidence


def test_no_bound_from_a_set_that_reads_only_some_units():
    """Set bytes reads DRAM throughput only: below 60 % an unread unit may be the limit (no latency bound), and at
    or above it an unread pipe may be nearer its peak still (no memory bound: the rule is the unit nearest its
    peak); the evidence names the units not read. Host-bound rows stay host (no unit decides that)."""
    bound, evidence = counters_bound.classify({"dram_pct": 30.0, "kernels": [{}]}, 0)  # the bytes set
    assert bound is None and "not read" in evidence
    bound, evidence = counters_bound.classify({"dram_pct": 90.0, "kernels": [{}]}, 0)
    assert bound is None and "DRAM throughput 90 %" in evidence
    assert "not read: tensor pipe, SFU (XU) pipe, shared-memory pipe" in evidence
    assert counters_bound.classify({"dram_pct": 90.0, "kernels": [{}]}, 1)[0] == "host"


def test_no_bound_without_counters_and_bytes_ratio():
    assert counters_bound.classify({"note": "not permitted", "tensor_pct": 90}) == (None, None)
    assert counters_bound.bytes_ratio({"dram_read_bytes": 3.0e6, "dram_write_bytes": 1.0e6}, 2.0e6) == 2.0
    assert counters_bound.bytes_ratio({"dram_read_bytes": 3.0e6}, None) is None


@pytest.mark.parametrize("name, words", [("fake-not-installed", "not installed"), ("fake-not-permitted",
                                                                                    "ERR_NVGPUCTRPERM"),
                                         ("fake-no-replay", "could not replay")])
def test_unreadable_counters_say_why_and_hold_no_number(name, words):
    got = counters.collect({"workload": {}, "device": "cuda"}, "standard", counters.collector_named(name))
    assert words in got["note"] and got["kernels"] is None and "tensor_pct" not in got
    row = store_counters.row_of({"attempt_key": "k", "bytes": 1e6}, got, "run")
    assert row["note"] and row["bound"] is None and row["tensor_pct"] is None and row["bytes_ratio"] is None


def test_ncu_collector_on_cpu_and_without_ncu(monkeypatch, tmp_path):
    got = counters.collect({"workload": {}, "device": "cpu"}, "standard", counters_ncu.NcuCollector())
    assert got["note"].startswith("counters need a CUDA device")
    monkeypatch.setenv(counters_ncu.NCU_ENV, str(tmp_path / "no-ncu"))
    got = counters.collect({"workload": {}, "device": "cuda"}, "standard", counters_ncu.NcuCollector())
    assert "not installed" in got["note"]


def _fake_ncu(tmp_path: Path, body: str) -> str:
    """An executable standing in for ncu: `body` is Python reading sys.argv (the real command line)."""
    p = tmp_path / "ncu"
    p.write_text(f"#!{sys.executable}\nimport sys\n{body}\n")
    p.chmod(p.stat().st_mode | stat.S_IEXEC)
    return str(p)


def test_ncu_collector_runs_the_replay_under_ncu_and_drops_unknown_metrics(tmp_path):
    calls = tmp_path / "calls"
    ncu = _fake_ncu(tmp_path, f"""
args = sys.argv[1:]
open({str(calls)!r}, "a").write(" ".join(args) + "\\n")
assert args[args.index("--nvtx-include") + 1] == "attnbench-replay/"
assert args[-3:-1] == ["-m", "attnbench.measure.counters_replay"]
assert args[args.index("--clock-control") + 1] == "none"
if "sm__pipe_alu_cycles_active" in args[args.index("--metrics") + 1]:  # an older ncu refuses a name it lacks
    print("==ERROR== Failed to find metric regex:^sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active$")
    sys.exit(1)
print(open({str(FIXTURE)!r}).read())""")
    got = counters.collect({"workload": {}, "device": "cuda:0", "backend": "b"}, "standard",
                           counters_ncu.NcuCollector(ncu))
    assert got["note"] is None and got["kernel_count"] == 3 and got["alu_pct"] is not None  # the fixture has it
    assert len(calls.read_text().splitlines()) == 2  # the unknown metric dropped, then run once more


@pytest.mark.parametrize("printed, words", [("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission",
                                             "not permitted"),
                                            ("==REPLAY-ERROR== Rejected: head_dim 96", "replay of the step"),
                                            ("==WARNING== No kernels were profiled.", "saw no kernel")])
def test_ncu_collector_failures(tmp_path, printed, words):
    ncu = _fake_ncu(tmp_path, f"print({printed!r}); sys.exit(1)")
    got = counters.collect({"workload": {}, "device": "cuda"}, "standard", counters_ncu.NcuCollector(ncu))
    assert words in got["note"] and got["kernels"] is None


def test_record_refuses_unknown_columns_and_a_row_without_kernels_or_note():
    with pytest.raises(CountersError, match="no counters column"):
        finish({"attempt_key": "k", "how": "run", "collector": "x", "collected_at": "t", "tensor": 1})
    with pytest.raises(CountersError, match="neither kernels nor a note"):
        finish({"attempt_key": "k", "how": "run", "collector": "x", "counter_set": "standard", "collected_at": "t"})


def test_the_counters_step_and_the_sink_make_the_counters_row(tmp_path, monkeypatch):
    """The default tier's path of run --counters (the end-to-end runs below are in the full tier): the step puts
    the collected counters beside the attempt's values, the sink writes them as the attempt's counters row."""
    from types import SimpleNamespace

    from attnbench.runner import counters_phase, gates, steps

    monkeypatch.setenv(counters.COLLECTOR_ENV, "fake")
    a = SimpleNamespace(spec={"backend": "b", "workload": {"seqlen": 0}, "device": "cpu", "counters": "standard"},
                        res={"status": "OK"})
    assert gates.counters_requested(a) and not gates.counters_requested(SimpleNamespace(spec={}))
    steps.counters(a)
    rest, got = counters_phase.split({**a.res})
    assert rest == {"status": "OK"} and got["tensor_pct"] == 63.0
    row = store_counters.row_of(make_row(0), got, "run")
    db = finished_store(tmp_path / "s.sqlite", n=1)
    con = sqlite3.connect(db)
    assert store_counters.insert(con, row) and not store_counters.insert(con, row)  # one row per attempt
    assert store_counters.keys(con) == {"key0000"}


def test_run_with_fake_counters_through_the_real_runner(cli, tmp_path, monkeypatch):
    db = tmp_path / "r.sqlite"
    monkeypatch.setenv(counters.COLLECTOR_ENV, "fake")
    assert cli(*["run", "--plugin", FAKES, "--backends", "fake-good,fake-wrong", "--grid", "smoke", "--modes",
                "prefill", "--causal", "false", "--repeats", "1", "--device", "cpu", "--max-time", "0.02",
                "--counters", "--db", str(db)]).rc == 0
    con = sqlite3.connect(db)
    ok = {k for (k,) in con.execute("SELECT attempt_key FROM attempts WHERE status='OK'")}
    rows = con.execute("SELECT attempt_key, how, collector, bound, tensor_pct, note, bytes_ratio FROM counters")
    got = {r[0]: r[1:] for r in rows}
    assert ok and set(got) == ok  # OK attempts only: the INCORRECT ones were never replayed
    assert all(v[:4] == ("run", "fake", "tensor", 63.0) and v[4] is None and v[5] > 0 for v in got.values())
    phases = [p for (p,) in con.execute("SELECT phases_s FROM attempts WHERE status='OK'")]
    assert all('"counters"' in p for p in phases)


def test_run_with_unreadable_counters_keeps_the_attempt_ok(cli, tmp_path, monkeypatch):
    db = tmp_path / "r.sqlite"
    monkeypatch.setenv(counters.COLLECTOR_ENV, "fake-not-permitted")
    assert cli(*["run", "--plugin", FAKES, "--backends", "fake-good", "--grid", "smoke", "--modes", "prefill",
                "--causal", "false", "--repeats", "1", "--device", "cpu", "--max-time", "0.02", "--counters", "bytes",
                "--db", str(db)]).rc == 0
    con = sqlite3.connect(db)
    assert {s for (s,) in con.execute("SELECT status FROM attempts")} == {"OK"}
    notes = con.execute("SELECT note, counter_set, tensor_pct FROM counters").fetchall()
    assert notes and all("ERR_NVGPUCTRPERM" in n and s == "bytes" and t is None for n, s, t in notes)


def test_run_refuses_an_unknown_counter_set(cli, tmp_path):
    r = cli(*["run", "--counters", "everything", "--device", "cpu", "--db", str(tmp_path / "r.sqlite")])
    assert r.rc == 2 and "unknown counter set" in r.err


def test_explain_adds_counters_to_stored_ok_attempts(cli, tmp_path, monkeypatch):
    db = finished_store(tmp_path / "s.sqlite", n=4)
    monkeypatch.setenv(counters.COLLECTOR_ENV, "fake")
    r = cli(*["explain", str(db), "--where", "causal=false"])
    assert r.rc == 0 and "tensor" in r.out
    con = sqlite3.connect(db)
    got = dict(con.execute("SELECT attempt_key, how FROM counters"))
    assert got == {"key0000": "explain", "key0002": "explain"}  # the causal=false rows, samples untouched
    assert con.execute("SELECT COUNT(*) FROM attempts").fetchone()[0] == 4
    assert cli(*["explain", str(db)]).rc == 0  # only the two without counters are replayed
    assert con.execute("SELECT COUNT(*) FROM counters").fetchone()[0] == 4


def test_export_and_import_carry_the_counters_table(cli, tmp_path, monkeypatch):
    db = finished_store(tmp_path / "s.sqlite", n=2)
    monkeypatch.setenv(counters.COLLECTOR_ENV, "fake")
    assert cli(*["explain", str(db)]).rc == 0
    for name in ("c.jsonl", "c.csv.gz", "c.parquet"):
        out, new = tmp_path / name, tmp_path / f"{name}.sqlite"
        assert cli(*["export", "--db", str(db), "--table", "counters", "--out", str(out)]).rc == 0
        assert cli(*["import", str(out), "--table", "counters", "--db", str(new)]).rc == 0
        a, b = store_counters.rows(sqlite3.connect(db)), store_counters.rows(sqlite3.connect(new))
        assert a == b and len(b) == 2 and b[0]["kernels"][0]["name"] == "fake_attention_kernel"


def test_analyze_explains_a_lead_in_counter_terms(tmp_path):
    from attnbench.analysis.analyze import compute
    from attnbench.store.db import Store

    db = tmp_path / "s.sqlite"
    s = Store(db)
    s.start_run("run-a", "default", "g", "attnbench run", "CPU test", {"ceilings": {}})
    fast = make_row(0, attempt_key="fast", backend="wgmma", samples_us=[10.0] * 12, median_us=10.0, p95_us=10.0)
    slow = make_row(0, attempt_key="slow", backend="mma", samples_us=[18.0] * 12, median_us=18.0, p95_us=18.0)
    s.insert_many([fast, slow])
    for row, tensor in ((fast, 76.0), (slow, 57.0)):
        got = counters.collect({"workload": {}}, "standard", counters.FAKES["fake"])
        got["tensor_pct"] = tensor
        store_counters.insert(s.con, store_counters.row_of(row, got, "run"))
    s.close()
    from attnbench.store.sources import load

    data = load([str(db)])
    a = compute(data.attempts, data.runs, paths=data.paths)
    (lead,) = a.mechanism.leads
    assert (lead.winner, lead.runner_up, lead.why) == ("wgmma", "mma", "tensor pipe 76 % vs 57 %")
    assert {c.backend: c.bounds for c in a.mechanism.classes} == {"mma": {"latency": 1}, "wgmma": {"tensor": 1}}
    from types import SimpleNamespace

    from attnbench.report.html.pages import mechanism
    from attnbench.report.mechanism_text import lead_lines

    assert "tensor pipe 76 % vs 57 %" in lead_lines(a)[0] and "wgmma 1.80x ahead of mma" in lead_lines(a)[0]
    import io

    from rich.console import Console

    from attnbench.report.analyze import markdown, terminal

    con = Console(width=80, file=io.StringIO(), color_system=None)
    for part in terminal(a, 80):
        con.print(part)
    shown = con.file.getvalue()
    assert "Mechanism" in shown and "tensor 1" in shown and max(map(len, shown.splitlines())) <= 80
    assert "tensor pipe 76 % vs 57 %" in markdown(a)
    data = SimpleNamespace(analysis=a, df=data.attempts)
    html = mechanism.body(SimpleNamespace(data=data, table_id=lambda: "t"))
    assert mechanism.applies(data) and "tensor pipe 76 % vs 57 %" in html and "Why the winner leads" in html


def test_a_lead_with_alike_counters_is_not_explained_by_them():
    import pandas as pd

    from attnbench.analysis.sections.mechanism import why

    a = pd.Series({"tensor_pct": 63.0, "xu_pct": 27.0, "dram_pct": 37.0})
    assert why(a, a.copy()).startswith("the counters agree within 2 points")
    assert why(a, a.copy().replace(27.0, 40.0)) == "SFU pipe 27 % vs 40 %"


def test_analyze_without_counters_has_no_mechanism(tmp_path):
    from attnbench.analysis.analyze import compute
    from attnbench.store.sources import load

    data = load([str(finished_store(tmp_path / "s.sqlite"))])
    assert compute(data.attempts, data.runs, paths=data.paths).mechanism is None


# ---- on a GPU: mechanism facts, not numbers -------------------------------------------------------------------
def _gpu_counters(backend: str, **w):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or not counters_ncu.find_ncu():
        pytest.skip("needs a CUDA GPU and Nsight Compute")
    from attnbench.workloads import Workload

    spec = {"backend": backend, "workload": Workload(**w).to_dict(), "device": "cuda", "seed": 0}
    got = counters.collect(spec, "standard")
    if got["note"] and "not permitted" in got["note"]:
        pytest.skip(got["note"])
    assert got["note"] is None, got["note"]
    return got


@GPU
def test_gpu_wgmma_kernel_uses_the_tensor_pipe_more_than_mma_sync():
    shape = dict(mode="prefill", batch=4, q_len=4096, kv_len=4096, q_heads=32, kv_heads=32, head_dim=128,
                 head_dim_v=128, dtype="bf16", causal=False)
    cudnn, flash = _gpu_counters("sdpa-cudnn", **shape), _gpu_counters("sdpa-flash", **shape)
    assert "sm90" in cudnn["main_kernel"] or "wgmma" in cudnn["main_kernel"], cudnn["main_kernel"]
    assert cudnn["tensor_pct"] > flash["tensor_pct"], (cudnn["tensor_pct"], flash["tensor_pct"])


@GPU
def test_gpu_large_kv_decode_is_memory_bound_and_reads_the_modelled_bytes():
    from attnbench.workloads import Workload
    from attnbench.workloads.cost import io_bytes

    shape = dict(mode="decode", batch=8, q_len=1, kv_len=16384, q_heads=32, kv_heads=32, head_dim=128,
                 head_dim_v=128, dtype="bf16", causal=False)
    got = _gpu_counters("sdpa-cudnn", **shape)  # reads the cache near the read ceiling (docs/method/counters.md)
    bound, evidence = counters_bound.classify(got, 0)
    assert bound == "memory", evidence
    ratio = counters_bound.bytes_ratio(got, io_bytes(Workload(**shape)))
    assert 0.9 <= ratio <= 1.1, ratio


def test_the_h200_kernels_classify_as_the_probe_reads_them():
    """The bound rule on the probe's kernels: cuDNN's wgmma kernel tensor-bound, FlashAttention-2's mma.sync kernel
    below the threshold on every unit; measured bytes of the prefill near its model (B4 H32 N4k D128 bf16)."""
    wgmma, mma, _ = counters_ncu.parse_csv(FIXTURE.read_text())
    one = lambda k: {**counters.aggregate([k]), "kernels": [k]}  # noqa: E731
    assert counters_bound.classify(one(wgmma), 0)[0] == "tensor"
    assert counters_bound.classify(one(mma), 0)[0] == "latency"
    assert counters_bound.bytes_ratio(one(wgmma), 4 * (4 * 32 * 4096 * 128 * 2)) == pytest.approx(0.98, abs=0.02)


def test_the_replay_rebuilds_the_step_and_calls_it_inside_the_range(tmp_path, monkeypatch, capsys):
    """The replay entry point on CPU (the range calls recorded instead of NVTX's): a plugin backend's step is
    rebuilt from the attempt's message and called once inside the range; a backend it cannot find is one line."""
    import json

    import torch

    from attnbench.measure import counters_replay
    from attnbench.workloads import Workload

    seen = []
    monkeypatch.setattr(torch.cuda.nvtx, "range_push", lambda name: seen.append(("push", name)))
    monkeypatch.setattr(torch.cuda.nvtx, "range_pop", lambda: seen.append(("pop",)))
    w = Workload(mode="prefill", batch=1, q_len=64, kv_len=64, q_heads=2, kv_heads=2, head_dim=16, head_dim_v=16,
                 dtype="fp32", causal=False)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"backend": "fake-good", "workload": w.to_dict(), "device": "cpu", "seed": 0,
                                "plugins": [FAKES]}))
    assert counters_replay.main([str(spec)]) == 0
    assert seen == [("push", counters_ncu.RANGE), ("pop",)]
    spec.write_text(json.dumps({"backend": "nobody", "workload": w.to_dict(), "device": "cpu"}))
    assert counters_replay.main([str(spec)]) == 3
    assert "==REPLAY-ERROR== LookupError: no backend named 'nobody'" in capsys.readouterr().err


def test_show_gains_a_bound_column_that_fits_80_columns(cli, tmp_path, monkeypatch):
    from rich.console import Console

    from attnbench.cli import console

    db = finished_store(tmp_path / "s.sqlite", n=4)
    monkeypatch.setattr(console, "out", Console(width=80))
    before = cli("show", "--db", str(db)).out
    assert " bound" not in before.replace("bootstrap bound", "")  # no counters: the table as it was
    monkeypatch.setenv(counters.COLLECTOR_ENV, "fake")
    assert cli("explain", str(db)).rc == 0
    monkeypatch.setattr(console, "out", Console(width=80))
    shown = cli("show", "--db", str(db)).out
    assert " bound" in shown.replace("bootstrap bound", "") and "tensor" in shown
    assert max(len(line) for line in shown.splitlines()) <= 80


def test_explain_skips_attempts_of_another_gpu_model(cli, tmp_path, monkeypatch):
    from attnbench.cli.commands import explain

    db = finished_store(tmp_path / "s.sqlite", n=2)  # rows of "CPU test"
    monkeypatch.setenv(counters.COLLECTOR_ENV, "fake")
    monkeypatch.setattr(explain, "_gpu_name", lambda device: "NVIDIA H200")
    r = cli("explain", str(db))
    assert r.rc == 0 and "2 attempt(s) ran on another GPU model" in r.err
    assert store_counters.rows(sqlite3.connect(db)) == []
