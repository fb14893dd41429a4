"""`attnbench referee`: the readers of published results, the mapping and its refusals, the verdict, the table."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from attnbench.analysis.referee import ReadError, read
from attnbench.analysis.referee.compare import AGREES, CANNOT, FASTER, SLOWER, verdict
from attnbench.analysis.referee.cudnn_frontend import tril_pairs
from attnbench.workloads.cost import flops, io_bytes

FIX = Path(__file__).parent / "fixtures" / "referee"
TRAINING, INFERENCE = FIX / "cudnn_fe_h200_training.csv", FIX / "cudnn_fe_h200_inference.csv"
FLASH, TRITON = FIX / "flash_attn_format.txt", FIX / "tritonbench_format.csv"


def mapped(sheet):
    return [r for r in sheet.rows if r.workload is not None]


def test_cudnn_frontend_training_rows_map_and_reproduce_their_own_figures():
    sheet = read(TRAINING)
    assert sheet.fmt == "cudnn-frontend training CSV"
    rows = mapped(sheet)
    assert [(r.row, r.passname) for r in rows] == [(1, "fwd"), (1, "fwd+bwd"), (2, "fwd"), (2, "fwd+bwd")]
    fwd = rows[0]
    w = fwd.workload
    assert (w.mode, w.batch, w.q_len, w.q_heads, w.kv_heads, w.head_dim, w.dtype) == \
        ("train_fwd", 1, 8192, 64, 8, 128, "bf16")
    assert (w.causal, w.causal_align, w.layout, w.l2, w.launch) == (True, "top_left", "BNHD", "cold", "eager")
    assert fwd.backends == ("sdpa-cudnn", "cudnn-fe") and fwd.gpu == "NVIDIA H200"
    assert fwd.toolkit == {"cuDNN": "9.19.1", "cudnn-frontend": "1.19.0"}
    assert fwd.time_ms == pytest.approx(1.708) and fwd.figure == 644.0
    assert rows[1].workload.mode == "train_fwd_bwd" and rows[1].time_ms == pytest.approx(1.708 + 5.083)
    # the publisher's FLOP model as read here gives back its own published TFLOP/s from its own time
    for r in (rows[0], rows[2]):
        assert r.publisher_amount / r.time_ms / 1e9 == pytest.approx(r.figure, rel=0.01)
    # without a mask both models count the same; a square top-left causal mask differs by (N+1)/N only
    assert rows[2].publisher_amount == pytest.approx(flops(rows[2].workload))
    assert rows[3].publisher_amount == pytest.approx(flops(rows[3].workload))  # bwd 2(3D+2D) = 2.5 x fwd at Dqk = Dv
    assert rows[0].publisher_amount == pytest.approx(flops(rows[0].workload), rel=1e-9)
    # the fp8 row is refused, with its reason, for both passes
    fp8 = [r for r in sheet.rows if r.row == 3]
    assert len(fp8) == 2 and all("fp8" in r.refusal for r in fp8)


def test_cudnn_frontend_rows_per_pass_pair_forward_and_backward():
    """The layout of 2026-04 on: a backward row with the forward row of its configuration is fwd+bwd."""
    sheet = read(FIX / "cudnn_fe_gb200_training_per_pass.csv")
    rows = {(r.row, r.harness_backend, r.passname): r for r in sheet.rows}
    fwd, both = rows[(1, "cudnn", "fwd")], rows[(2, "cudnn", "fwd+bwd")]
    assert fwd.time_ms == 2.586 and both.time_ms == pytest.approx(2.586 + 7.668)
    assert both.workload.mode == "train_fwd_bwd" and both.gpu == "NVIDIA GB200"
    assert fwd.publisher_amount / fwd.time_ms / 1e9 == pytest.approx(1701, rel=0.01)
    assert "deterministic" in rows[(3, "cudnn", "fwd+bwd")].refusal
    assert "failed (UNSUPPORTED_CONFIG" in rows[(4, "cudnn_oss", "bwd")].refusal
    fa4 = rows[(6, "flash_attention_4", "fwd+bwd")]
    assert fa4.backends == ("fa4",) and fa4.time_ms == pytest.approx(3.505 + 7.081) and fa4.toolkit == {}


def test_cudnn_frontend_2025_layout_names_its_gpu_in_the_file_name():
    sheet = read(FIX / "legacy" / "sdpa_bf16_benchmark_results_NVIDIA_GB200.csv")
    rows = mapped(sheet)
    assert {r.gpu for r in sheet.rows} == {"NVIDIA GB200"}
    first = rows[0]
    assert (first.workload.q_heads, first.workload.causal, first.workload.causal_align) == (128, True, "top_left")
    assert first.publisher_amount / first.time_ms / 1e9 == pytest.approx(1584, rel=0.01)
    assert [r.backends for r in rows[2:]] == [("sdpa-flash",), ("sdpa-flash",)]
    assert all("fp8" in r.refusal for r in sheet.rows if r.row == 3)


def test_cudnn_frontend_inference_rows_map_decode_and_prefill():
    sheet = read(INFERENCE)
    assert sheet.fmt == "cudnn-frontend inference CSV"
    by_row = {r.row: r for r in sheet.rows}
    assert all(r.refusal is None for r in sheet.rows)
    ctx, chunk, dec = by_row[1].workload, by_row[2].workload, by_row[5].workload
    assert (ctx.mode, ctx.causal, ctx.causal_align, ctx.launch) == ("prefill", True, "top_left", "eager")
    assert (chunk.q_len, chunk.kv_len, chunk.causal_align) == (512, 65536, "bottom_right")
    assert (dec.mode, dec.batch, dec.q_len, dec.kv_len, dec.launch, dec.l2, dec.page_size) == \
        ("decode", 32, 1, 32768, "graph", "cold", 0)
    spec = by_row[6].workload  # generation with 8 new tokens: a bottom-right causal prefill of Nq 8
    assert (spec.mode, spec.q_len, spec.causal, spec.causal_align) == ("prefill", 8, True, "bottom_right")
    assert by_row[5].unit == "GB/s" and by_row[1].unit == "TFLOP/s"
    assert by_row[5].toolkit == {"cuDNN": "9.27.0"}
    for r in sheet.rows:  # the publisher's model, as read here, gives back its own published figures
        scale = 1e6 if r.unit == "GB/s" else 1e9
        assert r.publisher_amount / r.time_ms / scale == pytest.approx(r.figure, rel=0.01)
    # decode bytes: the publisher's count is attnbench's; the chunked prefill counts every pair, attnbench the
    # unmasked ones only
    assert by_row[5].publisher_amount == pytest.approx(io_bytes(dec))
    assert by_row[2].publisher_amount / flops(chunk) == pytest.approx(512 * 65536 / (512 * 65536 - 512 * 511 / 2))


def test_flash_attention_output_lines():
    sheet = read(FLASH)
    assert sheet.fmt == "FlashAttention benchmark output"
    rows = mapped(sheet)
    assert [(r.row, r.passname) for r in rows] == [(2, "fwd"), (2, "fwd+bwd"), (5, "fwd"), (5, "fwd+bwd")]
    big = rows[2]
    assert (big.workload.batch, big.workload.q_heads, big.workload.head_dim, big.workload.causal) == (32, 32, 64, True)
    assert big.workload.dtype == "fp16" and big.workload.l2 == "warm" and big.gpu is None
    assert big.backends == ("fa2", "sdpa-flash")
    f = 4 * 32 * 512 ** 2 * 32 * 64 // 2
    assert big.time_ms == pytest.approx(f / 150e12 * 1e3)
    refused = {r.harness_backend: r.refusal for r in sheet.rows if r.refusal}
    assert "unfused" in refused["Pytorch"] and "triton.ops" in refused["Triton"]
    tiny = read(FLASH, {"dim": "32", "dtype": "bf16"}, gpu="NVIDIA H100")
    assert mapped(tiny)[0].workload.q_heads == 2 and mapped(tiny)[0].workload.dtype == "bf16"
    assert mapped(tiny)[0].gpu == "NVIDIA H100" and "GPU NVIDIA H100 (--gpu)" in tiny.notes[0]


def test_tritonbench_csv():
    sheet = read(TRITON)
    assert sheet.fmt == "tritonbench flash_attention CSV"
    rows = {(r.row, r.harness_backend): r for r in sheet.rows}
    sdpa = rows[(1, "sdpa")]
    assert sdpa.backends == ("sdpa-flash",) and sdpa.time_ms == 0.25
    assert sdpa.spread_ms == pytest.approx((0.25 * 0.988, 0.25 * 1.012))
    assert (sdpa.workload.batch, sdpa.workload.q_heads, sdpa.workload.q_len, sdpa.workload.layout) == \
        (4, 48, 1024, "BHND")
    cudnn = rows[(2, "cudnn-91900")]
    assert cudnn.backends == ("sdpa-cudnn",) and cudnn.toolkit == {"cuDNN": "9.19.0"}
    assert "unfused" in rows[(1, "aten")].refusal
    assert "no attnbench counterpart" in rows[(1, "triton_tutorial_flash_v2")].refusal
    causal = read(TRITON, {"causal": "true", "mode": "fwd_bwd"})
    c = [r for r in causal.rows if r.harness_backend == "sdpa"][0]
    assert c.workload.causal and c.workload.mode == "train_fwd_bwd"
    assert c.publisher_amount == pytest.approx(sdpa.publisher_amount * 0.5 * 3.5)


TRAINING_HEADER = TRAINING.read_text().splitlines()[0]


@pytest.mark.parametrize("cells, passes, text", [
    ({"success": "False", "error_message": "Traceback\nRuntimeError: out of memory"}, 2, "failed (RuntimeError: out"),
    ({"backend": "b12x"}, 2, "no attnbench counterpart"),
    ({"profile_pass": "bwd"}, 1, "backward alone"),
    ({"attn_mask": "padding"}, 2, "attn_mask 'padding'"),
    ({"data_type": "mxfp8"}, 2, "data_type mxfp8"),
    ({"num_q_heads": "60"}, 2, "not a multiple of kv_heads"),
])
def test_training_rows_that_cannot_be_mapped_are_refused_with_their_reason(tmp_path, cells, passes, text):
    cols = TRAINING_HEADER.split(",")
    row = dict(zip(cols, TRAINING.read_text().splitlines()[2].split(",")))
    row.update(cells)
    f = tmp_path / "t.csv"
    import csv

    with f.open("w", newline="") as fh:
        w = csv.DictWriter(fh, cols)
        w.writeheader()
        w.writerow(row)
    sheet = read(f)
    assert len(sheet.rows) == passes and all(r.workload is None and text in r.refusal for r in sheet.rows)


def test_deterministic_backward_refuses_the_backward_pass_only(tmp_path):
    lines = TRAINING.read_text().splitlines()
    f = tmp_path / "t.csv"
    f.write_text(lines[0] + "\n" + lines[2].replace(",both,False,", ",both,True,") + "\n")
    rows = read(f).rows
    assert rows[0].refusal is None and "deterministic" in rows[1].refusal


@pytest.mark.parametrize("cells, text", [
    ({"kind": "mla_absorbed"}, "absorbed-MLA"),
    ({"kv_cache_dtype": "fp8_e4m3"}, "one dtype"),
    ({"backend": "flash_mla"}, "no attnbench counterpart"),
])
def test_inference_rows_that_cannot_be_mapped_are_refused(tmp_path, cells, text):
    import csv

    lines = INFERENCE.read_text().splitlines()
    cols = lines[0].split(",")
    row = dict(zip(cols, lines[3].split(",")))
    row.update(cells)
    f = tmp_path / "i.csv"
    with f.open("w", newline="") as fh:
        w = csv.DictWriter(fh, cols)
        w.writeheader()
        w.writerow(row)
    (r,) = read(f).rows
    assert r.workload is None and text in r.refusal


@pytest.mark.parametrize("content, text", [
    ("", "is empty"),
    ("a,b,c\n1,2,3\n", "is none of"),
    ("config_name,backend,profile_pass,fwd_time_ms\nx,cudnn,fwd,1\n", "without the column"),
    ("Flash2 fwd: 1.00 TFLOPs/s, bwd: 1.00 TFLOPs/s, fwd + bwd: 1.00 TFLOPs/s\n", "before any"),
])
def test_a_file_no_reader_takes_is_one_line(tmp_path, content, text):
    f = tmp_path / "x.txt"
    f.write_text(content)
    with pytest.raises(ReadError, match=text):
        read(f)


def test_the_pairs_the_training_suite_counts():
    # torch.tril(ones(q, kv)).sum(), written out
    for q, kv in ((4, 4), (3, 5), (5, 3), (1, 7)):
        assert tril_pairs(q, kv) == sum(min(i + 1, kv) for i in range(q))
    assert tril_pairs(6, 6, window=2) == 1 + 2 * 5


@pytest.mark.parametrize("pub, ours, lo, hi, spread, expect", [
    (1.00, 1.02, 0.99, 1.05, None, AGREES),  # within 10 %, the published time inside our p5-p95
    (1.00, 1.02, 1.015, 1.03, None, SLOWER),  # within 10 %, our whole interval slower
    (1.00, 1.02, 1.015, 1.03, (0.97, 1.018), AGREES),  # ... but the published interval reaches ours
    (1.00, 0.85, 0.70, 1.10, None, FASTER),  # overlapping, yet beyond 10 %
    (1.00, 1.20, 1.19, 1.21, None, SLOWER),
])
def test_verdict(pub, ours, lo, hi, spread, expect):
    assert verdict(pub, ours, lo, hi, spread)[0] == expect


def known_store(tmp_path) -> Path:
    """A store of known rows of the training fixture's workloads (conftest's plausible rows, re-shaped)."""
    from conftest import make_row

    from attnbench.store.db import Store

    by = {(r.row, r.passname): r.workload for r in read(TRAINING).rows if r.workload}
    h200 = "NVIDIA H200"
    known = [  # (published row, pass, backend, device, samples in us)
        (2, "fwd", "sdpa-cudnn", h200, [3150, 3160, 3170, 3180, 3190]),  # published 3.182 ms: inside our p5-p95
        (2, "fwd+bwd", "sdpa-cudnn", h200, [10990, 11000, 11010]),  # published 12.444 ms: 1.13x faster here
        (2, "fwd+bwd", "cudnn-fe", h200, [12795, 12800, 12805]),  # within 10 %, our interval all slower
        (1, "fwd", "sdpa-cudnn", "NVIDIA A100-SXM4-80GB", [2990, 3000, 3010]),  # published 1.708 ms, another GPU
    ]
    rows = []
    for i, (row, passname, backend, device, samples) in enumerate(known):
        w = by[(row, passname)]
        rows.append(make_row(i, **{**w.to_dict(), "causal": int(w.causal), "decode_append": None},
                             workload_key=w.key(), backend=backend, device_name=device, samples_us=samples,
                             median_us=sorted(samples)[len(samples) // 2], p95_us=max(samples), tag="referee",
                             repeat=0, kernel_us=9000.0 if (row, passname, backend) == (2, "fwd+bwd", "sdpa-cudnn")
                             else None))
    db = tmp_path / "known.sqlite"
    s = Store(db)
    s.start_run("run-a", "referee", "referee", "attnbench referee", h200, {"ceilings": {}})
    s.insert_many(rows)
    s.finish_run("run-a")
    s.close()
    return db


def test_verdicts_from_a_store_of_known_rows(tmp_path, cli):
    db = known_store(tmp_path)
    out = tmp_path / "ref.json"
    res = cli("referee", TRAINING, "--no-run", "--db", db, "--json", out)
    assert res.rc == 0, res.err
    got = {(c["row"], c["pass"], c["backend"]): c for c in json.loads(out.read_text())["comparisons"]}
    agree = got[(2, "fwd", "sdpa-cudnn")]
    assert agree["verdict"] == AGREES and agree["ratio"] == pytest.approx(3.182 / 3.170)
    assert agree["ours"]["figure"] == pytest.approx(agree["published"]["in_attnbench_model"] * 3.182 / 3.170)
    assert got[(2, "fwd+bwd", "sdpa-cudnn")]["verdict"] == FASTER
    assert got[(2, "fwd+bwd", "sdpa-cudnn")]["ours"]["kernel_ms"] == 9.0  # timed 1.22x its kernels: noted
    assert "our call's kernels take 9 ms of its 11 ms" in " ".join(res.out.split())
    assert got[(2, "fwd+bwd", "cudnn-fe")]["verdict"] == SLOWER
    other = got[(1, "fwd", "sdpa-cudnn")]
    assert other["verdict"] == CANNOT and other["ratio"] == pytest.approx(1.708 / 3.0)
    assert "A100" in other["why"]
    assert got[(1, "fwd", "cudnn-fe")]["verdict"] == CANNOT and got[(1, "fwd", "cudnn-fe")]["ours"]["status"] is None
    assert any("fp8" in line for line in json.loads(out.read_text())["refused"])
    # the terminal: the verdicts, the refusal, the workload legend
    assert "agrees" in res.out and "faster here" in res.out and "refused: row 3 cudnn fwd/fwd+bwd" in res.out
    assert "row 2: B1 Nq8192 Nkv8192 H64/8" in res.out


def test_the_table_fits_80_columns(tmp_path, cli, monkeypatch):
    from rich.console import Console

    from attnbench.cli import console

    db = known_store(tmp_path)
    monkeypatch.setattr(console, "out", Console(width=80, record=True))
    res = cli("referee", TRAINING, "--no-run", "--db", db)
    assert res.rc == 0
    text = console.out.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    # a verdict is never folded over two lines
    assert all("cannot" not in line or "cannot compare" in line for line in text.splitlines())


@pytest.mark.parametrize("args, text", [
    (["nothing.csv"], "cannot read"),
    ([str(FIX / "README.md")], "is none of"),
    ([str(TRAINING), "--json", str(TRAINING)], "is the file read"),
    ([str(TRAINING), "--json", "referee.sqlite", "--no-run"], "is a SQLite database"),
    ([str(TRAINING), "--backends", "fa4"], "not among this file's mapped backends"),
    ([str(TRAINING), "--assume", "dim=1"], "says everything itself"),
    ([str(FLASH), "--assume", "heads=3"], "takes dim, dtype"),
    ([str(TRAINING), "--no-run", "--db", "absent.sqlite"], "store not found"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, cli, monkeypatch, args, text):
    monkeypatch.chdir(tmp_path)
    res = cli("referee", *args)
    assert res.rc == 2 and text in res.err and len(res.err.strip().splitlines()) == 1
    assert not (tmp_path / "referee.sqlite").exists()


def test_end_to_end_on_cpu_through_the_runner(tmp_path, cli):
    """A tiny FlashAttention-output row re-measured by sdpa-flash on the CPU (fa2 refused there), resumed."""
    f = tmp_path / "fa.txt"
    f.write_text("### causal=False, headdim=16, batch_size=1, seqlen=64 ###\n"
                 "Flash2 fwd: 0.05 TFLOPs/s, bwd: 0.03 TFLOPs/s, fwd + bwd: 0.04 TFLOPs/s\n")
    db, out = tmp_path / "r.sqlite", tmp_path / "r.json"
    argv = ["referee", f, "--device", "cpu", "--db", db, "--repeats", "1", "--assume", "dim=32,dtype=bf16",
            "--max-time", "0.05", "--json", out]
    res = cli(*argv)
    assert res.rc == 0, res.err
    got = {(c["pass"], c["backend"]): c for c in json.loads(out.read_text())["comparisons"]}
    flash = got[("fwd", "sdpa-flash")]
    assert flash["ours"]["status"] == "OK" and flash["ratio"] > 0
    assert flash["verdict"] == CANNOT and "not stated" in flash["why"]  # no --gpu
    assert got[("fwd", "fa2")]["ours"]["status"] == "UNSUPPORTED"
    from conftest import rows_of

    n = len(rows_of(db))
    assert cli(*argv).rc == 0 and len(rows_of(db)) == n  # resumed: nothing measured twice


@pytest.mark.gpu
@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs CUDA")
def test_a_published_decode_row_is_re_measured_on_this_gpu(tmp_path, cli):
    """One small published-form decode row on the CUDA device: sdpa-cudnn's row is timed and judged against a
    published GPU named as this one (cudnn-fe: timed, or refused with its reason when not installed)."""
    import torch

    lines = INFERENCE.read_text().splitlines()
    row = lines[3].split(",")
    cols = lines[0].split(",")
    cells = dict(zip(cols, row))
    cells.update(batch_size="1", kv_len="1024", num_q_heads="8", num_kv_heads="1", time_ms="0.01",
                 gpu_name=torch.cuda.get_device_name())
    f = tmp_path / "one.csv"
    f.write_text(lines[0] + "\n" + ",".join(cells[c] for c in cols) + "\n")
    out = tmp_path / "one.json"
    res = cli("referee", f, "--device", "cuda", "--db", tmp_path / "r.sqlite", "--repeats", "1", "--max-time", "0.05",
              "--json", out)
    assert res.rc == 0, res.err
    got = {c["backend"]: c for c in json.loads(out.read_text())["comparisons"]}
    sdpa = got["sdpa-cudnn"]
    assert sdpa["ours"]["status"] in ("OK", "UNSUPPORTED"), sdpa
    if sdpa["ours"]["status"] == "OK":
        assert sdpa["verdict"] in (AGREES, FASTER, SLOWER) and sdpa["ratio"] > 0
        assert sdpa["workload"]["launch"] == "graph" and sdpa["workload"]["l2"] == "cold"
    assert got["cudnn-fe"]["ours"]["status"] in ("OK", "UNSUPPORTED")
