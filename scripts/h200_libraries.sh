#!/usr/bin/env bash
# Issue 12 on one H200: the optional libraries' backends, installed from staged wheels.
#   Staging (../shared/device/stage-wheels OUT PKG==VER ...; folders of <= 55 MB): copy each folder
#   into /tmp/stage in back-to-back calls, e.g. `mkdir -p /tmp/stage && cp out/stage-fa4/p1/* /tmp/stage/`
#   with carry out/stage-fa4/p1; the last call runs this script, which runs /tmp/stage/install-staged.
#   1. the GPU tests of the library backends (tests/test_gpu_backends.py);
#   2. the quick grid (REPEATS, default 1) for the library backends and sdpa-cudnn beside them,
#      into $OUT/libraries.sqlite (resumable: run again to finish what LIMIT cut);
#   3. the features grid (windows, varlen, paged KV, fp8) for the same backends, same store;
#   4. each backend's throughput on ../shared/H200.md's anchor shapes (scripts/library_anchors.py).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 COLUMNS=${COLUMNS:-160}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
if [ -x /tmp/stage/install-staged ]; then
  eval "$(/tmp/stage/install-staged)"
  export PYTHONPATH=$PWD/src:$PYTHONPATH
fi
BK=${BACKENDS:-fa4,cudnn-fe,xformers,flashinfer-prefill,flashinfer-decode,jax-xla,jax-cudnn,sdpa-cudnn,flex}
python3 -m attnbench backends 2>&1 | tail -25
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  timeout ${TEST_LIMIT:-240} python3 -m pytest -q -m gpu tests/test_gpu_backends.py -p no:cacheprovider 2>&1 | tail -12
fi
timeout ${LIMIT:-300} python3 -m attnbench run --grid quick --repeats ${REPEATS:-1} --device cuda --backends "$BK" \
  --db "$OUT/libraries.sqlite" 2>&1 | tail -4
timeout ${FEATURES_LIMIT:-200} python3 -m attnbench run --grid features --repeats ${REPEATS:-1} --device cuda \
  --backends "$BK" --db "$OUT/libraries.sqlite" 2>&1 | tail -4
python3 -m attnbench show --db "$OUT/libraries.sqlite" --status 2>&1 | tail -30
python3 scripts/library_anchors.py "$OUT/libraries.sqlite"
