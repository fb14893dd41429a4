#!/usr/bin/env bash
# compile and flex on the quick grid, one repeat, with the compile workers' Inductor threads at 1 (the
# default) and at THREADS: the first calls' summed seconds per backend and mode, same machine, one call.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
for n in 1 ${THREADS:-8}; do
  TORCHINDUCTOR_COMPILE_THREADS=$n timeout ${LIMIT:-190} python3 -m attnbench run --grid quick --repeats 1 \
    --backends compile,flex --device cuda --db "$OUT/threads-$n.sqlite" 2>&1 | tail -1
done
python3 - "$OUT" ${THREADS:-8} <<'PY'
import json, sqlite3, sys
out, n = sys.argv[1], sys.argv[2]
for t in ("1", n):
    c = sqlite3.connect(f"{out}/threads-{t}.sqlite")
    agg = {}
    for b, m, p in c.execute("select backend, mode, phases_s from attempts where phases_s is not null"):
        a = agg.setdefault((b, m), [0, 0.0])
        a[0] += 1
        a[1] += json.loads(p).get("cold_call", 0)
    print(f"threads {t}: " + ", ".join(f"{b} {m} {k} x {s / k:.2f} s" for (b, m), (k, s) in sorted(agg.items())))
PY
