#!/usr/bin/env bash
# Where an attempt's wall goes (cProfile of in-process attempts on the quick grid); full listings in $OUT.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
for sort in tottime cumulative; do
  python3 scripts/profile_attempt.py --device cuda --grid quick --limit ${LIMIT:-71} \
    --backends ${EAGER:-sdpa-flash,sdpa-cudnn,sdpa-math,reference} --top 60 --sort $sort > "$OUT/eager-$sort.txt" 2>&1
done
python3 scripts/profile_attempt.py --device cuda --grid quick --limit ${CLIMIT:-20} --backends flex \
  --top 60 --sort cumulative > "$OUT/flex.txt" 2>&1
grep -A3 "attempts, OK" "$OUT"/*.txt | grep -v USDT
