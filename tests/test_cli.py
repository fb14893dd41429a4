"""Command line (cli/): bad input is one line and exit 2 with nothing written; the happy paths work."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from attnbench.store import io
from attnbench.store.db import Store
from conftest import ATTNBENCH, FAKES, TINY_GRID, make_row, needs_console_script, rows_of


def files(d) -> set[str]:
    return {p.name for p in d.rglob("*")}


def assert_usage_error(res, tmp_path, before: set[str], text: str | None = None):
    assert res.rc == 2, (res.rc, res.err)
    lines = res.err.strip().splitlines()
    assert len(lines) == 1, res.err
    assert lines[0].startswith("attnbench: error: "), res.err
    assert "Traceback" not in res.err
    if text:
        assert text in lines[0], lines[0]
    assert files(tmp_path) == before, "bad input wrote a file"


@pytest.fixture
def inputs(tmp_path):
    """Files the bad-input cases read; created before the 'nothing written' snapshot."""
    (tmp_path / "malformed.yaml").write_text("workloads: [ {mode: prefill, batch: 1\n")
    (tmp_path / "impossible.yaml").write_text(
        "workloads:\n  - {mode: prefill, batch: 1, seqlen: 64, q_heads: 6, kv_heads: 4, head_dim: 16}\n")
    (tmp_path / "unknown.yaml").write_text(
        "workloads:\n  - {mode: prefill, batch: 1, seqlen: 64, q_heads: 2, head_dim: 16, heads: 2}\n")
    (tmp_path / "tiny.yaml").write_text(TINY_GRID)
    (tmp_path / "broken_plugin.py").write_text("raise RuntimeError('plugin bug')\n")
    (tmp_path / "empty_plugin.py").write_text("X = 1\n")
    (tmp_path / "notabackend_plugin.py").write_text("BACKENDS = [object()]\n")
    (tmp_path / "bad.jsonl").write_text('{"attempt_key": "k"\n')
    (tmp_path / "short.jsonl").write_text('{"attempt_key": "k", "run_id": "r"}\n')
    (tmp_path / "bad.parquet").write_text("nope")
    return tmp_path


BAD_RUNS = [
    (["--grid", "nope"], "unknown grid 'nope'"),
    (["--backends", "reference,nope"], "unknown backend 'nope'"),
    (["--config", "{d}/malformed.yaml"], "malformed YAML"),
    (["--config", "{d}/impossible.yaml"], "not a multiple"),
    (["--config", "{d}/unknown.yaml"], "unknown field"),
    (["--config", "{d}/absent.yaml"], "not found"),
    (["--repeats", "0"], "--repeats must be at least 1"),
    (["--repeats", "-3"], "--repeats"),
    (["--repeats", "two"], "invalid int value"),
    (["--timeout", "0"], "--timeout must be positive"),
    (["--max-time", "-1"], "--max-time must be positive"),
    (["--min-time", "0"], "--min-time must be positive"),
    (["--min-time", "nan"], "--min-time must be positive"),
    (["--device", "gpu"], "bad --device 'gpu'"),
    (["--device", "cuda:x"], "bad --device"),
    (["--modes", "prefil"], "unknown mode 'prefil'"),
    (["--dtype", "fp64"], "unknown dtype 'fp64'"),
    (["--grid", "smoke", "--modes", "decode", "--seqlen", "128"], "no workload of grid 'smoke' is left"),
    (["--grid", "smoke", "--seqlen", "3x"], "bad length"),
    (["--causal", "maybe"], "invalid choice"),
    (["--grid", "smoke", "--config", "{d}/tiny.yaml"], "not allowed with"),
    (["--plugin", "{d}/missing_plugin.py"], "plugin file not found"),
    (["--plugin", "{d}/broken_plugin.py"], "failed to import: RuntimeError: plugin bug"),
    (["--plugin", "{d}/empty_plugin.py"], "defines neither BACKENDS nor backends()"),
    (["--plugin", "{d}/notabackend_plugin.py"], "is not an attnbench Backend"),
    (["--plugin", FAKES, "--plugin", FAKES], "two backends are named"),
    (["--db", "{d}/no/such/dir/x.sqlite"], "directory of --db does not exist"),
    (["--bogus"], "unrecognized arguments"),
]


@pytest.mark.parametrize("args,text", BAD_RUNS, ids=[" ".join(a) for a, _ in BAD_RUNS])
def test_bad_run_input(cli, inputs, args, text):
    d = inputs
    argv = ["run", "--repeats", "1", "--db", str(d / "x.sqlite")] + [a.format(d=d) for a in args]
    if "--device" not in args:
        argv += ["--device", "cpu"]
    before = files(d)
    res = cli(*argv)
    assert_usage_error(res, d, before, text)
    assert not (d / "x.sqlite").exists() and not (d / "x.sqlite.log").exists()


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="checks the message of a CPU-only host")
@pytest.mark.parametrize("device", ["cuda", "cuda:3"])
def test_cuda_requested_on_a_cpu_only_host(cli, inputs, device):
    d = inputs
    before = files(d)
    res = cli("run", "--repeats", "1", "--db", d / "x.sqlite", "--device", device, "--grid", "smoke")
    assert_usage_error(res, d, before, "no CUDA device is visible")
    res = cli("env", "--device", device)
    assert_usage_error(res, d, before, "no CUDA device is visible")


@pytest.mark.parametrize("argv,text", [
    (["show", "--db", "{d}/absent.sqlite"], "store not found"),
    (["show", "--db", "{d}/absent.sqlite", "--status"], "store not found"),
    (["export", "--db", "{d}/absent.sqlite", "--format", "csv", "--out", "{d}/o.csv"], "store not found"),
    (["export", "--db", "{d}/absent.sqlite", "--format", "xml", "--out", "{d}/o.xml"], "invalid choice"),
    (["export", "--db", "{d}/absent.sqlite", "--format", "csv"], "required"),
    (["export", "--db", "{d}/absent.sqlite", "--out", "{d}/o.xlsx"], "cannot tell the format"),
    (["export", "--db", "{d}/absent.sqlite", "--out", "{d}/o.csv", "--table", "nope"], "invalid choice"),
    (["import", "{d}/absent.jsonl", "--db", "{d}/new.sqlite"], "file not found"),
    (["import", "{d}/bad.jsonl", "--db", "{d}/new.sqlite"], "cannot read"),
    (["import", "{d}/short.jsonl", "--db", "{d}/new.sqlite"], "lacks"),
    (["import", "{d}/bad.parquet", "--db", "{d}/new.sqlite"], "cannot read"),
    (["import", "{d}/tiny.yaml", "--db", "{d}/new.sqlite"], "cannot tell the format"),
    (["env", "--device", "tpu"], "bad --device"),
    (["frobnicate"], "invalid choice"),
])
def test_bad_input_other_commands(cli, inputs, argv, text):
    d = inputs
    before = files(d)
    res = cli(*[a.format(d=d) for a in argv])
    assert_usage_error(res, d, before, text)


def test_export_to_missing_directory(cli, tmp_path):
    s = Store(tmp_path / "s.sqlite")
    s.insert(make_row(0))
    s.close()
    before = rows_of(tmp_path / "s.sqlite")
    res = cli("export", "--db", tmp_path / "s.sqlite", "--format", "jsonl", "--out", tmp_path / "no" / "x.jsonl")
    assert res.rc == 2 and "directory of --out does not exist" in res.err
    assert not (tmp_path / "no").exists()
    assert rows_of(tmp_path / "s.sqlite") == before


@pytest.mark.parametrize("name,content", [
    ("x.csv", "name,value\n"),  # a header without the required columns
    ("a.jsonl", "42\n"),  # a line that is not an object
    ("a.jsonl", '{"attempt_key": null, "run_id": "r", "backend": "b", "status": "OK"}\n'),  # a null key
])
def test_import_of_a_bad_file_is_a_usage_error(cli, tmp_path, name, content):
    (tmp_path / name).write_text(content)
    res = cli("import", tmp_path / name, "--db", tmp_path / "new.sqlite")
    assert res.rc == 2, res.err
    assert not (tmp_path / "new.sqlite").exists()


def test_bad_input_from_the_installed_command(tmp_path):
    """The console script itself: exit status 2, one line, nothing written."""
    for argv in (["run", "--grid", "nope", "--db", "x.sqlite", "--device", "cpu"],
                 ["run", "--repeats", "0", "--db", "x.sqlite", "--device", "cpu"]):
        p = subprocess.run([sys.executable, "-m", "attnbench", *argv], cwd=tmp_path, capture_output=True, text=True,
                           timeout=120)
        assert p.returncode == 2, p.stderr
        assert p.stderr.startswith("attnbench: error:") and len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert list(tmp_path.iterdir()) == []


def test_show_on_a_file_that_is_not_a_store(cli, tmp_path):
    (tmp_path / "notes.txt").write_text("hello\n" * 100)
    res = cli("show", "--db", tmp_path / "notes.txt")
    assert res.rc == 2 and res.err.startswith("attnbench: error:")


def test_run_with_a_directory_as_db(cli, tmp_path):
    (tmp_path / "adir").mkdir()
    res = cli("run", "--repeats", "1", "--db", tmp_path / "adir", "--grid", "smoke", "--device", "cpu", "--backends", "reference")
    assert res.rc == 2 and res.err.startswith("attnbench: error:")




def test_max_time_help_states_the_real_defaults(cli):
    from attnbench.measure.timing import TimingConfig

    res = cli("run", "--repeats", "1", "--help")
    text = " ".join(res.out.split())
    help_line = text[text.index("--max-time S timing"):][:200]
    assert f"{TimingConfig.for_device('cpu').max_time_s:g} s on CPU" in help_line, help_line
    assert f"{TimingConfig.for_device('cuda').max_time_s:g} s on CUDA" in help_line, help_line


# ---- happy paths ---------------------------------------------------------------------------------

def test_help_and_version(cli):
    res = cli("--help")
    assert res.rc == 0
    for c in ("run", "backends", "env", "show", "export", "import", "exit", "code 2"):
        assert c in res.out
    res = cli("run", "--repeats", "1", "--help")
    assert res.rc == 0 and "--backends" in res.out and "--repeats" in res.out and "--plugin" in res.out
    for sub in ("backends", "env", "show", "export", "import"):
        assert cli(sub, "--help").rc == 0
    res = cli("--version")
    assert res.rc == 0 and "attnbench 0.1.0" in res.out
    res = cli()
    assert res.rc == 0 and "usage: attnbench" in res.out


@needs_console_script
def test_help_from_the_installed_command():
    p = subprocess.run([ATTNBENCH, "--help"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "usage: attnbench" in p.stdout


def test_backends_table_and_json(cli):
    res = cli("backends")
    assert res.rc == 0
    for name in ("reference", "sdpa-math", "sdpa-flash", "sdpa-efficient", "sdpa-cudnn", "flex", "compile"):
        assert name in res.out
    res = cli("backends", "--json", "--plugin", FAKES)
    assert res.rc == 0
    rows = json.loads(res.out)
    by = {r["name"]: r for r in rows}
    assert {"reference", "fake-good", "fake-mutates"} <= set(by)
    assert by["reference"]["role"] == "accuracy_reference" and by["sdpa-flash"]["role"] == "contestant"
    assert by["fake-mutates"]["modes"] == ["decode"]
    optional = {"fa4", "fa2", "fa3", "flashinfer-prefill", "flashinfer-decode", "cudnn-fe", "jax-xla", "jax-cudnn",
                "xformers"}  # their libraries may be absent here: then a reason (tests/test_new_backends.py)
    assert all(r["available"] is True and r["why_not"] is None for r in rows if r["name"] not in optional)
    assert all(r["available"] is (r["why_not"] is None) for r in rows)
    assert by["compile"]["isolation"] == "backend"


def test_ceilings_on_cpu_name_their_buffers():
    from attnbench.measure.ceilings import ceilings

    c = ceilings("cpu")
    assert c["read_bytes"] == 64 << 20 and c["matmul_n"] == 512
    assert all(c[k] > 0 for k in ("copy_gbps", "read_gbps", "matmul_tflops_bf16", "matmul_tflops_fp16",
                                  "matmul_tflops_fp32", "host_op_us"))


def test_the_host_pace_is_the_time_to_issue_one_eager_op(monkeypatch):
    import time
    from types import SimpleNamespace

    import torch

    from attnbench.measure import ceilings

    real_add = torch.add

    def slow_add(*a, **k):  # a host that takes 200 us more to issue each op
        end = time.perf_counter() + 200e-6
        while time.perf_counter() < end:
            pass
        return real_add(*a, **k)

    monkeypatch.setattr(torch, "add", slow_add)
    # on the real clock, a busy host only adds to the 200 us each op waits: the floor holds under any load
    assert ceilings.host_op_us("cpu", calls=20, reps=5) >= 200
    # and it is the time per op, not per block or per call of the warm-up: on a clock that only the ops
    # advance (what else runs on the host cannot move it), ops of 7 us and of 207 us read as exactly that
    now = [0.0]
    monkeypatch.setattr(ceilings, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    for per_op in (7e-6, 207e-6):
        def ticking_add(*a, per_op=per_op, **k):
            now[0] += per_op
            return real_add(*a, **k)

        monkeypatch.setattr(torch, "add", ticking_add)
        assert ceilings.host_op_us("cpu", calls=20, reps=5) == pytest.approx(per_op * 1e6)


def test_env_without_ceilings(cli):
    res = cli("env", "--no-ceilings", "--device", "cpu")
    assert res.rc == 0
    prov = json.loads(res.out)
    assert prov["device"]["type"] == "cpu" and prov["device"]["total_memory"] > 0
    assert prov["timer"] == "host_clock" and "ceilings" not in prov
    assert prov["libraries"]["torch"] and prov["attnbench_version"] == "0.1.0"
    assert prov["device_arg"] == "cpu" and prov["seed"] == 0
    assert len(prov["source_sha256"]) == 64 and "TORCHINDUCTOR_COMPILE_THREADS" in prov["compile_workers_env"]


@pytest.fixture
def filled(tmp_path):
    db = tmp_path / "s.sqlite"
    s = Store(db)
    s.start_run("run-a", "default", "g", "attnbench run", "CPU test",
                {"ceilings": {"copy_gbps": 10.0, "matmul_tflops_bf16": 1.0}})
    # samples whose median and p95 are the row's (an export of the store imports: store/meaning.py)
    rows = [make_row(0, backend="fast"), make_row(1, backend="slow", median_us=500.0, p95_us=600.0,
                                                 samples_us=[400.0] * 5 + [500.0] * 2 + [600.0] * 5,
                                                 attempt_key="k-slow"),
            make_row(2, backend="ref", role="accuracy_reference", median_us=1.0, p95_us=1.0, samples_us=[1.0] * 12,
                     attempt_key="k-ref"),
            make_row(3, backend="broken", status="CRASH", reason="worker killed by SIGABRT", median_us=None,
                     p95_us=None, samples_us=None, attempt_key="k-crash")]
    rows[1].update({k: rows[0][k] for k in ("workload_key", "q_len", "kv_len", "causal", "flops", "bytes")})
    rows[2].update({k: rows[0][k] for k in ("workload_key", "q_len", "kv_len", "causal", "flops", "bytes")})
    s.insert_many(rows)
    s.finish_run("run-a")
    s.close()
    return db


def test_show_with_status(cli, filled):
    res = cli("show", "--db", filled, "--status")
    assert res.rc == 0, res.err
    out = " ".join(res.out.split())
    assert "Fastest backend per workload" in out and "Attempts per backend and status" in out
    # best = fast (10.6 µs), p95 11.1, 2·1·4·64·64·64 FLOP / 10.6 µs = 0.198 TFLOP/s = 20% of the 1 TFLOP/s
    # ceiling, runner-up slow at 500 µs: 47.17x; the accuracy reference (1 µs) is not in the contest
    # clear: 47x ahead and the samples (10.0..11.1 against 11.0..12.1) separate in the bootstrap
    assert "CPU test │ prefill │ 1 │ 64 │ 64 │ 4/2 │ 32 │ bf16 │ none │ eager │ fast │ 10.6 │ 11.1 │ " \
           "0.198 TFLOP/s │ 20% │ slow │ 47.17 │ yes" in out, out
    assert "4 attempts (CRASH 1, OK 3)" in out, out  # the run overview line
    assert "Where the sweep's wall went" in out and "timed samples" in out, out
    assert "were dropped, not timed" not in out  # no graph sample was late in this store
    status_table = out.split("Attempts per backend and status")[1]
    for line in ("broken │ 1 │ 0", "fast │ 0 │ 1", "ref │ 0 │ 1", "slow │ 0 │ 1"):
        assert line in status_table
    res = cli("show", "--db", filled, "--all")
    out = " ".join(res.out.split())
    assert res.rc == 0 and "│ ref │ 1.0 │" in out and "Attempts per backend" not in out
    assert "name (kernel)" not in out  # no backend ran a library kernel its name does not say


CUDNN = "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_cga1x1x1_kernel0_0"


def _show_compiled(cli, db, **compile_row):
    """`show` of a new store with an SDPA-cuDNN winner and a compile runner-up described by compile_row."""
    s = Store(db)
    s.insert_many([make_row(0, backend="sdpa-cudnn", family="sdpa", dispatch_kernels=[CUDNN],
                            dispatch_main_family="cudnn", dispatch_attention_family="cudnn"),
                   make_row(0, backend="compile", family="compile", median_us=17.0, attempt_key="k-compile",
                            **compile_row)])
    s.close()
    res = cli("show", "--db", db)
    assert res.rc == 0, res.err
    return " ".join(res.out.split())


def test_show_names_the_library_kernel_a_compiled_backend_ran(cli, tmp_path):
    out = _show_compiled(cli, tmp_path / "s.sqlite", dispatch_kernels=[CUDNN], dispatch_main_family="cudnn",
                         dispatch_attention_family="cudnn")
    assert "│ sdpa-cudnn │" in out and "│ compile (cudnn) │" in out, out
    assert "name (kernel): that backend spent most of its device time in this library attention kernel" in out


def test_show_takes_the_library_kernel_from_the_stored_families_not_the_names(cli, tmp_path):
    # the probe's stored families decide; the first name alone would be classified as Triton
    out = _show_compiled(cli, tmp_path / "a.sqlite", dispatch_kernels=["triton_red_fused__softmax_add_0", CUDNN],
                         dispatch_main_family="cudnn", dispatch_attention_family="cudnn")
    assert "│ compile (cudnn) │" in out, out
    out = _show_compiled(cli, tmp_path / "b.sqlite", dispatch_kernels=[CUDNN], dispatch_main_family="unfused-gemm",
                         dispatch_attention_family="cudnn")
    assert "│ compile │" in out and "name (kernel)" not in out, out  # cuDNN ran but did not take the most time


def test_show_classifies_the_kernel_names_of_rows_stored_before_the_families(cli, tmp_path):
    out = _show_compiled(cli, tmp_path / "s.sqlite", dispatch_kernels=[CUDNN])  # both family columns NULL
    assert "│ compile (cudnn) │" in out, out


def test_show_adds_a_column_for_an_axis_that_varies(cli, tmp_path):
    db = tmp_path / "s.sqlite"
    s = Store(db)
    s.insert_many([make_row(0, backend="fast"),
                   make_row(0, backend="fast", layout="BNHD", workload_key="w-bnhd", median_us=20.0,
                            attempt_key="k-bnhd")])
    s.close()
    res = cli("show", "--db", db)
    out = " ".join(res.out.split())
    assert res.rc == 0, res.err
    assert "┃ launch ┃ layout ┃ best ┃" in out, out  # after the always-shown axes, headed by its short name
    assert "│ eager │ BHND │ fast │ 10.6 │" in out and "│ eager │ BNHD │ fast │ 20.0 │" in out, out
    assert "┃ L2 ┃" not in out and "┃ Dv ┃" not in out  # constant axes get no column


def test_show_without_ok_rows(cli, tmp_path):
    db = tmp_path / "s.sqlite"
    s = Store(db)
    s.insert(make_row(0, status="TIMEOUT", reason="no result", median_us=None, samples_us=None))
    s.close()
    res = cli("show", "--db", db)
    assert res.rc == 0 and "no OK contestant rows" in res.out and "(1 attempts stored)" in res.out
    res = cli("show", "--db", db, "--status")
    assert "TIMEOUT" in res.out


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_export_then_import(cli, filled, tmp_path, fmt):
    out = tmp_path / f"out.{fmt}"
    res = cli("export", "--db", filled, "--format", fmt, "--out", out)
    assert res.rc == 0 and "wrote 4 attempts" in res.err and out.is_file()
    assert len(io.read_rows(out)) == 4
    res = cli("import", out, "--db", tmp_path / "copy.sqlite")
    assert res.rc == 0 and "imported 4 new attempts (0 already present)" in res.err
    assert rows_of(tmp_path / "copy.sqlite") == rows_of(filled)
    res = cli("import", out, "--db", tmp_path / "copy.sqlite")
    assert res.rc == 0 and "imported 0 new attempts (4 already present)" in res.err
    res = cli("import", out, "--db", filled)  # into the store it came from: nothing new
    assert "imported 0 new" in res.err and len(rows_of(filled)) == 4


@pytest.mark.slow
def test_dry_run_prints_the_plan_and_creates_no_store(cli, tmp_path):
    (tmp_path / "tiny.yaml").write_text(TINY_GRID)
    res = cli("run", "--repeats", "1", "--config", tmp_path / "tiny.yaml", "--plugin", FAKES, "--backends",
              "fake-good,fake-mutates,sdpa-flash", "--repeats", "2", "--dry-run", "--db", tmp_path / "d.sqlite",
              "--device", "cpu")
    assert res.rc == 0, res.err
    text = " ".join(res.out.split())
    assert "2 workloads × 3 backends × 2 repeats = 12 attempts" in text
    assert "TO_RUN 10" in text and "UNSUPPORTED 2" in text  # fake-mutates offers decode only
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny.yaml"]  # no store, no worker log


@pytest.mark.slow
@needs_console_script
def test_run_and_show_through_the_installed_command(tmp_path):
    (tmp_path / "tiny.yaml").write_text(TINY_GRID)
    p = subprocess.run([ATTNBENCH, "run", "--repeats", "1", "--config", "tiny.yaml", "--plugin", FAKES, "--backends",
                        "fake-good,sdpa-flash", "--db", "r.sqlite", "--max-time", "0.05", "--device", "cpu"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    rows = rows_of(tmp_path / "r.sqlite")
    assert len(rows) == 4 and {r["status"] for r in rows} == {"OK"}
    assert {r["tag"] for r in rows} == {"default"} and all(r["device_name"].startswith("CPU") for r in rows)
    flash = [r for r in rows if r["backend"] == "sdpa-flash"]
    assert all(json.loads(r["dispatch_families"]) == ["pytorch-flash-cpu"] for r in flash)
    assert "done: 4 attempts this run (OK 4)" in " ".join(p.stderr.split())
    s = subprocess.run([ATTNBENCH, "show", "--db", "r.sqlite", "--status"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=120, env={**os.environ, "COLUMNS": "250"})
    assert s.returncode == 0, s.stderr
    assert "fake-good" in s.stdout and "sdpa-flash" in s.stdout


@pytest.mark.slow
@pytest.mark.parametrize("tol", ["-1", "nan"])
def test_nonsense_tolerance_is_a_usage_error(cli, tmp_path, tol):
    (tmp_path / "tiny.yaml").write_text(TINY_GRID)
    res = cli("run", "--repeats", "1", "--config", tmp_path / "tiny.yaml", "--plugin", FAKES, "--backends", "fake-good",
              "--dry-run", "--tol", tol, "--db", tmp_path / "d.sqlite", "--device", "cpu")
    assert res.rc == 2, res.out


@pytest.mark.slow
def test_export_runs_and_gzip_attempts_then_import_both(cli, tmp_path):
    from attnbench.cli.main import main

    db = tmp_path / "src.sqlite"
    grid = tmp_path / "tiny.yaml"
    grid.write_text(TINY_GRID)
    assert main(["run", "--repeats", "1", "--config", str(grid), "--modes", "prefill", "--backends", "sdpa-math", "--db", str(db),
                 "--device", "cpu", "--max-time", "0.02"]) == 0
    att, runs = tmp_path / "a.jsonl.gz", tmp_path / "runs.jsonl"
    res = cli("export", "--db", db, "--out", att)  # format from the name
    assert res.rc == 0 and att.read_bytes()[:2] == b"\x1f\x8b"
    res = cli("export", "--db", db, "--out", runs, "--table", "runs")
    assert res.rc == 0 and "wrote 1 runs" in res.err
    copy = tmp_path / "copy.sqlite"
    assert cli("import", att, "--db", copy).rc == 0
    res = cli("import", runs, "--db", copy, "--table", "runs")
    assert res.rc == 0 and "imported 1 runs" in res.err
    a, b = Store(db, create=False), Store(copy, create=False)
    assert a.attempts() == b.attempts()
    assert [r["provenance"] for r in a.runs()] == [r["provenance"] for r in b.runs()]
    assert "ceilings" in b.runs()[0]["provenance"]
    a.close()
    b.close()


# ---- --tag on show and export --------------------------------------------------------------------

@pytest.fixture
def tagged(tmp_path):
    """A store with two sweeps: tag 'a' (backend fast, run of 100 s) and tag 'b' (backend slow, 1000 s),
    and a run of tag 'c' that wrote no attempt."""
    db = tmp_path / "t.sqlite"
    s = Store(db)
    for run_id, tag, end in (("run-a", "a", "2026-01-01T00:01:40Z"), ("run-b", "b", "2026-01-01T00:16:40Z"),
                             ("run-c", "c", "2026-01-01T00:00:05Z")):
        s.ensure_run({"run_id": run_id, "tag": tag, "grid": "g", "argv": "attnbench run", "device_name": "CPU test",
                      "started_at": "2026-01-01T00:00:00Z", "finished_at": end, "provenance": {}})
    s.insert_many([make_row(0, backend="fast", run_id="run-a", tag="a", attempt_key="k-a0"),
                   make_row(1, backend="fast", run_id="run-a", tag="a", attempt_key="k-a1"),
                   make_row(0, backend="slow", run_id="run-b", tag="b", attempt_key="k-b0", median_us=500.0,
                            p95_us=500.0, samples_us=[500.0] * 12)])
    s.close()
    return db


def test_show_keeps_the_attempts_of_the_given_tags(cli, tagged):
    res = cli("show", "--db", tagged, "--tag", "a", "--status")
    assert res.rc == 0, res.err
    out = " ".join(res.out.split())
    assert "2 attempts (OK 2)" in out and "│ fast │" in out and "slow" not in out, out
    assert "sweep wall 100 s" in out, out  # run-b's 1000 s belong to the other tag
    res = cli("show", "--db", tagged, "--tag", "a", "--tag", "b")
    out = " ".join(res.out.split())
    assert res.rc == 0 and "3 attempts (OK 3)" in out and "sweep wall 1100 s" in out, out
    assert "│ slow │" in out


@pytest.mark.parametrize("argv,text", [
    (["show", "--tag", "nope"], "no attempts row has tag 'nope' (tags in attempts: a, b)"),
    (["show", "--tag", "a", "--tag", "A"], "tag 'A'"),
    (["show", "--tag", "c"], "tag 'c'"),  # a run of tag c exists, but no attempt
    (["export", "--tag", "nope", "--out", "{d}/o.jsonl"], "no attempts row has tag 'nope'"),
    (["export", "--tag", "a", "--tag", "zz", "--out", "{d}/o.csv"], "tag 'zz'"),
    (["export", "--tag", "c", "--out", "{d}/o.jsonl"], "tag 'c'"),
    (["export", "--table", "runs", "--tag", "nope", "--out", "{d}/r.jsonl"], "no runs row has tag 'nope'"),
])
def test_an_unknown_tag_is_bad_input_and_writes_nothing(cli, tagged, argv, text):
    d = tagged.parent
    before = files(d)
    res = cli(argv[0], "--db", tagged, *[a.format(d=d) for a in argv[1:]])
    assert_usage_error(res, d, before, text)


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_export_keeps_the_rows_of_the_given_tags(cli, tagged, tmp_path, fmt):
    out = tmp_path / f"a.{fmt}"
    res = cli("export", "--db", tagged, "--tag", "a", "--out", out)
    assert res.rc == 0 and "wrote 2 attempts" in res.err, res.err
    assert sorted(r["attempt_key"] for r in io.read_rows(out)) == ["k-a0", "k-a1"]
    res = cli("export", "--db", tagged, "--tag", "b", "--tag", "a", "--out", out)
    assert res.rc == 0 and {r["tag"] for r in io.read_rows(out)} == {"a", "b"}
    runs = tmp_path / f"runs.{fmt}"
    res = cli("export", "--db", tagged, "--table", "runs", "--tag", "c", "--out", runs)
    assert res.rc == 0 and "wrote 1 runs" in res.err, res.err
    assert [r["run_id"] for r in io.read_rows(runs, table="runs")] == ["run-c"]


def test_show_and_export_help_document_tag(cli):
    for sub in ("show", "export"):
        text = " ".join(cli(sub, "--help").out.split())
        assert "--tag TAG" in text and "repeatable" in text, text


def test_backends_json_lists_kernel_families_per_device_type(cli):
    from attnbench.backends.registry import all_backends

    res = cli("backends", "--json", "--plugin", FAKES)
    assert res.rc == 0, res.err
    by = {r["name"]: r for r in json.loads(res.out)}
    assert by["sdpa-flash"]["kernel_families"] == {"cpu": ["pytorch-flash-cpu"], "cuda": ["pytorch-flash"]}
    assert by["sdpa-efficient"]["kernel_families"] == {"cuda": ["cutlass-fmha"]}
    assert by["fake-liar"]["kernel_families"] == {"cpu": ["pytorch-flash-cpu"], "cuda": ["pytorch-flash"]}
    assert "cudnn" in by["sdpa-math"]["kernel_patterns"] and by["fake-good"]["kernel_patterns"] == []
    for b in all_backends([FAKES]):
        assert by[b.name]["kernel_families"] == {t: sorted(f) for t, f in b.kernel_families.items()}, b.name
        assert by[b.name]["kernel_patterns"] == [f.name for f in b.kernel_patterns], b.name


@pytest.mark.slow
def test_min_time_samples_every_ok_row_for_at_least_the_floor_and_records_it(tmp_path):
    """A CPU run with --min-time 0.05: every OK row's samples x calls add up to 50 ms at least (its
    median converged long before), and the run's provenance holds the rule's settings."""
    from attnbench.cli.main import main

    db = tmp_path / "floor.sqlite"
    grid = tmp_path / "tiny.yaml"
    grid.write_text(TINY_GRID)
    assert main(["run", "--repeats", "1", "--config", str(grid), "--modes", "prefill", "--backends", "sdpa-math",
                 "--db", str(db), "--device", "cpu", "--min-time", "0.05"]) == 0
    s = Store(db, create=False)
    rows = [r for r in s.attempts() if r["status"] == "OK"]
    timing_cfg = s.runs()[0]["provenance"]["timing"]
    s.close()
    assert rows and timing_cfg["min_time_s"] == 0.05 and timing_cfg["max_time_s"] >= 0.1
    for r in rows:
        samples = json.loads(r["samples_us"]) if isinstance(r["samples_us"], str) else r["samples_us"]
        assert sum(samples) * r["calls_per_sample"] / 1e6 >= 0.05


def test_import_of_a_runs_export_as_attempts_says_which_table_it_is(cli, tmp_path):
    (tmp_path / "r.runs.jsonl").write_text('{"run_id": "r1", "tag": "default", "provenance": "{}"}\n')
    res = cli("import", tmp_path / "r.runs.jsonl", "--db", tmp_path / "new.sqlite")
    assert res.rc == 2 and "--table runs" in res.err and len(res.err.strip().splitlines()) == 1
    assert not (tmp_path / "new.sqlite").exists()
    assert cli("import", tmp_path / "r.runs.jsonl", "--table", "runs", "--db", tmp_path / "new.sqlite").rc == 0


@pytest.mark.parametrize("stop,rc,left", [
    (KeyboardInterrupt, 130, ["s.sqlite.log"]),  # not bad input: what the workers logged stays
    ("cluster", 2, []),  # bad input (a cluster that cannot serve the run): nothing at all
])
def test_a_run_stopped_before_its_first_row_leaves_no_store(cli, tmp_path, monkeypatch, stop, rc, left):
    """Interrupted or refused while its workers start: the store this command created holds no run
    and no attempt, so it is removed (a resumed run starts from nothing either way)."""
    from attnbench.runner.executors.local import LocalExecutor
    from attnbench.runner.executors.ray import ClusterError

    def start(self, device, backends):
        with open(self.cfg.log_path, "a") as f:
            f.write("a worker's line\n")  # what a worker logs while starting
        raise ClusterError("the cluster has no such device") if stop == "cluster" else stop()

    monkeypatch.setattr(LocalExecutor, "start", start)
    res = cli("run", "--device", "cpu", "--backends", "reference", "--db", tmp_path / "s.sqlite")
    assert res.rc == rc, res.err
    assert sorted(p.name for p in tmp_path.iterdir()) == left


def test_a_run_stopped_while_starting_leaves_an_existing_store_as_it_was(cli, tmp_path, monkeypatch):
    from attnbench.runner.executors.local import LocalExecutor

    db = tmp_path / "s.sqlite"
    Store(db).close()  # a store without rows, made before this command
    monkeypatch.setattr(LocalExecutor, "start", lambda self, device, backends: (_ for _ in ()).throw(KeyboardInterrupt))
    res = cli("run", "--device", "cpu", "--backends", "reference", "--db", db)
    assert res.rc == 130 and db.exists() and rows_of(db) == []


@pytest.mark.slow
def test_a_sweeps_compiler_cache_is_kept_beside_its_store_until_the_sweep_has_finished(cli, tmp_path, monkeypatch):
    """An interrupted run leaves its compiler cache (<db>.compile-cache) for the resumed run, which loads
    what the first compiled (provenance: kind 'resumed') and removes it once every attempt has a row; a
    run that finishes at once leaves none; --compile-cache DIR is the user's and stays."""
    import itertools
    from pathlib import Path

    from attnbench.runner.executors.local import LocalExecutor

    (tmp_path / "tiny.yaml").write_text(TINY_GRID)
    db, cache = tmp_path / "s.sqlite", tmp_path / "s.sqlite.compile-cache"
    real_run, seen = LocalExecutor.run, []

    def run_one_then_interrupt(self, attempts, sink, *rest):
        seen.append(self.cache_dir)
        Path(self.cache_dir, "inductor").mkdir(parents=True)
        Path(self.cache_dir, "inductor", "kernel").write_text("compiled")  # what a compiler left there
        real_run(self, itertools.islice(attempts, 1), sink, *rest)
        raise KeyboardInterrupt

    argv = ("run", "--config", tmp_path / "tiny.yaml", "--repeats", "1", "--device", "cpu", "--backends", "reference",
            "--max-time", "0.05", "--db", db)
    monkeypatch.setattr(LocalExecutor, "run", run_one_then_interrupt)
    res = cli(*argv)
    assert res.rc == 130 and f"compiled code kept for the resume: {cache}" in res.err
    assert len(rows_of(db)) == 1 and (cache / "inductor" / "kernel").read_text() == "compiled"
    assert seen == [str(cache.resolve())]

    monkeypatch.setattr(LocalExecutor, "run", lambda self, *a: (seen.append(self.cache_dir), real_run(self, *a))[1])
    res = cli(*argv)
    assert res.rc == 0, res.err
    assert len(rows_of(db)) == 2 and seen[-1] == str(cache.resolve()) and not cache.exists()
    first, resumed = (r["provenance"]["compile_cache"] for r in Store(db, readonly=True).runs())
    assert first == {"kind": "fresh", "dir": str(cache.resolve()), "kept": True}
    assert resumed == {"kind": "resumed", "dir": str(cache.resolve()), "kept": True}

    (tmp_path / "f.sqlite.compile-cache").write_text("not a directory")
    res = cli(*argv[:-1], tmp_path / "f.sqlite")
    assert res.rc == 2 and "not a directory" in res.err and not (tmp_path / "f.sqlite").exists()

    named = tmp_path / "mine"
    other = tmp_path / "o.sqlite"
    assert cli(*argv[:-1], other, "--compile-cache", named).rc == 0
    assert seen[-1] == str(named.resolve()) and not (tmp_path / "o.sqlite.compile-cache").exists()
    assert Store(other, readonly=True).runs()[0]["provenance"]["compile_cache"]["kind"] == "named"
