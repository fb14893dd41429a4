#!/usr/bin/env bash
# GPU tests, then the quick grid with 3 repeats (resumable: pass an existing store in $QUICK_DB).
# The store is written to $OUT as it goes; export it and `attnbench show` it after fetching.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 COLUMNS=160
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DB=$OUT/quick.sqlite
[ -n "${QUICK_DB:-}" ] && [ -f "$QUICK_DB" ] && cp "$QUICK_DB" "$DB"
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  python3 -m pytest -q -m gpu tests/test_gpu.py -p no:cacheprovider 2>&1 | tee $OUT/gpu_tests.log | tail -15
fi
start=$(date +%s)
timeout ${QUICK_LIMIT:-420} python3 -m attnbench run --grid quick --repeats 3 --device cuda --db $DB 2>&1 | tail -4
echo "quick grid wall this call: $(( $(date +%s) - start )) s"
python3 - "$DB" <<'PY'
import json, sqlite3, sys, collections
c = sqlite3.connect(sys.argv[1])
from attnbench.workloads.grids import get_grid
print("rows", c.execute("select count(*) from attempts").fetchone()[0], "of", len(get_grid("quick")) * 7 * 3)
w = collections.defaultdict(float); ph = collections.defaultdict(lambda: collections.defaultdict(float))
for b, wall, p in c.execute("select backend, wall_s, phases_s from attempts"):
    w[b] += wall or 0
    for k, v in json.loads(p or "{}").items():
        ph[b][k] += v
for b in sorted(w):
    print(f"{b:15s} wall {w[b]:7.1f}s  " + " ".join(f"{k}={v:.1f}" for k, v in ph[b].items()))
for r in c.execute("select status, backend, count(*), min(substr(reason,1,90)) from attempts where status != 'OK' group by 1,2"):
    print(r)
print("non-causal prefill anchors (bf16 D=128), TFLOP/s per repeat:")
for r in c.execute("select batch, kv_len, backend, group_concat(round(flops / median_us / 1e6, 1), ' / ') from attempts "
                   "where mode='prefill' and causal=0 and status='OK' group by 1, 2, 3 order by 1, 2, 3"):
    print(r)
PY
# exports and `attnbench show` run where the store is fetched to: device time is the scarce part
