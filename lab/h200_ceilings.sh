#!/usr/bin/env bash
# Issue 39.4-39.5 on one H200 (docs/method/ceilings.md): the read-only bandwidth probes against the copy, the
# compute peak at each row's sampled SM clock beside the datasheet's, the off-roofline flags analyze prints,
# and `run --exclusive` refusing a GPU another process holds; then the GPU tests of tests/test_ceilings_read.py.
# Rows: prefill B4 N4k non-causal (compute-bound), decode B64 Nkv16k graph (read-bound), decode B1 Nkv4k eager
# (launch-bound), multi-token decode (prefill B8 Nq4 Nkv16k causal: the off-roofline case in other harnesses'
# published rows) on sdpa-cudnn, sdpa-flash, flex (fa4 and cudnn-fe when importable; absent: said, skipped).
# Run from the repository root:  BUDGET=180 bash lab/h200_ceilings.sh   (default 120 s; PYTHONPATH=src is set here)
# Leaves in $OUT/ceilings/: c.sqlite (the store), runs.jsonl (its provenance: the ceilings), run.txt, analyze.txt,
# show.txt, exclusive.txt, shared.txt, tests.txt; prints last a table of ceilings and of rows.
set -u
export PYTHONUNBUFFERED=1 COLUMNS=120 PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}  # keeps the staged wheels (lab/h200_session.sh)
OUT=${OUT:-/tmp/out}; D=$OUT/ceilings; mkdir -p "$D"
BUDGET=${BUDGET:-120}; T0=$SECONDS
left() { echo $(( BUDGET - (SECONDS - T0) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.max.mem,power.draw --format=csv,noheader
BACKENDS=sdpa-cudnn,sdpa-flash,flex
for b in fa4 cudnn-fe; do  # staged wheels: used when the backend says it is available
  python3 -c "import sys; from attnbench.backends.registry import builtin; b = {x.name: x for x in builtin()}['$b']; \
why = b.availability(); print('$b:', why or 'available'); sys.exit(1 if why else 0)" 2>/dev/null \
    && BACKENDS=$BACKENDS,$b || echo "$b: not importable here (skipped)"
done
cat > /tmp/ceilings-grid.yaml <<'YAML'
name: ceilings
workloads:
  - {mode: prefill, batch: 4, seqlen: 4k, q_heads: 32, head_dim: 128, causal: false}
  - {mode: decode, batch: 64, seqlen: 16k, q_heads: 32, kv_heads: 8, head_dim: 128, launch: graph}
  - {mode: decode, batch: 1, seqlen: 4k, q_heads: 32, kv_heads: 8, head_dim: 128, launch: eager}
  - {mode: prefill, batch: 8, q_len: 4, kv_len: 16k, q_heads: 32, kv_heads: 8, head_dim: 128, causal: true}
YAML
# 1. the run: the ceilings are measured at its start (provenance), every OK row judged against its clock peak
RUN_S=$(( $(left) - 55 )); [ $RUN_S -lt 45 ] && RUN_S=45
timeout $RUN_S python3 -m attnbench run --config /tmp/ceilings-grid.yaml --backends $BACKENDS --repeats 1 \
  --max-time 0.2 --db $D/c.sqlite > $D/run.txt 2>&1
echo "run: exit $? after $((SECONDS - T0)) s (limit $RUN_S s); $(tail -1 $D/run.txt)"
python3 -m attnbench export --db $D/c.sqlite --table runs --out $D/runs.jsonl 2>&1 | tail -1
timeout 30 python3 -m attnbench analyze $D/c.sqlite > $D/analyze.txt 2>&1 || echo "analyze failed: $(tail -1 $D/analyze.txt)"
timeout 30 python3 -m attnbench show --db $D/c.sqlite > $D/show.txt 2>&1 || echo "show failed: $(tail -1 $D/show.txt)"
# 2. --exclusive: a second process spinning on the GPU; the run must exit 2 naming its PID before starting anything
python3 -c "
import time, torch
x = torch.randn(4096, 4096, device='cuda'); torch.cuda.synchronize(); print('ready', flush=True); t = time.time()
while time.time() - t < 70:
    x = torch.tanh(x @ x)
torch.cuda.synchronize()" > $D/spinner.txt 2>&1 &
SPIN=$!
for _ in $(seq 40); do grep -q ready $D/spinner.txt 2>/dev/null && break; sleep 0.5; done
echo "spinner PID $SPIN; NVML lists: $(nvidia-smi --query-compute-apps=pid --format=csv,noheader | tr '\n' ' ')"
timeout 30 python3 -m attnbench run --exclusive --config /tmp/ceilings-grid.yaml --backends sdpa-cudnn --repeats 1 \
  --db $D/x.sqlite > $D/exclusive.txt 2>&1
RC=$?; echo "run --exclusive beside it: exit $RC (want 2); $(tail -1 $D/exclusive.txt)"
grep -q "$SPIN" $D/exclusive.txt && echo "  names the spinner's PID $SPIN" \
  || echo "  does not name $SPIN (NVML's PIDs may be of another PID namespace: compare the line above)"
[ -e $D/x.sqlite ] && echo "  but a store was written: $D/x.sqlite"
# 3. the same without --exclusive while the spinner runs: the row is measured and flagged gpu_shared
if [ $(left) -gt 60 ] && kill -0 $SPIN 2>/dev/null; then
  timeout 35 python3 -m attnbench run --config /tmp/ceilings-grid.yaml --backends sdpa-cudnn --modes prefill \
    --repeats 1 --max-time 0.2 --db $D/shared.sqlite > $D/shared.txt 2>&1
  echo "run beside it: exit $?; $(python3 -m attnbench show --db $D/shared.sqlite 2>&1 | grep -i 'another process' | head -1)"
fi
kill $SPIN 2>/dev/null; wait $SPIN 2>/dev/null
# 4. the GPU tests: the read probe above the copy's read rate and under the DRAM; no OK row above its ceilings
TEST_S=$(( $(left) - 8 )); [ $TEST_S -lt 30 ] && TEST_S=30
timeout $TEST_S python3 -m pytest -q -m gpu tests/test_ceilings_read.py -p no:cacheprovider > $D/tests.txt 2>&1
echo "gpu tests: exit $? ($(tail -1 $D/tests.txt))"; grep -E "^(FAILED|ERROR|E  )" $D/tests.txt | head -8
# 5. what the closing note needs (read from the store; no GPU)
echo "--- analyze: efficiency and off-roofline"
grep -A12 -i "efficiency of the winners" $D/analyze.txt | head -14; grep -A8 "Off the roofline" $D/analyze.txt
grep -iE "another process|read faster|above 100% of the dense" $D/show.txt
python3 - "$D/c.sqlite" <<'PY'
import json, sqlite3, sys
con = sqlite3.connect(sys.argv[1])
for (prov,) in con.execute("SELECT provenance FROM runs"):
    c = (json.loads(prov) or {}).get("ceilings") or {}
    print(f"copy {c.get('copy_gbps', 0):.0f} GB/s (read+write; read rate {c.get('copy_gbps', 0) / 2:.0f}); read "
          f"{c.get('read_gbps')} GB/s by {c.get('read_gbps_by')}; DRAM theoretical {c.get('dram_peak_gbps')} GB/s; "
          f"matmul bf16 {c.get('matmul_tflops_bf16', 0):.0f} TFLOP/s; datasheet bf16 {c.get('datasheet_tflops_bf16')} "
          f"at {c.get('datasheet_clock_mhz')} MHz, {c.get('max_tflops_bf16')} at max {c.get('max_sm_clock_mhz')} MHz; "
          f"SMs {c.get('sms')} cc {c.get('cc')} {c.get('peaks_error') or ''}")
rows = con.execute("""SELECT backend, mode, batch, kv_len, launch, status, median_us, sm_clock_mhz, sm_clock_max_mhz,
    peak_tflops_clock, pct_peak_clock, pct_read, flops, bytes, gpu_shared, gpu_others_why, reason FROM attempts
    ORDER BY mode DESC, batch, launch, backend""").fetchall()
print(f"{'backend':11} {'workload':22} {'status':11} {'med us':>8} {'MHz':>9} {'peak@clk':>8} {'TFLOP/s':>7} "
      f"{'%clk':>5} {'GB/s':>6} {'%read':>6} shared")
f = lambda v, w, p=0: f"{v:{w}.{p}f}" if v is not None else " " * (w - 1) + "-"
for b, mode, B, n, launch, st, med, clk, cmax, peak, pclk, pread, fl, by, shared, why, reason in rows:
    tf = fl / med / 1e6 if med and fl else None
    gb = by / med / 1e3 if med and by else None
    mhz = f"{clk or 0:.0f}/{cmax or 0:.0f}"
    print(f"{b:11} {mode + ' B' + str(B) + ' N' + str(n) + ' ' + launch:22} {st:11} {f(med, 8, 1)} {mhz:>9} "
          f"{f(peak, 8)} {f(tf, 7)} {f(pclk, 5)} {f(gb, 6)} {f(pread, 6)} {shared if shared is not None else why}"
          + (f"  [{reason[:70]}]" if reason else ""))
PY
echo "total: $((SECONDS - T0)) s of $BUDGET"
