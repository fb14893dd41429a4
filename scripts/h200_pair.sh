#!/usr/bin/env bash
# The quick grid with 3 repeats on cuda:0 and cuda:1 of one two-GPU host at once, one store each,
# each run cut at $QUICK_LIMIT seconds (resumable: run again with the stores copied back).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 COLUMNS=160
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=index,name,uuid,clocks.sm,power.draw --format=csv,noheader
for i in 0 1; do
  [ -n "${QUICK_DIR:-}" ] && [ -f "$QUICK_DIR/gpu$i.sqlite" ] && cp "$QUICK_DIR/gpu$i.sqlite" "$OUT/gpu$i.sqlite"
  timeout ${QUICK_LIMIT:-560} python3 -m attnbench run --grid quick --repeats ${REPEATS:-3} --device cuda:$i \
    --db "$OUT/gpu$i.sqlite" > "$OUT/gpu$i.txt" 2>&1 &
done
wait
for i in 0 1; do tail -3 "$OUT/gpu$i.txt"; done
python3 - "$OUT" <<'PY'
import sqlite3, sys, statistics
for i in (0, 1):
    c = sqlite3.connect(f"{sys.argv[1]}/gpu{i}.sqlite")
    print(f"cuda:{i}", dict(c.execute("select status, count(*) from attempts group by 1").fetchall()),
          c.execute("select distinct device_index, device_uuid from attempts where status='OK'").fetchall())
    for r in c.execute("select backend, mode, batch, kv_len, launch, substr(reason, 1, 150) from attempts "
                       "where status='IMPLAUSIBLE'"):
        print("  IMPLAUSIBLE", r)
    for launch in ("eager", "graph"):
        x = [v for (v,) in c.execute("select timed_over_kernel from attempts where status='OK' and launch=? "
                                       "and timed_over_kernel is not null", (launch,))]
        if x:
            q = statistics.quantiles(x, n=20)
            print(f"  {launch}: median/kernel n={len(x)} min {min(x):.2f} p5 {q[0]:.2f} med {statistics.median(x):.2f}"
                  f" p95 {q[-1]:.2f} max {max(x):.2f}; host-bound "
                  + str(c.execute("select count(*) from attempts where host_bound=1").fetchone()[0]))
    print("  not stationary", c.execute("select count(*) from attempts where status='OK' and stationary=0").fetchone(),
          "unsettled", c.execute("select count(*) from attempts where status='OK' and warmup_settled=0").fetchone(),
          "clock_low", c.execute("select count(*) from attempts where status='OK' and clock_low=1").fetchone(),
          "sm min/med", c.execute("select min(sm_clock_min_mhz), avg(sm_clock_mhz) from attempts where status='OK'").fetchone())
    for r in c.execute("select backend, mode, batch, kv_len, launch, status, substr(reason, 1, 160) from attempts "
                       "where status not in ('OK', 'UNSUPPORTED', 'OOM_PREDICTED')"):
        print("  NOT OK", r)
    import json
    hard = [v for (v,) in c.execute("select hard_err_ratio from attempts where status='OK' and hard_err_ratio is not null")]
    und = [v for (v,) in c.execute("select undeclared_share from attempts where status='OK' and undeclared_share is not null")]
    sysr, ratio = [], []
    for (d,) in c.execute("select check_detail from attempts where status='OK'"):
        for t in json.loads(d).values():
            sysr.append(t.get("sys", 0.0)); ratio.append(t["ratio"])
    if hard:
        print(f"  hard_err_ratio max {max(hard):.2f} med {statistics.median(hard):.2f}; err ratio max {max(ratio):.2f}; "
              f"sys max {max(sysr):.3f}; undeclared_share max {max(und) if und else None} (n={len(und)}, "
              f"nonzero {sum(1 for u in und if u > 0)})")
    cost = {}
    n = 0
    for (ph,) in c.execute("select phases_s from attempts where status='OK'"):
        n += 1
        for k, v in json.loads(ph).items():
            cost[k] = cost.get(k, 0.0) + v
    print("  mean s per OK attempt:", {k: round(v / max(n, 1), 4) for k, v in sorted(cost.items())})
PY
