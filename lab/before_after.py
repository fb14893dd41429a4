"""Statuses and medians of one grid before and after a change, by attempt key: python lab/before_after.py BEFORE AFTER (exports)."""
import sys, json, numpy as np, pandas as pd
b = pd.read_json(sys.argv[1], lines=True); a = pd.read_json(sys.argv[2], lines=True)
print(f"before rows {len(b)} (repeats {sorted(b['repeat'].unique())}), after rows {len(a)}")
m = b.merge(a, on="attempt_key", suffixes=("_b", "_a"))
print(f"attempts in both: {len(m)}")
diff = m[m.status_b != m.status_a]
print(f"status differs: {len(diff)}")
for _, r in diff.iterrows():
    print("  ", r.backend_b, r.mode_b, r.kv_len_b, r.launch_b, r.status_b, "->", r.status_a, str(r.reason_a)[:100])
print("statuses after:", a.status.value_counts().to_dict())
ok = m[(m.status_b == "OK") & (m.status_a == "OK")]
ratio = ok.median_us_a / ok.median_us_b
# noise: the same attempt's repeat 1 over repeat 0 in the before store
idc = ["backend", "mode", "batch", "q_len", "kv_len", "q_heads", "kv_heads", "head_dim", "dtype", "causal", "launch", "l2"]
idc = [c for c in idc if c in b.columns]
bo = b[b.status == "OK"]
r0 = bo[bo.repeat == 0].set_index(idc)["median_us"]; r1 = bo[bo.repeat == 1].set_index(idc)["median_us"]
j = pd.concat([r0, r1], axis=1, keys=["r0", "r1"]).dropna()
noise = j.r1 / j.r0
q = lambda s: " ".join(f"{p}%={np.percentile(s, p):.3f}" for p in (5, 25, 50, 75, 95))
print(f"after/before (same repeat 0), {len(ratio)} OK pairs: {q(ratio)}; |log| median {np.median(abs(np.log(ratio))):.4f}")
print(f"before repeat1/repeat0, {len(noise)} OK pairs: {q(noise)}; |log| median {np.median(abs(np.log(noise))):.4f}" if len(noise) else "no repeat 1")
