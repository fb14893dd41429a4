"""A sweep measured in parts over several device sessions (issue 13: the `portability` grid on one H200).

  segment STORE --out DIR --name NAME
      After a part (PARTS=1 lab/h200_detached.sh): the rows of the store's latest run as DIR/NAME-segK.jsonl.gz,
      its runs table as DIR/NAME-segK.runs.jsonl, and the store to resume from as DIR/NAME.sqlite.gz:
      slimmed (no raw samples or kernel lists: resume needs only which attempts have a row).
  ledger [--dir results/local/portability] [--carry out/carry/port.sqlite.gz]
      Every part's rows and runs in one store: the sweep's wall (each run's, start-up included) over its
      timed samples, per part and in all, how much of the grid's plan has a row, what later repeats
      cost against repeat 0 (in its run; in a later part that resumed a compiler cache holding an
      earlier row's compiles, whichever repeat it was; in a later part without them), how long the
      rest takes and where the sweep's wall / timed would end (each attempt left costing what its
      repeat-0 row cost, with and without its first call, and at the carried rows' ratio for those
      whose compiles a kept cache holds), and the slimmed store the next part resumes from, rebuilt
      from the kept parts; never one with fewer attempts than the one it replaces (a part's rows set
      aside by lab/device_slim.sh would be measured again).

  take DIR [--name port] [--dir results/local/portability] [--carry out/carry/port.sqlite.gz]
      What a part's last call returned (DIR: the call's files): its NAME-segK.* rows and runs into
      --dir, its compiler cache pieces NAME.cache.txz.NN beside --carry in place of the last part's
      (checked to be one whole archive first; none returned keeps the last ones); then the ledger.
      Where the returned cache left out a compiler's part for size (pack), the carried archive's
      part is kept beside it: the part started from it, so it is older but still valid. Run it with
      the earlier parts' rows in --dir (after `bash lab/device_slim.sh restore`). DIR without
      segment files but with NAME.sqlite.gz (the backup a call returns while the run goes on): the
      machine was lost mid-part, and the backup's latest run, to its last row, is the part.
  pack CACHE --out DIR --name NAME
      A part's compiler cache (the folder `run` keeps beside the store) as an xz-compressed tar in
      12 MiB pieces DIR/NAME.cache.txz.NN, four at most (what one device call returns and carries):
      all of it, else Inductor's and JAX's parts, else JAX's. xz, not gzip: a compiler cache repeats
      itself across files far apart, which gzip's 32 KiB window cannot see (a 253 MiB cache: 45 MB
      gzipped, 11 MB in xz).
  unpack PIECE... --to CACHE
      The pieces (xz or gzip, in order) extracted into CACHE.

    PYTHONPATH=src python lab/sweep_parts.py take /work/.device/3
    PYTHONPATH=src python lab/sweep_parts.py ledger
"""
from __future__ import annotations

import argparse
import gzip
import io
import lzma
import shutil
import sqlite3
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from attnbench.analysis.sections.sources import run_host
from attnbench.analysis.overview import run_overview, timed_seconds
from attnbench.analysis.stats import json_dict
from attnbench.runner.compile_cache import SWEEP_CACHE_SUFFIX
from attnbench.runner.eta import Remaining, duration, typical_wall
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


def todo_attempts(store: Store, provenance: dict) -> list | None:
    """The grid's attempts without a row and not planned out, planned on the parts' device as `run`
    plans them; None when the device is not recorded."""
    from attnbench.backends.base import DeviceInfo
    from attnbench.backends.registry import select
    from attnbench.runner.planner import plan
    from attnbench.workloads.grids import get_grid

    if not provenance.get("device"):
        return None
    attempts = plan(get_grid("portability"), select(None, []), DeviceInfo.from_dict(provenance["device"]),
                    3, "default", 0)
    done = store.done_keys()
    return [a for a in attempts if a.key not in done and not a.planned]


def first_calls(rows: pd.DataFrame) -> list[float]:
    """Each row's first call (compiles) in seconds: its cold_call phase, 0 where it has none."""
    return [json_dict(p).get("cold_call", 0.0) for p in rows["phases_s"]]


def remaining_cost(ok: pd.DataFrame, todo: list, carried: set | None = None) -> dict:
    """What the attempts left would add, each at the OK row of its backend and workload in repeat 0
    (a later repeat repeats it), else at the mean of repeat 0's OK rows of its backend and mode (of
    rows whose samples were kept): wall, timed samples, and the first calls within that wall (which a
    later repeat loads from the compiler cache that repeat 0 filled, where it holds them). Attempts
    with neither are `unmatched`. `carried`: the (backend, workload key) pairs whose compiles a kept
    cache holds; the attempts among them are counted (`carried`) and their wall summed (`carried_wall`)."""
    first = ok[ok["repeat"] == 0]
    first = first.assign(first_call=first_calls(first), timed=timed_seconds(first)).dropna(subset=["timed"])  # rows whose samples were kept
    cols = ["wall_s", "timed", "first_call"]
    same = first.groupby(["backend", "workload_key"])[cols].first()
    alike = first.groupby(["backend", "mode"])[cols].mean()
    out = dict.fromkeys(cols, 0.0) | {"unmatched": 0, "carried": 0, "carried_wall": 0.0}
    for a in todo:
        pair = (a.backend.name, a.workload.key())
        for table, key in ((same, pair), (alike, (a.backend.name, a.workload.mode))):
            if key in table.index:
                for c in cols:
                    out[c] += float(table.at[key, c])
                if pair in (carried or ()):
                    out["carried"] += 1
                    out["carried_wall"] += float(table.at[key, "wall_s"])
                break
        else:
            out["unmatched"] += 1
    return out


def cache_kept(provenance: dict) -> bool:
    """Whether a run's compiler cache outlived it for a later run to load: provenance compile_cache
    "kept"; for a run from before that field, a named cache or the sweep's beside its store (its
    folder is named after the store, which `run` keeps until the sweep has finished: sweep_cache_of)."""
    c = provenance.get("compile_cache") or {}
    if "kept" in c:
        return bool(c["kept"])
    return c.get("kind") == "named" or str(c.get("dir", "")).endswith(SWEEP_CACHE_SUFFIX)


def cache_resumed(provenance: dict) -> bool:
    """Whether a run began with compiles kept by an earlier one (a resumed sweep cache, or a named one)."""
    return (provenance.get("compile_cache") or {}).get("kind") in ("resumed", "named")


def chain(last: str | None, provenances: dict) -> list[str]:
    """The runs whose compiles a run resuming `last`'s cache begins with: none where `last` did not
    keep its cache; else `last` and what it began with (`held_by`). A run that began fresh breaks the
    chain (a lost carry, a new machine): the compiles of the runs before it are not in its cache."""
    return [last, *held_by(last, provenances)] if last and cache_kept(provenances.get(last, {})) else []


def held_by(run: str, provenances: dict) -> list[str]:
    """The earlier runs whose kept compiles `run` began with: where it resumed a cache, the chain of
    the run before it (run ids sort in the order the runs began)."""
    earlier = [r for r in sorted(provenances) if r < run]
    return chain(earlier[-1], provenances) if earlier and cache_resumed(provenances.get(run, {})) else []


def carried_pairs(ok: pd.DataFrame, provenances: dict, pieces: bool = True) -> set:
    """The (backend, workload key) pairs whose compiles the next part begins with, resuming the last
    run's cache: those with an OK row in a run of its chain; none where the pieces to resume from are
    not here (`pieces` False)."""
    runs = chain(max(provenances), provenances) if pieces and provenances else []
    return set(map(tuple, ok[ok["run_id"].isin(runs)][["backend", "workload_key"]].itertuples(index=False)))


LATER = ("the same run", "an earlier part, compiles of theirs carried", "an earlier part, none of their compiles carried")


def later_vs_first(ok: pd.DataFrame, provenances: dict) -> dict:
    """Later repeats' OK rows against their backend and workload's repeat-0 row, apart for a repeat 0
    of the same run (its compiler cache and processes were the run's), for a row of a part that
    resumed a kept cache holding the compiles of an earlier row of its backend and workload (any
    repeat, in a run of the chain its cache came from: `held_by`), and for the rest (provenances: run id ->
    provenance; run ids sort in the order the runs began): how many rows, and their summed wall and
    first calls over those of repeat 0 (NaN where repeat 0's sum is 0): what the compiler cache
    spared a later repeat, or what it cost on top when it held nothing."""
    first = ok[ok["repeat"] == 0].drop_duplicates(["backend", "workload_key"]).set_index(["backend", "workload_key"])
    later = ok[ok["repeat"] > 0]
    later = later[pd.Series([k in first.index for k in zip(later["backend"], later["workload_key"])],
                            index=later.index, dtype=bool)]
    base = first.loc[list(zip(later["backend"], later["workload_key"]))]
    same = later["run_id"].to_numpy() == base["run_id"].to_numpy()
    runs_of = ok.groupby(["backend", "workload_key"])["run_id"].agg(set).to_dict()
    held = {run: set(held_by(run, provenances)) for run in later["run_id"].unique()}
    carried = np.array([bool(held[run] & runs_of.get(pair, set()))
                        for run, pair in zip(later["run_id"], zip(later["backend"], later["workload_key"]))], dtype=bool)

    def over(a, b):
        return a / b if b else float("nan")

    out = {}
    for name, mask in zip(LATER, (same, ~same & carried, ~same & ~carried)):
        lt, bs = later[mask], base[mask]
        out[name] = {"rows": len(lt), "wall": over(float(lt["wall_s"].sum()), float(bs["wall_s"].sum())),
                     "first_call": over(sum(first_calls(lt)), sum(first_calls(bs)))}
    return out


def ledger(args) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        s = Store(f"{tmp}/all.sqlite")
        for part in sorted(Path(args.dir).glob("*.jsonl.gz")):
            import_rows(s, read_rows(part))
            import_runs(s, read_rows(str(part).removesuffix(".jsonl.gz") + ".runs.jsonl", table="runs"))
        df, runs = s.dataframe(), s.runs()
        by_id = {r["run_id"]: r for r in runs}
        startups = []
        for run_id, rows in df.groupby("run_id", sort=False):  # each part: one uninterrupted run
            p, run = run_overview(rows, runs), by_id.get(run_id, {})
            startups.append((run.get("started_at") or "", p["startup_s"]))
            ratio = f"{p['wall_over_timed']:.2f}" if p["wall_over_timed"] else "-"
            paces = run_host(run)[1]  # the lent host's pace (parts from 8 on)
            host = f", host {paces[0]:.2f} us/op" if paces else ""
            print(f"  run {run_id}: {p['attempts']} rows, wall {p['sweep_wall_s']:.0f} s, "
                  f"timed {p['timed_s']:.1f} s, wall / timed {ratio}{host}")
        o = run_overview(df, runs)
        todo = todo_attempts(s, runs[-1]["provenance"]) if runs else None
        eta = Remaining(todo, typical_wall(s.ok_walls())).seconds() if todo else None
        s.close()
        print(f"{o['attempts']} of {PORTABILITY_ATTEMPTS} planned attempts have a row "
              f"({100 * o['attempts'] / PORTABILITY_ATTEMPTS:.0f}%): {o['status']}")
        print(f"sweep wall {o['sweep_wall_s']:.0f} s for {o['timed_s']:.1f} s of timed samples: "
              f"wall / timed {o['wall_over_timed']:.2f}")
        if len(startups) > 1 and o["timed_s"]:  # each part started a run: one whole run starts once
            first = min(startups)[1]
            extra = sum(up for _, up in startups) - first
            whole = (o["sweep_wall_s"] - extra) / o["timed_s"]
            print(f"  of it, {len(startups)} parts' start-ups before a first attempt: {extra + first:.0f} s\n"
                  f"  one whole run starts once (the first part's {first:.0f} s): wall / timed {whole:.3f}")
        if todo:
            print(f"left: {len(todo)} attempts, about {duration(eta)} at the parts' median walls "
                  "(runner/eta.py; repeat 0's first calls included, a later repeat's from the slices)")
            ok = df[df["status"] == "OK"]
            provenances = {k: r["provenance"] for k, r in by_id.items()}
            later = later_vs_first(ok, provenances)
            for name, lv in later.items():
                if lv["rows"]:
                    print(f"later repeats, repeat 0 in {name}: {lv['rows']} OK rows took {lv['wall']:.2f}x "
                          f"the wall of their repeat-0 rows, first calls {lv['first_call']:.2f}x")
            pieces = bool(cache_pieces(Path(args.carry).parent, Path(args.carry).name.removesuffix(".sqlite.gz")))
            c = remaining_cost(ok, todo, carried_pairs(ok, provenances, pieces))
            w, t = o["sweep_wall_s"] + c["wall_s"], o["timed_s"] + c["timed"]
            print(f"projected at the end, each attempt left as its repeat-0 row: wall / timed "
                  f"{w / t:.2f} ({duration(c['wall_s'])} more), {(w - c['first_call']) / t:.2f} if the cache "
                  f"spares every first call of theirs ({c['unmatched']} attempts without a row to go by)")
            if not pieces:
                print(f"  no compiler cache pieces beside {args.carry}: the next part compiles afresh")
            hit = later[LATER[1]]
            if c["carried"] and hit["rows"]:  # the attempts a kept cache compiled, at what carried rows took
                wc = w - c["carried_wall"] * (1 - hit["wall"])
                print(f"  {wc / t:.2f} if the {c['carried']} attempts left whose compiles a kept cache holds "
                      f"take {hit['wall']:.2f}x their repeat-0 wall, as the carried rows did")
        lost = carried_keys(args.carry, tmp) - (set(df["attempt_key"]) if len(df) else set())
        if lost:  # a resume store that shrank would measure those attempts again: a session's part
            raise SystemExit(f"sweep_parts: the kept parts in {args.dir} lack {len(lost)} attempts that "
                             f"{args.carry} has (row exports set aside? `bash lab/device_slim.sh "
                             "restore`, then `ledger`); the resume store is left as it was")
        Path(args.carry).parent.mkdir(parents=True, exist_ok=True)
        write_slim(f"{tmp}/all.sqlite", args.carry)
    print(f"resume store: {args.carry}")


def carried_keys(carry: str, tmp: str) -> set[str]:
    """The attempts with a row in the gzipped resume store `carry` (none when there is none yet)."""
    if not Path(carry).exists():
        return set()
    with gzip.open(carry, "rb") as g, open(f"{tmp}/carried.sqlite", "wb") as f:
        shutil.copyfileobj(g, f)
    s = Store(f"{tmp}/carried.sqlite", readonly=True)
    try:
        return s.done_keys()
    finally:
        s.close()


PIECE = 12 * 2**20  # a cache piece: four fit one call's returned files (16 MiB each), and its carry
# (64 MiB) beside the resume store and the tree with the row exports set aside (lab/device_slim.sh)
MAX_PIECES = 4
KIND_SETS = (("inductor", "triton", "jax"), ("inductor", "jax"), ("jax",))  # Inductor's FX graph entries
# bundle their Triton kernels, so Triton's own cache is the first to go; a left-out entry is a miss
PIECES = "{name}.cache.t?z.*"  # txz; tgz from parts packed before xz


def cache_pieces(folder: Path, name: str) -> list[Path]:
    """NAME's compiler cache pieces in the folder, in order."""
    return sorted(folder.glob(PIECES.format(name=name)))


def _open(pieces: list[Path]) -> tarfile.TarFile:
    """The tar the pieces make in order, xz or gzip (tarfile tells which)."""
    return tarfile.open(fileobj=io.BytesIO(b"".join(p.read_bytes() for p in pieces)), mode="r:*")


def members(pieces: list[Path]) -> list[str]:
    """The entries of the compressed tar that `pieces` make in order; raises if they do not make one."""
    with _open(pieces) as tar:
        return tar.getnames()


def kinds_of(names: list[str]) -> set[str]:
    """The top folders of an archive's entries: one per compiler (inductor, triton, jax)."""
    return {n.split("/")[0] for n in names}


def unpack(pieces: list[Path], to: Path) -> None:
    to.mkdir(parents=True, exist_ok=True)
    with _open(pieces) as tar:
        tar.extractall(to, filter="data")


def _xz_tar(cache: Path, kinds: list[str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:") as tar:
        for k in kinds:
            tar.add(cache / k, arcname=k)
    if shutil.which("xz"):  # every core (the device has 16)
        return subprocess.run(["xz", "-T0", "-6", "-c"], input=buf.getvalue(), stdout=subprocess.PIPE,
                              check=True).stdout
    # the lzma module uses one core: preset 3 packs a 253 MiB cache in 18 s to 12.9 MiB (6: 68 s, 9.6)
    return lzma.compress(buf.getvalue(), preset=3)


def pack(cache: Path, out: Path, name: str) -> list[str]:
    """The largest of KIND_SETS whose archive fits MAX_PIECES pieces, written as out/NAME.cache.txz.NN
    (earlier pieces of that name removed first); the kinds packed, [] when none fits or none is there."""
    for old in cache_pieces(out, name):
        old.unlink()
    for kinds in KIND_SETS:
        have = [k for k in kinds if (cache / k).is_dir()]
        if not have:
            continue
        blob = _xz_tar(cache, have)
        n = -(-len(blob) // PIECE)
        if n > MAX_PIECES:
            print(f"compiler cache: {' '.join(have)} is {len(blob) / 2**20:.0f} MiB in xz, over {MAX_PIECES} pieces")
            continue
        out.mkdir(parents=True, exist_ok=True)
        for i in range(n):
            (out / f"{name}.cache.txz.{i:02d}").write_bytes(blob[i * PIECE:(i + 1) * PIECE])
        print(f"compiler cache packed: {' '.join(have)} ({n} pieces, {len(blob) / 2**20:.0f} MiB)")
        return have
    return []


def _carried_merge(carried: list[Path], returned: list[Path], returned_kinds: set[str], name: str,
                   work: Path) -> list[Path] | None:
    """Pieces of the returned cache with the carried cache's kinds that it left out kept beside it (the
    part resumed from the carried one, so its kinds there are older but valid); None when it left out
    nothing, or when the merged archive does not fit MAX_PIECES."""
    if not carried:
        return None
    merged = work / "cache"
    with _open(carried) as tar:  # decompressed once, for its compilers and, if any is missing, its files
        missing = kinds_of(tar.getnames()) - returned_kinds
        if not missing:
            return None
        tar.extractall(merged, filter="data")
    for k in returned_kinds:
        shutil.rmtree(merged / k, ignore_errors=True)
    unpack(returned, merged)
    kinds = pack(merged, work / "pieces", name)
    if not missing <= set(kinds):
        return None
    print(f"kept the carried cache's {' '.join(sorted(missing))} beside the returned {' '.join(sorted(set(kinds) - missing))}")
    return cache_pieces(work / "pieces", name)


def take(args) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        _take(args, Path(tmp))


def _segments(folder: Path, name: str) -> list[Path]:
    """A part's files as segment writes them: its rows, then its runs table."""
    return sorted(folder.glob(f"{name}-seg*.jsonl.gz")) + sorted(folder.glob(f"{name}-seg*.runs.jsonl"))


def _take(args, tmp: Path) -> None:
    src, kept, carry = Path(args.src), Path(args.dir), Path(args.carry).parent
    segs = _segments(src, args.name)
    backup = src / f"{args.name}.sqlite.gz"
    if not segs and backup.exists():
        # a call that returned while the run went on brings a backup of its whole store; when the machine
        # is lost before the part ends, the backup's rows of the latest run are the part (to its last row)
        (tmp / "seg").mkdir()
        (tmp / "run.sqlite").write_bytes(gzip.decompress(backup.read_bytes()))
        segment(argparse.Namespace(store=str(tmp / "run.sqlite"), out=str(tmp / "seg"), name=args.name))
        print(f"no segment in {src}: its run did not end there; the rows of {backup.name}'s latest run are the part")
        src = tmp / "seg"
        segs = _segments(src, args.name)
    if not segs:
        raise SystemExit(f"sweep_parts: no {args.name}-seg* files nor a {args.name}.sqlite.gz backup in {src}")
    for f in segs:
        to = kept / f.name
        if to.exists() and to.read_bytes() != f.read_bytes():
            raise SystemExit(f"sweep_parts: {to} exists and differs: not overwritten")
    pieces = cache_pieces(src, args.name)
    if pieces:
        try:
            names = members(pieces)
        except Exception as e:
            raise SystemExit(f"sweep_parts: the returned cache pieces are not one archive ({e}); nothing taken")
    kept.mkdir(parents=True, exist_ok=True)
    for f in segs:
        shutil.copyfile(f, kept / f.name)  # a plain copy: writable, whatever the source's mode
        print(f"kept {kept / f.name}")
    if not pieces:
        print("no compiler cache returned: the next part takes the last one kept, if any")
    else:
        carry.mkdir(parents=True, exist_ok=True)
        carried = cache_pieces(carry, args.name)
        (tmp / "merge").mkdir()
        merged = _carried_merge(carried, pieces, kinds_of(names), args.name, tmp / "merge")
        if merged:
            pieces, names = merged, members(merged)
        for old in carried:  # a stale piece would corrupt the joined archive
            old.unlink()
        for f in pieces:
            shutil.copyfile(f, carry / f.name)
        size, entries = sum(f.stat().st_size for f in pieces) / 2**20, len(names)
        per = Counter(n.split("/")[0] for n in names)  # what the next part can load, by compiler
        print(f"compiler cache for the next part: {len(pieces)} pieces, {size:.0f} MiB, {entries} entries "
              f"({', '.join(f'{k} {v}' for k, v in sorted(per.items()))})")
    ledger(args)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    seg = sub.add_parser("segment", help="after a part: its rows, the runs table, the store to resume from")
    seg.add_argument("store")
    seg.add_argument("--out", required=True)
    seg.add_argument("--name", required=True)
    led = sub.add_parser("ledger", help="every kept part in one store: wall / timed, progress, resume store")
    tk = sub.add_parser("take", help="after a part: keep its rows and compiler cache, then the ledger")
    tk.add_argument("src")
    tk.add_argument("--name", default="port")
    for p in (led, tk):
        p.add_argument("--dir", default=str(HERE / "results/local/portability"))
        p.add_argument("--carry", default=str(HERE / "out/carry/port.sqlite.gz"))
    pk = sub.add_parser("pack", help="a part's compiler cache as xz pieces that one device call returns")
    pk.add_argument("cache")
    pk.add_argument("--out", required=True)
    pk.add_argument("--name", required=True)
    up = sub.add_parser("unpack", help="a carried compiler cache's pieces extracted")
    up.add_argument("pieces", nargs="+")
    up.add_argument("--to", required=True)
    args = ap.parse_args()
    if args.cmd == "pack":
        pack(Path(args.cache), Path(args.out), args.name)
    elif args.cmd == "unpack":
        unpack([Path(p) for p in args.pieces], Path(args.to))
    else:
        {"segment": segment, "ledger": ledger, "take": take}[args.cmd](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
