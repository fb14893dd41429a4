#!/usr/bin/env bash
# The `portability` grid with every built-in backend, three repeats, --min-time 0.55, on one H200,
# as 24 disjoint slices (dtype x head_dim x {causal prefill, non-causal prefill, decode eager/graph x
# kv_heads 8/32}), each one uninterrupted `attnbench run` of its own. It measured the first two
# (results/h200/portability): a slice pays start-up, worker starts and stops that one run pays once,
# so the rest of the grid is measured as segments of one resumed run (scripts/h200_segments.sh),
# which these slices' rows start (their attempt keys are the whole grid's).
#
# The first call of a session starts the slices not yet in results/h200/portability/ one after the
# other, in a process session of their own; a slice is started only if its estimate fits before
# SPAN seconds after that call began. Every call (back to back, each within 30 s of the last) waits up
# to WAIT seconds, then returns the exports of the slices that ended since the last call.
#   GPU_TESTS=1   the first call runs the -m gpu tests before the slices (their log comes back)
#   SPAN=1500     seconds from the first call's start by which the last slice must end
#   WAIT=570      seconds this call waits
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 COLUMNS=100
OUT=${OUT:-/tmp/out}; D=/tmp/pslices; mkdir -p "$D" "$OUT"
COMMON=${COMMON:-"--grid portability --repeats 3 --min-time 0.55 --device cuda:0"}

slices() {  # name | filters | estimated seconds
  for dt in bf16 fp16; do for dim in 128 64; do
    echo "p-$dt-d$dim-prefill-causal|--dtype $dt --where head_dim=$dim --where mode=prefill --causal true|760"
    echo "p-$dt-d$dim-prefill-full|--dtype $dt --where head_dim=$dim --where mode=prefill --causal false|760"
    for launch in graph eager; do for hkv in 8 32; do
      echo "p-$dt-d$dim-decode-$launch-g$hkv|--dtype $dt --where head_dim=$dim --where mode=decode --where launch=$launch --where kv_heads=$hkv|470"
    done; done
  done; done
}

if [ ! -e "$D/started" ]; then
  date +%s > "$D/started"
  nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
  slices > "$D/plan"
  cat > "$D/chain.sh" <<'CHAIN'
set -u
D=/tmp/pslices; deadline=$(( $(cat $D/started) + ${SPAN:-1500} ))
if [ "${GPU_TESTS:-0}" = 1 ]; then
  timeout 420 python3 -m pytest -q -m gpu tests/test_gpu.py tests/test_gpu_backends.py -p no:cacheprovider \
    > $D/gpu_tests.log 2>&1; echo "gpu tests rc $?" >> $D/gpu_tests.log
fi
while IFS='|' read -r name filters est; do
  [ -e "results/h200/portability/$name.runs.jsonl" ] && continue
  if [ $(( $(date +%s) + est )) -gt $deadline ]; then echo "$name: not started (estimate $est s)" >> $D/walls.txt; continue; fi
  s=$(date +%s.%N)
  timeout 1200 python3 -m attnbench run $COMMON $filters --db $D/$name.sqlite > $D/$name.log 2>&1
  rc=$?; e=$(date +%s.%N)
  echo "$name: rc $rc wall $(python3 -c "print(round($e - $s, 1))") s" >> $D/walls.txt
  mkdir -p $D/x  # exported here, between slices, so that no slice shares the host with an export
  python3 -m attnbench export --db $D/$name.sqlite --out $D/x/$name.jsonl.gz > /dev/null
  python3 -m attnbench export --db $D/$name.sqlite --table runs --out $D/x/$name.runs.jsonl > /dev/null
  python3 - $D/$name.sqlite >> $D/walls.txt <<'PY'
import sqlite3, sys
for r in sqlite3.connect(sys.argv[1]).execute(
        "select backend, status, count(*), min(substr(reason, 1, 100)) from attempts "
        "where reason like '%set back%' group by 1, 2"):
    print("  set back:", *r)
PY
  touch $D/$name.ended
done < $D/plan
touch $D/chain.ended
CHAIN
  COMMON="$COMMON" setsid nohup bash "$D/chain.sh" > "$D/chain.log" 2>&1 < /dev/null &
fi
end=$(( $(date +%s) + ${WAIT:-570} ))
while [ ! -e "$D/chain.ended" ] && [ "$(date +%s)" -lt $end ]; do sleep 2; done
for f in "$D"/*.ended; do
  [ -e "$f" ] || continue
  name=$(basename "$f" .ended); [ "$name" = chain ] && continue
  [ -e "$D/$name.returned" ] && continue
  cp "$D/x/$name.jsonl.gz" "$D/x/$name.runs.jsonl" "$OUT"/ && touch "$D/$name.returned"
done
{ cat "$D/walls.txt" 2>/dev/null; [ -e "$D/gpu_tests.log" ] && tail -25 "$D/gpu_tests.log"
  for l in "$D"/p-*[0-9a-z].log; do [ -e "$l" ] && [ "${l%.sqlite.log}" = "$l" ] && { echo "== $l"; tail -c 1500 "$l" | tr '\r' '\n' | tail -4; }; done
} > "$OUT/slices.txt" 2>&1
echo "running for $(( $(date +%s) - $(cat "$D/started") )) s; chain $( [ -e "$D/chain.ended" ] && echo ended || echo running)"
cat "$D/walls.txt" 2>/dev/null
[ -e "$D/gpu_tests.log" ] && tail -4 "$D/gpu_tests.log"
exit 0
