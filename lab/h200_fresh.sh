#!/usr/bin/env bash
# Issue 42.2 on one H200 (docs/method/fresh-inputs.md): the value cache and the identity cache of
# lab/plugins/value_cache.py without and with fresh inputs; the GPU tests of tests/test_fresh_inputs.py; then a
# representative part of the quick grid (prefill and decode, eager and graph) on sdpa-flash, sdpa-cudnn,
# sdpa-efficient and flex (fa4, cudnn-fe when staged), twice: without and with --fresh-inputs, in what is left
# of BUDGET (150 s: the runs may stop early, their rows in both are compared; BUDGET=300 runs them whole).
# Run from the repository root:  BUDGET=150 bash lab/h200_fresh.sh   (PYTHONPATH=src is set here)
# Leaves in $OUT/fresh/: default.sqlite, fresh.sqlite, caches.sqlite, their run logs, show-caches.txt, tests.txt;
# prints last, per backend and launch, the ratio of medians fresh/default, the timing phase's seconds both ways,
# the refill's host cost, and the statuses of the fresh rows and of the caches.
set -u
export PYTHONUNBUFFERED=1 COLUMNS=120 PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}  # keeps the staged wheels (lab/h200_session.sh)
OUT=${OUT:-/tmp/out}; D=$OUT/fresh; mkdir -p "$D"
BUDGET=${BUDGET:-150}; T0=$SECONDS
left() { echo $(( BUDGET - (SECONDS - T0) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader
BACKENDS=sdpa-flash,sdpa-cudnn,sdpa-efficient,flex
# staged wheels: used when the backend says it is available
EXTRA=$(python3 -c "from attnbench.backends.registry import builtin; b = {x.name: x for x in builtin()}
for n in ('fa4', 'cudnn-fe'):
    why = b[n].availability(); print(n, 'available' if not why else 'not importable here (skipped): ' + why[:80])" 2>&1)
echo "$EXTRA"
for b in fa4 cudnn-fe; do echo "$EXTRA" | grep -q "^$b available" && BACKENDS=$BACKENDS,$b; done
# quick-grid workloads: a compute-bound prefill each way of the mask, decode small and large, eager and graph
cat > /tmp/fresh-grid.yaml <<'YAML'
name: fresh
workloads:
  - {mode: prefill, batch: 4, seqlen: 4k, q_heads: 32, head_dim: 128, causal: false}
  - {mode: prefill, batch: 1, seqlen: 8k, q_heads: 32, head_dim: 128, causal: true}
  - {mode: decode, batch: 8, seqlen: 4k, q_heads: 32, kv_heads: 8, head_dim: 128, launch: [eager, graph]}
  - {mode: decode, batch: 64, seqlen: 16k, q_heads: 32, kv_heads: 8, head_dim: 128, launch: [eager, graph]}
YAML
# one compiler cache for every run: flex compiles in the first, loads in the others (first calls are not compared)
ARGS="--config /tmp/fresh-grid.yaml --repeats 1 --max-time 0.2 --timeout 60 --compile-cache /tmp/fresh-cc"
# 1. the caches first (the closing figure that must be there): OK without fresh inputs, IMPLAUSIBLE with them;
#    on prefill B4 N4k and decode B64 N16k, eager (long enough that the memo's own look-up is small beside them)
for m in default fresh; do
  f=""; [ $m = fresh ] && f=--fresh-inputs
  timeout 30 python3 -m attnbench run $ARGS --where launch=eager --where batch=4,64 \
    --plugin lab/plugins/value_cache.py --backends value-cache-flash,identity-cache,sdpa-flash $f --db $D/caches.sqlite > $D/run-caches-$m.txt 2>&1
  echo "caches $m: exit $?; $(tail -1 $D/run-caches-$m.txt)"
done
python3 -m attnbench show --db $D/caches.sqlite --rank > $D/show-caches.txt 2>&1
# 2. the GPU tests
timeout 40 python3 -m pytest -q -m gpu tests/test_fresh_inputs.py -p no:cacheprovider > $D/tests.txt 2>&1
echo "gpu tests: exit $? after $((SECONDS - T0)) s | $(tail -1 $D/tests.txt)"
# 3. the two runs, what is left of the budget split between them (rows of both are compared; BUDGET=300 for all)
RUN_S=$(( ($(left) - 8) / 2 )); [ $RUN_S -lt 20 ] && RUN_S=20
for m in default fresh; do
  f=""; [ $m = fresh ] && f=--fresh-inputs; t=$SECONDS
  timeout $RUN_S python3 -m attnbench run $ARGS --backends $BACKENDS $f --db $D/$m.sqlite > $D/run-$m.txt 2>&1
  echo "run $m: exit $? after $((SECONDS - t)) s (limit $RUN_S s); $(tail -1 $D/run-$m.txt)"
  echo $((SECONDS - t)) > $D/wall-$m.txt
done
# 4. the closing table
python3 - "$D" <<'PY'
import json, sqlite3, statistics, sys
d = sys.argv[1]
AX = ("mode", "batch", "q_len", "kv_len", "q_heads", "kv_heads", "head_dim", "causal", "causal_align", "launch")
def rows(name):
    try:
        con = sqlite3.connect(f"{d}/{name}.sqlite"); con.row_factory = sqlite3.Row
        return [dict(r) for r in con.execute("SELECT * FROM attempts")]
    except sqlite3.Error as e:
        print(f"{name}: {e}"); return []
base, fresh = rows("default"), rows("fresh")
ok = {(r["backend"], *(r[a] for a in AX)): r for r in base if r["status"] == "OK"}
groups, t_d = {}, {}
for r in fresh:
    g = groups.setdefault((r["backend"], r["launch"]), {"ratios": [], "status": {}, "t_f": 0.0, "refill": []})
    g["status"][r["status"]] = g["status"].get(r["status"], 0) + 1
    fi = (json.loads(r["check_detail"] or "{}")).get("fresh_inputs") or {}
    if fi.get("refill_host_us"): g["refill"].append(fi["refill_host_us"])
    b = ok.get((r["backend"], *(r[a] for a in AX)))
    if r["status"] == "OK" and b:  # the timing phase's seconds over the rows OK both ways
        g["ratios"].append(r["median_us"] / b["median_us"])
        g["t_f"] += (json.loads(r["phases_s"] or "{}")).get("timing", 0.0)
        k = (r["backend"], r["launch"])
        t_d[k] = t_d.get(k, 0.0) + (json.loads(b["phases_s"] or "{}")).get("timing", 0.0)
wall = {m: open(f"{d}/wall-{m}.txt").read().strip() for m in ("default", "fresh")}
print(f"\nwall: default {wall['default']} s ({len(base)} rows), fresh {wall['fresh']} s ({len(fresh)} rows); "
      "timing s d/f: the timing phase over the rows OK both ways")
print(f"{'backend':16} {'launch':6} {'n':>2} {'fresh/default':>13} {'range':>11} {'timing s d/f':>13} "
      f"{'refill us':>9}  fresh statuses")
for (b, launch), g in sorted(groups.items()):
    rs = g["ratios"]; med = f"{statistics.median(rs):.3f}" if rs else "-"
    rng = f"{min(rs):.2f}-{max(rs):.2f}" if rs else "-"
    ref = f"{statistics.median(g['refill']):.0f}" if g["refill"] else "-"
    print(f"{b:16} {launch:6} {len(rs):>2} {med:>13} {rng:>11} {t_d.get((b, launch), 0):6.1f}/{g['t_f']:<6.1f} "
          f"{ref:>9}  " + ", ".join(f"{k} {v}" for k, v in sorted(g["status"].items())))
print("\ncaches (value-cache-flash must be OK without, IMPLAUSIBLE with fresh inputs; identity-cache likewise):")
for r in rows("caches"):
    why = (r["reason"] or "")[:90]
    print(f"  {r['backend']:18} fresh={r['fresh_inputs']} {r['mode']:7} B{r['batch']} N{r['kv_len']:<6} "
          f"{r['status']:12} {r['median_us'] or 0:8.1f} us checked={r['dispatch_checked']} {why}")
PY
echo "total $((SECONDS - T0)) s of BUDGET $BUDGET"
