#!/usr/bin/env bash
# Issues 12 and 13 on a two-H200 host, in steps of one device call each, run back to back (the
# machine keeps /tmp only while warm). Stores live in /tmp/ab and are copied to $OUT after each step.
#   STEP=stage PART=p1        copy out/stage-fa4/$PART into /tmp/stage (carry out/stage-fa4/$PART)
#   STEP=a                    install the staged wheels; GPU 1: library GPU tests and the quick grid
#                             for the library backends; GPU 0: the seven built-in backends' quick grid,
#                             3 repeats, on one GPU (wall / timed samples; the one-GPU wall)
#   STEP=b                    both GPUs: the quick grid sharded (3 repeats), then with --replicate
#                             (1 repeat); analyze of the replicate store by GPU (the noise floor)
#   STEP=c                    GPU 1: the features grid for the library backends (and the rest of the
#                             quick grid, if step a cut it), anchors; GPU 0: tests/test_gpu.py
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/ab
export PYTHONUNBUFFERED=1 COLUMNS=${COLUMNS:-160}
LIBS=${LIBS:-fa4,cudnn-fe,xformers,flashinfer-prefill,flashinfer-decode,sdpa-cudnn}
site() {
  if [ -x /tmp/stage/install-staged ] && [ ! -d /tmp/site ]; then /tmp/stage/install-staged > /tmp/ab/site.sh; fi
  [ -f /tmp/ab/site.sh ] && source /tmp/ab/site.sh
  export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
}
keep() { cp /tmp/ab/*.sqlite /tmp/ab/*.txt "$OUT"/ 2>/dev/null; true; }
case ${STEP:?STEP=stage|a|b|c} in
  stage)
    mkdir -p /tmp/stage && cp "out/stage-fa4/${PART:?}"/* /tmp/stage/ && ls /tmp/stage | wc -l ;;
  a)
    site
    ( export CUDA_VISIBLE_DEVICES=1
      python3 -m attnbench backends 2>&1 | tail -22
      timeout ${TEST_LIMIT:-170} taskset -c 16-31 python3 -m pytest -q -m gpu tests/test_gpu_backends.py \
        -p no:cacheprovider 2>&1 | tail -15
      timeout ${LIB_LIMIT:-360} taskset -c 16-31 python3 -m attnbench run --grid quick --device cuda \
        --backends "$LIBS" --db /tmp/ab/libraries.sqlite 2>&1 | tail -3 ) > /tmp/ab/lib-a.txt 2>&1 &
    CUDA_VISIBLE_DEVICES=0 PHASES=one DB_DIR=/tmp/ab PHASE_LIMIT=${ONE_LIMIT:-555} \
      taskset -c 0-15 bash scripts/h200_multi.sh 2>&1 | tail -12
    wait; cat /tmp/ab/lib-a.txt; keep ;;
  b)
    site
    PHASES="shard replicate" REPEATS_replicate=1 DB_DIR=/tmp/ab LIMIT_shard=${SHARD_LIMIT:-320} \
      LIMIT_replicate=${REPLICATE_LIMIT:-220} \
      bash scripts/h200_multi.sh 2>&1 | tail -14
    python3 -m attnbench analyze --by device_uuid /tmp/ab/multi-replicate.sqlite --md /tmp/ab/replicate-analyze.md \
      2>&1 | tail -30
    keep; cp /tmp/ab/replicate-analyze.md "$OUT"/ ;;
  c)
    site
    ( export CUDA_VISIBLE_DEVICES=1
      timeout ${FEAT_LIMIT:-300} taskset -c 16-31 python3 -m attnbench run --grid features --device cuda \
        --backends "$LIBS,jax-xla,jax-cudnn,flex,sdpa-flash,reference" --db /tmp/ab/libraries.sqlite 2>&1 | tail -3
      timeout ${LIB_LIMIT:-150} taskset -c 16-31 python3 -m attnbench run --grid quick --device cuda \
        --backends "$LIBS" --db /tmp/ab/libraries.sqlite 2>&1 | tail -3
      python3 -m attnbench show --db /tmp/ab/libraries.sqlite --status 2>&1 | tail -30
      python3 scripts/library_anchors.py /tmp/ab/libraries.sqlite ) > /tmp/ab/lib-c.txt 2>&1 &
    CUDA_VISIBLE_DEVICES=0 timeout ${GPU_TEST_LIMIT:-300} taskset -c 0-15 python3 -m pytest -q -m gpu \
      tests/test_gpu.py -p no:cacheprovider 2>&1 | tail -15
    wait; cat /tmp/ab/lib-c.txt; keep ;;
  d)
    # after a cold restart: the features grid for the staged libraries on GPU 0; xformers on GPU 1
    # from a site of its own (FA4's flash_attn namespace package makes xformers import
    # flash_attn.flash_attn_interface and fail)
    site
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site-xf /tmp/stage/xformers-*.whl
    NG=$(nvidia-smi -L | wc -l); XG=$((NG - 1)); XC=$([ "$NG" -gt 1 ] && echo 16-31 || echo 0-15)
    ( [ "$NG" -gt 1 ] || sleep ${FEAT_LIMIT:-240}  # one GPU: after the features run
      export CUDA_VISIBLE_DEVICES=$XG PYTHONPATH=$PWD/src:/tmp/site-xf
      python3 -m attnbench backends 2>&1 | grep -i xformers
      timeout ${XF_LIMIT:-150} taskset -c $XC python3 -m attnbench run --grid quick --repeats 1 --device cuda \
        --backends xformers,sdpa-efficient --db /tmp/ab/xformers.sqlite 2>&1 | tail -2
      timeout ${XF_FEAT_LIMIT:-90} taskset -c $XC python3 -m attnbench run --grid features --repeats 1 --device cuda \
        --backends xformers,sdpa-efficient --db /tmp/ab/xformers.sqlite 2>&1 | tail -2
      timeout 60 taskset -c $XC python3 -m pytest -q -m gpu tests/test_gpu_backends.py -k xformers \
        -p no:cacheprovider 2>&1 | tail -2 ) > /tmp/ab/xf.txt 2>&1 &
    CUDA_VISIBLE_DEVICES=0 timeout ${FEAT_LIMIT:-240} taskset -c 0-15 python3 -m attnbench run --grid features \
      --repeats 1 --device cuda --backends fa4,cudnn-fe,sdpa-cudnn,sdpa-flash,flex,reference,jax-cudnn,jax-xla \
      --db /tmp/ab/features.sqlite 2>&1 | tail -2
    wait; cat /tmp/ab/xf.txt; python3 -m attnbench show --db /tmp/ab/features.sqlite --status 2>&1 | tail -14
    keep ;;
esac
