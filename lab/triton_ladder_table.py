"""Issue 41's ratio table from one ladder store's export: each rung beside the best of sdpa-cudnn and fa4 on the same
workloads, measured in the same run, against the issue's targets; then the Hopper ablation and FA1 -> FA2.

Usage: python3 lab/triton_ladder_table.py ladder.jsonl.gz   (an `attnbench export` of lab/h200_triton.sh's store)"""
from __future__ import annotations

import sys

import pandas as pd

VENDORS = ("sdpa-cudnn", "fa4")
PREFILL_TARGETS = (("triton-hopper", 0.85), ("triton-fa2", 0.70), ("triton-fa1", None))
ABLATION = ("triton-hopper-base", "triton-hopper-ws", "triton-hopper-ws-pipe", "triton-hopper")


def label(r) -> str:
    pg = f" paged{int(r['page_size'])}" if r.get("page_size") else ""
    if r["mode"] == "decode":
        return f"decode {r['dtype']} B{r['batch']} H{r['q_heads']}/{r['kv_heads']} KV{r['kv_len'] // 1024}k{pg}"
    c = "causal" if r["causal"] else "full"
    return f"{r['mode']} {r['dtype']} B{r['batch']} H{r['q_heads']}/{r['kv_heads']} N{r['q_len'] // 1024}k {c}"


def main(path: str) -> int:
    df = pd.read_json(path, lines=True)
    if df.empty:
        print("no rows")
        return 1
    df["what"] = df.apply(label, axis=1)
    bad = df[df.status != "OK"]
    for _, r in bad[bad.backend.str.startswith("triton")].iterrows():
        print(f"NOT OK {r.backend:24s} {r.what}: {r.status} {str(r.reason)[:150]}")
    ok = df[df.status == "OK"].copy()
    ok["tflops"] = ok.flops / ok.median_us / 1e6
    best = ok.groupby(["workload_key", "backend"]).median_us.min().unstack()
    first = ok.drop_duplicates("workload_key").set_index("workload_key")
    print(f"\n{'workload':44s} {'rung':22s} {'TFLOP/s':>8s} {'best vendor':>12s} {'ratio':>6s} target")
    for key, row in best.iterrows():
        w = first.loc[key]
        vend = [(row[v], v) for v in VENDORS if v in row and pd.notna(row[v])]
        if w["mode"] == "decode":
            others = [(row[b], b) for b in row.index if not b.startswith("triton") and pd.notna(row[b])]
            if "triton-decode" in row and pd.notna(row["triton-decode"]) and others:
                us, who = min(others)
                r = us / row["triton-decode"]
                print(f"{w.what:44s} {'triton-decode':22s} {w['bytes'] / row['triton-decode'] / 1e3:7.0f}G "
                      f"{who:>12s} {r:6.2f} >=0.95 (KV bandwidth) {'MET' if r >= 0.95 else 'NOT MET'}")
            continue
        v_us, v_name = min(vend) if vend else (None, "-")
        rungs = [b for b in row.index if b.startswith("triton") and pd.notna(row[b])]
        for b in sorted(rungs):
            tf = w.flops / row[b] / 1e6
            ratio = v_us / row[b] if v_us else None
            target = dict(PREFILL_TARGETS).get(b) if w["mode"] == "prefill" else (0.70 if b in ("triton-fa2", "triton-hopper") else None)
            if b.startswith("triton-fp8"):
                bf16 = [row[x] for x in ("triton-fa2", "triton-hopper") if x in row and pd.notna(row[x])]
                rr = min(bf16) / row[b] if bf16 else None
                print(f"{w.what:44s} {b:22s} {tf:8.0f} {'best rung':>12s} "
                      f"{(f'{rr:6.2f}' if rr else '     -')} >=1.4 {'MET' if rr and rr >= 1.4 else 'NOT MET' if rr else ''}")
                continue
            mark = "" if target is None or ratio is None else (f">={target:.2f} " + ("MET" if ratio >= target else "NOT MET"))
            print(f"{w.what:44s} {b:22s} {tf:8.0f} {v_name:>12s} {(f'{ratio:6.2f}' if ratio else '     -')} {mark}")
        for v in VENDORS + ("sdpa-flash",):
            if v in row and pd.notna(row[v]):
                print(f"{w.what:44s} {v:22s} {w.flops / row[v] / 1e6:8.0f}")
    print("\nFA3 Table 2 as measured here (TFLOP/s; each variant adds one feature):")
    for key, row in best.iterrows():
        w = first.loc[key]
        if any(a in row and pd.notna(row[a]) for a in ABLATION[:3]):
            cells = [f"{a.replace('triton-hopper', 'hop') or 'hop'}={w.flops / row[a] / 1e6:.0f}" if a in row and pd.notna(row[a])
                     else f"{a}=-" for a in ABLATION]
            print(f"  {w.what:44s} " + "  ".join(cells))
    print("\nFA1 -> FA2 (same run):")
    for key, row in best.iterrows():
        if all(b in row and pd.notna(row[b]) for b in ("triton-fa1", "triton-fa2")):
            w = first.loc[key]
            print(f"  {w.what:44s} fa2/fa1 speed {row['triton-fa1'] / row['triton-fa2']:.2f}x "
                  f"(modelled minimum bytes {w['bytes'] / 1e9:.2f} GB; FA1's O/m/l traffic is in the notes' model)")
    cfg = ok[ok.backend.str.startswith("triton")][["backend", "what", "kernel_config"]]
    print("\nchosen configs:")
    for _, r in cfg.iterrows():
        print(f"  {r.backend:22s} {r.what:44s} {str(r.kernel_config)[:150]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
