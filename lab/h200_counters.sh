#!/usr/bin/env bash
# Issue 39 (counters, bound per row, measured vs modelled bytes) on one H200: `run --counters` over a few quick-grid
# rows (prefill B4 N4k non-causal and causal B4 N4k eager; decode B8 Nkv 16k and B64 Nkv 16k, eager and graph) for
# sdpa-cudnn, sdpa-flash and flex (fa4 and cudnn-fe when importable), after the GPU tests of tests/test_counters.py.
# Rows are written as they end: a run cut by the budget still reports the rows it finished (BUDGET=400: all of them).
# Run from the repository root:  BUDGET=200 bash lab/h200_counters.sh   (PYTHONPATH=src is set here)
# Leaves in $OUT/counters/: c.sqlite (the store), counters.jsonl (its counters table), analyze.txt, tests.txt,
# run.txt; prints last a table: backend, mode, launch, bound, evidence, bytes x (measured / modelled), phase s.
set -u
export PYTHONUNBUFFERED=1 COLUMNS=120 PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}  # keeps the staged wheels (lab/h200_session.sh)
OUT=${OUT:-/tmp/out}; D=$OUT/counters; mkdir -p "$D"
BUDGET=${BUDGET:-200}; T0=$SECONDS
left() { echo $(( BUDGET - (SECONDS - T0) )); }
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
echo "ncu: $($NCU --version 2>&1 | tail -1)"; grep -h RmProfilingAdminOnly /proc/driver/nvidia/params 2>/dev/null
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader
BACKENDS=sdpa-cudnn,sdpa-flash,flex
for b in fa4 cudnn-fe; do  # staged wheels: used when the backend says it is available
  python3 -c "import sys; from attnbench.backends.registry import builtin; b = {x.name: x for x in builtin()}['$b']; \
why = b.availability(); print('$b:', why or 'available'); sys.exit(1 if why else 0)" 2>/dev/null \
    && BACKENDS=$BACKENDS,$b || echo "$b: not importable here (skipped)"
done
cat > /tmp/counters-grid.yaml <<'YAML'
name: counters
workloads:
  - {mode: prefill, batch: 4, seqlen: 4k, q_heads: 32, head_dim: 128, causal: [false, true]}
  - {mode: decode, batch: [8, 64], seqlen: 16k, q_heads: 32, kv_heads: 8, head_dim: 128, launch: [eager, graph]}
YAML
# 1. the GPU tests, first (short; the mechanism facts): a wgmma kernel's tensor pipe above mma.sync's; large-KV
# decode memory-bound with DRAM bytes within 10 % of the model
TEST_S=${TEST_S:-75}
timeout $TEST_S python3 -m pytest -q -m gpu tests/test_counters.py -p no:cacheprovider > $D/tests.txt 2>&1
echo "gpu tests: exit $? ($(tail -1 $D/tests.txt))"; grep -E "^(FAILED|ERROR|E  )" $D/tests.txt | head -8
# 2. the run: timing as usual, then each OK attempt's step replayed once under ncu (rows are written as they end)
RUN_S=$(( $(left) - 15 )); [ $RUN_S -lt 60 ] && RUN_S=60
timeout $RUN_S python3 -m attnbench run --config /tmp/counters-grid.yaml --backends $BACKENDS --repeats 1 \
  --max-time 0.2 --counters --db $D/c.sqlite > $D/run.txt 2>&1
echo "run: exit $? after $((SECONDS - T0)) s (limit $RUN_S s); $(tail -1 $D/run.txt)"
python3 -m attnbench export --db $D/c.sqlite --table counters --out $D/counters.jsonl 2>&1 | tail -1
timeout 30 python3 -m attnbench analyze $D/c.sqlite > $D/analyze.txt 2>&1 || echo "analyze failed: $(tail -1 $D/analyze.txt)"
# 3. the table the closing note needs (read from the store; no GPU)
python3 - "$D/c.sqlite" <<'PY'
import json, sqlite3, sys
con = sqlite3.connect(sys.argv[1])
try:
    rows = con.execute("""SELECT a.backend, a.mode, a.batch, a.kv_len, a.causal, a.launch, a.median_us,
        COALESCE(json_extract(a.phases_s, '$.counters'), c.cost_s), c.bound, c.bound_evidence, c.bytes_ratio, c.tensor_pct, c.xu_pct,
        c.dram_pct, c.warps_active_pct, c.profiled_clock_mhz, c.main_kernel, c.note FROM attempts a LEFT JOIN counters c USING (attempt_key)
        WHERE a.status = 'OK' ORDER BY a.mode DESC, a.batch, a.causal, a.launch, a.backend""").fetchall()
except sqlite3.OperationalError as e:
    sys.exit(f"no counters table: {e}")
print(f"{'backend':11} {'workload':26} {'launch':6} {'med us':>8} {'bound':8} {'tensor':>6} {'xu':>4} {'dram':>4} "
      f"{'warps':>5} {'MHz':>5} {'bytes x':>7} {'phase s':>7}  evidence / note")
for b, mode, B, n, causal, launch, med, cost, bound, ev, ratio, ten, xu, dram, warps, mhz, kern, note in rows:
    f = lambda v, w=4, p=0: f"{v:{w}.{p}f}" if v is not None else " " * (w - 1) + "-"
    wl = f"{mode} B{B} N{n}{' causal' if causal else ''}"
    print(f"{b:11} {wl:26} {launch:6} {f(med, 8, 1)} {bound or '-':8} {f(ten, 6)} {f(xu)} {f(dram)} {f(warps, 5)} {f(mhz, 5)} "
          f"{f(ratio, 7, 2)} {f(cost, 7, 1)}  {note or ev or ''}{'' if note else ' [' + (kern or '')[:40] + ']'}")
PY
echo "total: $((SECONDS - T0)) s of $BUDGET"
