"""Time and peak memory of `analyze` and `report` on real H200 stores replicated to study scale (issue 43).

  python lab/bench_analysis_scale.py [--work DIR] [--copies 3] [--layout sides|one] [--src SRC] [--repeat 2]
                                     [--report] [--source portability|committed]

--source portability (default): the portability sweep (issue 13: 25,344 attempts, 12,162 OK of ~1,300
raw samples each), rebuilt once into DIR/port.sqlite from its fourteen parts and two slices in git history
(commit 6a9c48e, results/h200/portability/; removed from the tree by 82d9a7c). --source committed: the
exports under results/h200/ (quick runs 6-8, the pair, libraries, features) imported into one store (an attempt
key two of them share, as the quick reruns do, is kept once, as import keeps it: 2,732 attempts).
--copies N of that store: as N stores (--layout sides: N labels, N sides) or as one store (--layout one:
each copy's run ids, tags and attempt keys renamed, one side of N x 3 process repeats). Building is not
timed, nor is the migration of the source store to SRC's schema when it is older (opened for writing once, its
copies made again); each `attnbench analyze ... --json` (and `attnbench report` of one copy with --report) runs as a
child process under SRC (default: this tree's src/), --repeat times: wall seconds and the child's peak
resident memory (getrusage of the children; each measurement in a fresh process so the peak is its own).
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HISTORY = "6a9c48e"  # the parent of 82d9a7c, which removed the portability parts from the tree
PARTS = ["p-bf16-d128-prefill-causal", "p-bf16-d128-decode-graph-g8"] + [f"port-seg{k}" for k in range(3, 15)]
COMMITTED = ["quick-2026-11-30", "quick-2026-11-30b", "quick-2026-11-30c", "pair-2026-11-30-cuda0",
             "pair-2026-11-30-cuda1", "libraries-2026-12-01", "features-2026-12-01"]


def attnbench(src: Path, *args: str, quiet: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(src), "COLUMNS": "100"}
    return subprocess.run([sys.executable, "-m", "attnbench", *args], env=env, check=True, text=True,
                          stdout=subprocess.DEVNULL if quiet else None, stderr=subprocess.PIPE)


def build_source(work: Path, source: str) -> Path:
    """The store every copy is made of (built once, kept in `work`)."""
    db = work / f"{source}.sqlite"
    if db.is_file():
        return db
    tmp = work / f"{source}.parts"
    tmp.mkdir(exist_ok=True)
    if source == "portability":
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", HISTORY, "results/h200/portability"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
        folder, names = tmp / "results/h200/portability", PARTS
    else:
        folder, names = ROOT / "results/h200", COMMITTED
    partial = db.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    for name in names:
        attnbench(ROOT / "src", "import", str(folder / f"{name}.jsonl.gz"), "--db", str(partial))
        attnbench(ROOT / "src", "import", str(folder / f"{name}.runs.jsonl"), "--table", "runs", "--db", str(partial))
    partial.rename(db)
    shutil.rmtree(tmp)
    return db


def one_store(base: Path, out: Path, copies: int) -> None:
    """`copies` copies of base's attempts and runs in one store: copy i's run ids, tags and attempt keys carry
    the suffix -c{i} (distinct process repeats of one side; workload keys and every measured value as they are)."""
    out.unlink(missing_ok=True)
    con = sqlite3.connect(out)
    con.execute("ATTACH ? AS src", (str(base),))
    for (sql,) in con.execute("SELECT sql FROM src.sqlite_master WHERE sql IS NOT NULL").fetchall():
        con.execute(sql)
    con.execute("INSERT INTO meta SELECT * FROM src.meta")
    cols = [r[1] for r in con.execute("PRAGMA src.table_info(attempts)")]
    run_cols = [r[1] for r in con.execute("PRAGMA src.table_info(runs)")]
    renamed = {"run_id": "run_id || ?1", "tag": "coalesce(tag, '') || ?1", "attempt_key": "attempt_key || ?1"}
    for i in range(copies):
        sel = ", ".join(renamed.get(c, c) for c in cols)
        con.execute(f"INSERT INTO attempts ({', '.join(cols)}) SELECT {sel} FROM src.attempts ORDER BY rowid",
                    (f"-c{i}",))
        sel = ", ".join(renamed.get(c, c) for c in run_cols)
        con.execute(f"INSERT INTO runs ({', '.join(run_cols)}) SELECT {sel} FROM src.runs", (f"-c{i}",))
        if con.execute("SELECT 1 FROM src.sqlite_master WHERE name = 'samples'").fetchone():  # schema 11
            con.execute("INSERT INTO samples SELECT attempt_key || ?1, n, q05, q50, q95, q99, data FROM src.samples",
                        (f"-c{i}",))
    con.commit()
    con.execute("DETACH src")
    con.close()


def migrate(db: Path, src: Path) -> float | None:
    """Open the store for writing once under SRC (an older store gains what SRC's schema adds: schema 11's
    samples table is filled from the JSON text); the seconds it took, None when it had nothing to do."""
    code = ("import sqlite3, sys, time\nfrom attnbench.store.db import Store\nfrom attnbench.store.schema import "
            "SCHEMA_VERSION\ncon = sqlite3.connect(sys.argv[1])\nv = int(con.execute(\"SELECT value FROM meta WHERE "
            "key='schema_version'\").fetchone()[0])\ncon.close()\nt = time.perf_counter()\n"
            "Store(sys.argv[1]).close() if v < SCHEMA_VERSION else None\n"
            "print(time.perf_counter() - t if v < SCHEMA_VERSION else '')")
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run([sys.executable, "-c", code, str(db)], env=env, check=True, text=True,
                         capture_output=True).stdout.strip()
    return float(out) if out else None


def measure(src: Path, args: list[str]) -> tuple[float, float, float]:
    """Wall seconds, peak RSS (GB) and CPU seconds (user + system, every thread, and of the processes it started:
    report's drawing processes) of one attnbench command in a fresh child process; the peak is the command's own
    (its drawing processes hold less). On a shared host the wall moves with the others' load; the CPU time less."""
    code = ("import resource, runpy, sys, time; t = time.perf_counter(); sys.argv = ['attnbench'] + sys.argv[1:]\n"
            "try:\n    runpy.run_module('attnbench', run_name='__main__')\nexcept SystemExit as e:\n"
            "    assert not e.code, e.code\n"
            "u, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)\n"
            "print(time.perf_counter() - t, u.ru_maxrss, u.ru_utime + u.ru_stime + c.ru_utime + c.ru_stime, "
            "file=sys.stderr)")
    env = {**os.environ, "PYTHONPATH": str(src), "COLUMNS": "100"}
    p = subprocess.run([sys.executable, "-c", code, *args], env=env, text=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
    if p.returncode:
        raise SystemExit(f"attnbench {' '.join(args)} failed:\n{p.stderr[-2000:]}")
    wall, rss_kb, cpu = p.stderr.strip().splitlines()[-1].split()
    return float(wall), int(rss_kb) / 1e6, float(cpu)


def count(db: Path) -> tuple[int, int]:
    con = sqlite3.connect(f"file:{db}?immutable=1", uri=True)
    n, ok = con.execute("SELECT count(*), sum(status = 'OK') FROM attempts").fetchone()
    con.close()
    return n, ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", default=str(ROOT / "results/local/scale"), help="where the stores are built and kept")
    ap.add_argument("--source", choices=("portability", "committed"), default="portability")
    ap.add_argument("--copies", type=int, default=3)
    ap.add_argument("--layout", choices=("sides", "one"), default="sides")
    ap.add_argument("--src", default=str(ROOT / "src"), help="the attnbench source tree to time (PYTHONPATH)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--report", action="store_true", help="also time `attnbench report` of one copy")
    a = ap.parse_args()
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    base = build_source(work, a.source)
    took = migrate(base, Path(a.src))  # before copies are made: they are copies of the migrated store
    if took is not None:
        print(f"{base.name}: migrated to SRC's schema in {took:.1f} s (opened for writing once; not timed below)")
        for old in work.glob(f"{a.source}-*.sqlite"):
            old.unlink()  # copies of the store as it was
    if a.layout == "sides":
        stores = [base] + [work / f"{a.source}-copy{i}.sqlite" for i in range(1, a.copies)]
        for s in stores[1:]:
            if not s.is_file():
                shutil.copyfile(base, s)
        specs = [f"copy{i}={s}" for i, s in enumerate(stores)]
    else:
        one = work / f"{a.source}-x{a.copies}.sqlite"
        if not one.is_file():
            one_store(base, one, a.copies)
        specs = [str(one)]
    n, ok = count(base)
    print(f"{a.source}: {n} attempts ({ok} OK) per copy; {a.copies} copies as {a.layout}: {n * a.copies} attempts; "
          f"src {a.src}; host {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.repeat):
            wall, rss, cpu = measure(Path(a.src), ["analyze", *specs, "--json", f"{tmp}/a.json"])
            print(f"analyze  run {i + 1}: {wall:6.1f} s wall, {cpu:6.1f} s CPU, peak RSS {rss:.2f} GB "
                  f"(load {os.getloadavg()[0]:.1f})")
        if a.report:
            for i in range(a.repeat):
                site = Path(tmp) / f"site{i}"
                wall, rss, cpu = measure(Path(a.src), ["report", str(base), "--out", str(site)])
                print(f"report   run {i + 1}: {wall:6.1f} s wall, {cpu:6.1f} s CPU, peak RSS {rss:.2f} GB (one copy, "
                      f"{n} attempts; load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
