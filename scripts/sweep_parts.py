"""A sweep measured in parts over several device sessions (issue 13: the `portability` grid on one H200).

  segment STORE --out DIR --name NAME
      After a part (PARTS=1 scripts/h200_detached.sh): the rows of the store's latest run as DIR/NAME-segK.jsonl.gz,
      its runs table as DIR/NAME-segK.runs.jsonl, and the store to resume from as DIR/NAME.sqlite.gz:
      slimmed (no raw samples or kernel lists: resume needs only which attempts have a row).
  ledger [--dir results/h200/portability] [--carry out/carry/port.sqlite.gz]
      Every part's rows and runs in one store: the sweep's wall (each run's, start-up included) over its
      timed samples, per part and in all, how much of the grid's plan has a row, and the slimmed store the next part resumes
      from, rebuilt from the kept parts.

    PYTHONPATH=src python scripts/sweep_parts.py ledger
"""
from __future__ import annotations

import argparse
import gzip
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

from attnbench.analysis.overview import run_overview
from attnbench.runner.eta import duration
from attnbench.store.db import Store
from attnbench.store.io import export, import_rows, import_runs, read_rows

HERE = Path(__file__).resolve().parent.parent
PORTABILITY_ATTEMPTS = 25344  # 528 workloads x 16 built-in backends x 3 repeats, planned-out rows included


def changed_copy(store: str, path: str, sql: str, params: tuple = ()) -> None:
    """The store with `sql` applied, compacted into `path`: one file, nothing left in a WAL."""
    with tempfile.TemporaryDirectory() as tmp:
        work = sqlite3.connect(f"{tmp}/work.sqlite")
        src = sqlite3.connect(store)
        src.backup(work)
        src.close()
        work.execute(sql, params)
        work.commit()
        work.execute(f"VACUUM INTO '{path}'")
        work.close()


def write_slim(store: str, out_gz: str) -> None:
    """The store without raw samples or kernel lists (resume needs only which attempts have a row), gzipped."""
    with tempfile.TemporaryDirectory() as tmp:
        changed_copy(store, f"{tmp}/slim.sqlite", "UPDATE attempts SET samples_us = NULL, dispatch_kernels = NULL")
        with open(f"{tmp}/slim.sqlite", "rb") as f, gzip.open(out_gz, "wb", compresslevel=9) as g:
            shutil.copyfileobj(f, g)


def segment(args) -> None:
    out = Path(args.out)
    s = Store(args.store, readonly=True)
    runs = s.runs()  # in the order they started
    name, run_id = f"{args.name}-seg{len(runs)}", runs[-1]["run_id"]
    export(s, None, out / f"{name}.runs.jsonl", table="runs")
    s.close()
    with tempfile.TemporaryDirectory() as tmp:  # this part's rows alone
        changed_copy(args.store, f"{tmp}/rows.sqlite", "DELETE FROM attempts WHERE run_id != ?", (run_id,))
        rows = Store(f"{tmp}/rows.sqlite", readonly=True)
        n = export(rows, None, out / f"{name}.jsonl.gz")
        rows.close()
    write_slim(args.store, str(out / f"{args.name}.sqlite.gz"))
    print(f"{name}: {n} rows of run {run_id}")


def what_is_left(store: Store, provenance: dict) -> tuple[int, float] | None:
    """The grid's attempts without a row (planned on the parts' device, as `run` plans them) and their
    wall at the median of the stored OK rows of their backend and mode; None when the device is not
    recorded."""
    from attnbench.backends.base import DeviceInfo
    from attnbench.backends.registry import select
    from attnbench.runner.eta import Remaining, typical_wall
    from attnbench.runner.planner import plan
    from attnbench.workloads.grids import get_grid

    if not provenance.get("device"):
        return None
    attempts = plan(get_grid("portability"), select(None, []), DeviceInfo.from_dict(provenance["device"]),
                    3, "default", 0)
    done = store.done_keys()
    todo = [a for a in attempts if a.key not in done and not a.planned]
    return len(todo), Remaining(todo, typical_wall(store.ok_walls())).seconds()


def ledger(args) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        s = Store(f"{tmp}/all.sqlite")
        for part in sorted(Path(args.dir).glob("*.jsonl.gz")):
            import_rows(s, read_rows(part))
            import_runs(s, read_rows(str(part).removesuffix(".jsonl.gz") + ".runs.jsonl", table="runs"))
        df, runs = s.dataframe(), s.runs()
        for run_id, rows in df.groupby("run_id", sort=False):  # each part: one uninterrupted run
            p = run_overview(rows, runs)
            ratio = f"{p['wall_over_timed']:.2f}" if p["wall_over_timed"] else "-"
            print(f"  run {run_id}: {p['attempts']} rows, wall {p['sweep_wall_s']:.0f} s, "
                  f"timed {p['timed_s']:.1f} s, wall / timed {ratio}")
        o = run_overview(df, runs)
        left = what_is_left(s, runs[-1]["provenance"]) if runs else None
        s.close()
        print(f"{o['attempts']} of {PORTABILITY_ATTEMPTS} planned attempts have a row "
              f"({100 * o['attempts'] / PORTABILITY_ATTEMPTS:.0f}%): {o['status']}")
        print(f"sweep wall {o['sweep_wall_s']:.0f} s for {o['timed_s']:.1f} s of timed samples: "
              f"wall / timed {o['wall_over_timed']:.2f}")
        if left:
            print(f"left: {left[0]} attempts, about {duration(left[1])} at the parts' median walls "
                  "(runner/eta.py; repeat 0's first calls included, a later repeat's from the slices)")
        Path(args.carry).parent.mkdir(parents=True, exist_ok=True)
        write_slim(f"{tmp}/all.sqlite", args.carry)
    print(f"resume store: {args.carry}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    seg = sub.add_parser("segment", help="after a part: its rows, the runs table, the store to resume from")
    seg.add_argument("store")
    seg.add_argument("--out", required=True)
    seg.add_argument("--name", required=True)
    led = sub.add_parser("ledger", help="every kept part in one store: wall / timed, progress, resume store")
    led.add_argument("--dir", default=str(HERE / "results/h200/portability"))
    led.add_argument("--carry", default=str(HERE / "out/carry/port.sqlite.gz"))
    args = ap.parse_args()
    segment(args) if args.cmd == "segment" else ledger(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
