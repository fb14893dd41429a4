#!/usr/bin/env bash
# One H200: the graph-sampling GPU tests, then chunked graph samples against one sample per delay on
# the same graphs (scripts/graph_chunks.py): quick's decode graph rows and its first prefills captured
# as graphs (warm L2; cold-L2 samples are taken one a lead either way).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader
python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py -k "${TESTS:-chunked or graph_samples or hidden or real_backends}" \
  --tb=short > "$OUT/gpu-tests.txt" 2>&1; tail -3 "$OUT/gpu-tests.txt"
python3 scripts/graph_chunks.py --grid quick --where launch=graph --backends ${BACKENDS:-sdpa-flash,sdpa-cudnn,sdpa-efficient,flex} \
  --limit 24 --samples 100 --rounds 3 > "$OUT/chunks-warm.txt" 2>&1
python3 scripts/graph_chunks.py --grid quick --where mode=prefill --where batch=1 --backends sdpa-flash,sdpa-cudnn,flex \
  --limit 6 --samples 50 --rounds 3 > "$OUT/chunks-prefill.txt" 2>&1
tail -4 "$OUT/chunks-prefill.txt"
tail -4 "$OUT/chunks-warm.txt"
