"""Two stores of the same grid side by side: do the statuses agree attempt by attempt, how far apart
are the medians (per workload x backend, median of per-repeat medians), against how far each
store's own repeats spread, and what each sweep spent outside its attempts.

  python lab/compare_stores.py BEFORE.sqlite AFTER.sqlite
A store may also be an export (.jsonl[.gz], .csv, .parquet): it is imported into a temporary store."""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

from attnbench.analysis.frames import per_backend
from attnbench.analysis.overview import repeat_cv, run_overview
from attnbench.store import io
from attnbench.store.db import Store


def load(path: str):
    p = Path(path)
    if p.suffix == ".sqlite":
        s = Store(p, create=False)
    else:
        s = Store(Path(tempfile.mkdtemp()) / "import.sqlite")
        io.import_rows(s, io.read_rows(p))
        runs = p.with_name(p.name.split(".")[0] + ".runs.jsonl")
        if runs.is_file():
            io.import_runs(s, io.read_rows(runs, table="runs"))
    return s.dataframe(), s.runs()


def main(a: str, b: str) -> None:
    (da, ra), (db, rb) = load(a), load(b)
    sa = da.set_index("attempt_key")["status"]
    sb = db.set_index("attempt_key")["status"]
    common = sa.index.intersection(sb.index)
    differ = (sa[common] != sb[common]).sum()
    print(f"attempts: {len(sa)} / {len(sb)}, {len(common)} in both, status differs on {differ}")
    for name, d in (("before", da), ("after", db)):
        print(f"  {name}: " + ", ".join(f"{k} {v}" for k, v in d["status"].value_counts().items()))
    key = ["device_name", "workload_key", "backend"]
    pa, pb = per_backend(da).set_index(key), per_backend(db).set_index(key)
    both = pa.index.intersection(pb.index)
    ratio = (pb.loc[both, "median_us"] / pa.loc[both, "median_us"]).rename("ratio")
    cv = np.maximum(repeat_cv(da).reindex(both).fillna(0), repeat_cv(db).reindex(both).fillna(0))
    launch = pa.loc[both, "launch"]
    print("after / before, median of per-repeat medians, per workload x backend:")
    print(f"  {'launch':8s} {'pairs':>5s} {'median':>7s} {'p10':>6s} {'p90':>6s} {'|log| > 3 CV':>12s}")
    for name in sorted(set(launch)):
        r, c = ratio[launch == name], cv[launch == name]
        out = int((np.abs(np.log(r)) > 3 * np.maximum(c, 0.01)).sum())
        print(f"  {name:8s} {len(r):5d} {r.median():7.3f} {r.quantile(0.1):6.3f} {r.quantile(0.9):6.3f} {out:12d}")
    worst = np.abs(np.log(ratio)).sort_values(ascending=False).head(5).index
    for k in worst:
        row = pa.loc[k]
        print(f"  largest: {k[2]:14s} {row['mode']} B={row['batch']} N={row['kv_len']} {row['launch']}: "
              f"{pa.loc[k, 'median_us']:.1f} -> {pb.loc[k, 'median_us']:.1f} us (repeat CV {cv[k]:.1%})")
    for name, d, r in (("before", da, ra), ("after", db, rb)):
        o = run_overview(d, r)
        over = {k: v for run in r for k, v in (run.get("provenance") or {}).get("sweep_overhead_s", {}).items()}
        print(f"  {name}: wall {o['sweep_wall_s']:.0f} s for {o['timed_s']:.1f} s timed "
              f"(x{o['wall_over_timed'] or 0:.1f}); outside attempts: "
              + ", ".join(f"{k} {v:.1f} s" for k, v in over.items()))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(*sys.argv[1:])
