"""The portability sweep so far (issue 13: wall / timed of the `portability` grid on one H200).

Imports every export in results/h200/portability (rows and runs tables of slices and of segments
of the resumed run, scripts/h200_slices.sh and scripts/h200_segments.sh) into one store, prints its
`attnbench show --status` head (the sweep's wall, each run's start-up included, over its timed
samples) and how much of the grid's plan has a row, and writes the slimmed store the next segment
resumes from (out/carry/port.sqlite.gz: no raw samples or kernel lists).

    PYTHONPATH=src python scripts/portability_ledger.py [--carry out/carry/port.sqlite.gz]
"""
from __future__ import annotations

import argparse
import gzip
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
PLAN_ATTEMPTS = 25344  # 528 workloads x 16 built-in backends x 3 repeats, planned-out rows included


def attnbench(*argv: str) -> str:
    env = {**os.environ, "COLUMNS": "100", "PYTHONPATH": str(HERE / "src")}
    return subprocess.run([sys.executable, "-m", "attnbench", *argv], check=True, capture_output=True, text=True,
                          env=env).stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=str(HERE / "results/h200/portability"))
    ap.add_argument("--carry", default=str(HERE / "out/carry/port.sqlite.gz"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = f"{tmp}/all.sqlite"
        for rows in sorted(Path(args.dir).glob("*.jsonl.gz")):
            attnbench("import", str(rows), "--db", db)
            attnbench("import", str(rows).removesuffix(".jsonl.gz") + ".runs.jsonl", "--table", "runs", "--db", db)
        status = attnbench("show", "--db", db, "--status").splitlines()
        head = [line for i, line in enumerate(status) if "attempts (" in line or
                (i and "attempts (" in status[i - 1])]
        print("\n".join(head))
        con = sqlite3.connect(db)
        n = con.execute("SELECT count(*) FROM attempts").fetchone()[0]
        print(f"{n} of {PLAN_ATTEMPTS} planned attempts have a row ({100 * n / PLAN_ATTEMPTS:.0f}%)")
        con.execute("UPDATE attempts SET samples_us = NULL, dispatch_kernels = NULL")
        con.commit()
        con.execute(f"VACUUM INTO '{tmp}/slim.sqlite'")  # one compact file, nothing left in a WAL
        con.close()
        Path(args.carry).parent.mkdir(parents=True, exist_ok=True)
        with open(f"{tmp}/slim.sqlite", "rb") as src, gzip.open(args.carry, "wb", compresslevel=9) as dst:
            shutil.copyfileobj(src, dst)
        print(f"resume store: {args.carry}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
