"""The optional libraries' backends on a GPU (issue 12): every one whose library is importable runs a
small grid through the CLI; its rows are OK or refused with a reason, OK rows ran a declared kernel
family and carry the library's version. Skipped without CUDA; a backend whose library is absent is
skipped with its availability line."""
from __future__ import annotations

import json
import sqlite3

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]

NEW = ("fa4", "fa2", "fa3", "flashinfer-prefill", "flashinfer-decode", "cudnn-fe", "jax-xla", "jax-cudnn", "xformers")
GRID = """
name: gpu-libraries
workloads:
  - {mode: prefill, batch: 2, q_len: 512, kv_len: 1k, q_heads: 16, kv_heads: 4, head_dim: 128, causal: true}
  - {mode: prefill, batch: 1, seqlen: 1k, q_heads: 16, kv_heads: 4, head_dim: 128, causal: true, causal_align: top_left}
  - {mode: prefill, batch: 2, seqlen: 1k, q_heads: 16, kv_heads: 16, head_dim: 64, layout: BNHD}
  - {mode: decode, batch: 4, kv_len: 2k, q_heads: 16, kv_heads: 4, head_dim: 128}
  - {mode: train_fwd_bwd, batch: 2, seqlen: 512, q_heads: 16, kv_heads: 4, head_dim: 128, causal: true}
"""


@pytest.mark.parametrize("name", NEW)
def test_library_backend_on_gpu(tmp_path, name):
    from attnbench.backends.registry import builtin
    from attnbench.cli.main import main

    b = {x.name: x for x in builtin()}[name]
    why = b.availability()
    if why:
        pytest.skip(why)
    cfg = tmp_path / "grid.yaml"
    cfg.write_text(GRID)
    db = tmp_path / "gpu.sqlite"
    assert main(["run", "--repeats", "1", "--config", str(cfg), "--device", "cuda", "--db", str(db), "--backends", name,
                 "--dtype", "bf16", "--timeout", "600"]) == 0
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    rows = [dict(r) for r in con.execute("SELECT * FROM attempts")]
    declared = b.expected_kernels("cuda")
    assert rows and all(r["status"] in ("OK", "UNSUPPORTED") for r in rows), \
        [(r["mode"], r["status"], r["reason"]) for r in rows]
    ok = [r for r in rows if r["status"] == "OK"]
    assert ok, [(r["mode"], r["reason"]) for r in rows]
    for r in ok:
        assert r["backend_version"] == b.version()
        seen = set(json.loads(r["dispatch_families"]))
        assert seen & declared, (r["mode"], seen, json.loads(r["dispatch_kernels"])[:5])
