"""Issue 43.1: does `compare`'s regression gate pass reruns of the same grid and catch planted slowdowns?

  python lab/compare_gate.py [--json FILE]      (about 3 minutes on 2 cores; no GPU)

Reads the committed H200 reruns: the quick grid three times on one GPU (results/h200/quick-2026-11-30,
-30b, -30c: six ordered pairs) and once on each of two GPUs at once (pair-2026-11-30-cuda0/1: two).
Prints, per gate class (analysis/regress.py), the between-run spread of the same line (largest ratio
and interval lower end: what the floors must clear), the false alarms of each ordered pair under the
old rule (ratio >= 1.05 and lower end > 1) and under the gate, and the planted slowdowns caught:
one backend's NEW samples multiplied by s, per class the share of its gated lines that regress and
whether every pair x backend fails (exit 3). docs/method/regression.md quotes its output."""
from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd

from attnbench.analysis.regress import FLOORS, compare
from attnbench.analysis.stats import json_list
from attnbench.store import sources

ROOT = Path(__file__).resolve().parents[1] / "results" / "h200"
RERUNS = {"quick": ["quick-2026-11-30", "quick-2026-11-30b", "quick-2026-11-30c"],
          "pair": ["pair-2026-11-30-cuda0", "pair-2026-11-30-cuda1"]}
SLOWDOWNS = (1.03, 1.05, 1.06, 1.08, 1.10, 1.15, 1.20, 1.30, 1.40)
THRESHOLD = 1.05


def load(names: list[str]) -> dict[str, pd.DataFrame]:
    df = sources.load([f"{n}={ROOT / n}.jsonl.gz" for n in names]).attempts
    return {n: df[df["label"] == n].reset_index(drop=True) for n in names}


def slowed(df: pd.DataFrame, backend: str, s: float) -> pd.DataFrame:
    """The backend's OK rows of df with every time multiplied by s (its samples, median, p95, kernel)."""
    out = df[df["backend"] == backend].copy()
    ok = out["status"] == "OK"
    # the samples keep the form the loader gave them (JSON text, or arrays)
    out["samples_us"] = [v if not good else np.asarray(v) * s if isinstance(v, np.ndarray)
                         else json.dumps([x * s for x in json_list(v)]) for v, good in zip(out["samples_us"], ok)]
    for c in ("median_us", "p95_us", "kernel_us"):
        if c in out.columns:
            out.loc[ok, c] = pd.to_numeric(out.loc[ok, c], errors="coerce") * s
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write every figure here")
    args = ap.parse_args()
    lines, alarms, planted = [], [], []
    for name, names in RERUNS.items():
        stores = load(names)
        for a, b in itertools.permutations(names, 2):
            rows = pd.DataFrame(compare(stores[a], stores[b], THRESHOLD))
            rows = rows[rows["ratio"].notna()].assign(set=name, pair=f"{a} > {b}")
            lines.append(rows)
            old = int(((rows["ratio"] >= THRESHOLD) & (rows["lo"] > 1)).sum())
            alarms.append({"pair": f"{a} > {b}", "old_rule": old, "gate": int((rows["verdict"] == "regressed").sum())})
            for backend in sorted(rows.loc[rows["floor"].notna(), "backend"].unique()):
                base = stores[a][stores[a]["backend"] == backend]
                for s in SLOWDOWNS:
                    got = pd.DataFrame(compare(base, slowed(stores[b], backend, s), THRESHOLD))
                    gated = got[got["floor"].notna()]
                    for cls, g in gated.groupby("gate"):
                        planted.append({"set": name, "pair": f"{a} > {b}", "backend": backend, "s": s, "gate": cls,
                                        "lines": len(g), "caught": int((g["verdict"] == "regressed").sum())})
    every = pd.concat(lines, ignore_index=True)
    spread = every.groupby(["set", "gate"]).agg(lines=("ratio", "size"), max_ratio=("ratio", "max"),
                                                max_lo=("lo", "max"), q99_lo=("lo", lambda x: x.quantile(0.99)))
    print(f"floors: {FLOORS}\n\nbetween-run spread of one line, every ordered rerun pair (NEW / BASE):")
    print(spread.round(3).to_string())
    print("\nfalse alarms (lines failing) per ordered pair:")
    print(pd.DataFrame(alarms).to_string(index=False))
    p = pd.DataFrame(planted)
    by = p.groupby(["gate", "s"]).agg(lines=("lines", "sum"), caught=("caught", "sum"),
                                      backends=("caught", "size"), failing=("caught", lambda c: int((c > 0).sum())))
    by["share"] = by["caught"] / by["lines"]
    print("\nplanted slowdowns: one backend's NEW times x s; per class its gated lines caught and how many "
          "pair x backend runs fail (exit 3):")
    print(by.round(2).to_string())
    smallest = {cls: float(g.loc[g["failing"] == g["backends"]].index.get_level_values("s").min())
                for cls, g in by.groupby(level="gate") if (g["failing"] == g["backends"]).any()}
    print(f"\nsmallest planted slowdown that fails every pair x backend, per class: {smallest}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "floors": FLOORS, "spread": spread.reset_index().to_dict(orient="records"), "alarms": alarms,
            "planted": by.reset_index().to_dict(orient="records"), "smallest": smallest},
            indent=1, default=lambda v: v.item() if isinstance(v, np.generic) else str(v)) + "\n")


if __name__ == "__main__":
    main()
