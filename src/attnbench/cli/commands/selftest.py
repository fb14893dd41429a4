"""`attnbench selftest`: the shipped misbehaving kernels through the normal gates on this device; one line per class."""
from __future__ import annotations

import json
import socket
from datetime import datetime, timezone
from pathlib import Path

from rich.markup import escape

from .. import console
from ...selftest.classes import CASES
from ..usage import UsageError, csv_list

NAME = "selftest"
HELP = "check that the gates catch every class of misbehaving kernel on this device (run it before a sweep)"
DESCRIPTION = ("Run attnbench's own misbehaving kernels (work on a side stream never joined, a CUDA graph that "
               "captured nothing, results cached on the inputs' identity or values, inputs written in place, late "
               "and partial fallbacks, a compiled path that ran eager, work a host thread does behind the clock, "
               "an output left unwritten, wrong gradients) through the same workers, gates and checks as `run`, on "
               "this device, beside an honest control kernel that must stay OK. Prints one line per class (caught "
               "as which status, or MISSED) and the detection rate; exits 1 when a class is not caught or the "
               "control is not OK. A CPU runs the classes a CPU can mean and names the others.")


def add_arguments(p) -> None:
    p.add_argument("--device", help="cpu, cuda or cuda:N (default: cuda if present, else cpu)")
    p.add_argument("--json", metavar="FILE", help="also write the result as JSON to FILE")
    p.add_argument("--db", metavar="STORE",
                   help="also store the result in STORE's selftests table (the report's methodology page shows the "
                        "last selftest of each device); the selftest's own attempts are never stored")
    p.add_argument("--only", type=csv_list, metavar="CLASS,...",
                   help=f"run only these classes (not with --db): {', '.join(c.name for c in CASES)}")
    p.add_argument("--timeout", type=float, default=120.0, metavar="S",
                   help="seconds per attempt before its worker is killed (default 120)")


def run(args) -> int:
    from ...selftest import suite

    unknown = [n for n in args.only or () if n not in {c.name for c in CASES}]
    if unknown:
        raise UsageError(f"--only: no class {unknown[0]!r}; the classes: {', '.join(c.name for c in CASES)}")
    from ...runner.options import check_device

    if args.only and args.db:  # the report shows a stored selftest as the device's: a subset would pass for it
        raise UsageError("--db stores whole selftests only: leave out --only")
    if args.device is not None:
        check_device(args.device)  # a device this host lacks: one line, exit 2, before any file is made
    out = _checked_path(args.json, "--json") if args.json else None
    db = _checked_path(args.db, "--db") if args.db else None
    if db is not None and db.exists():  # a file that is no store is refused now, not after the run
        from ...store.db import Store

        Store(db).close()
    began = datetime.now(timezone.utc)
    with console.err.status("selftest: starting workers and running every class..."):
        try:
            result = suite.run(args.device, timeout_s=args.timeout, only=args.only)
        except ValueError as e:  # --only names no class this device can run (found before any worker starts)
            raise UsageError(str(e)) from None
    _print(result)
    data = result.to_json()
    if out is not None:
        out.write_text(json.dumps(data, indent=2) + "\n")
    if db is not None:
        from ...store.selftests import save

        stamp = began.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        save(db, {"selftest_id": f"{stamp}@{socket.gethostname()}", "started_at": stamp,
                  **{k: data[k] for k in ("device", "device_name", "classes", "caught", "passed", "control",
                                          "fresh_inputs", "wall_s", "versions", "verdicts", "gpu_only")}})
    return 0 if result.ok else 1


def _checked_path(name: str, flag: str) -> Path:
    """A file the command will write: its folder must exist and it must not be a folder (checked before the run)."""
    p = Path(name)
    if p.is_dir() or not p.parent.is_dir():
        raise UsageError(f"{flag} {name}: not a file in a folder that exists")
    return p


def _print(result) -> None:
    width = max((len(v.case) for v in result.verdicts), default=10)
    o = console.out
    fresh = "on for the cache classes"
    o.print(f"selftest on {escape(result.device)} ({escape(result.device_name or '?')}); fresh inputs {fresh}",
            soft_wrap=True)
    for v in result.verdicts:
        mark = "[green]caught[/]" if v.caught else f"[bold red]{'MISSED' if v.shown == 'MISSED' else 'NOT RUN'}[/]"
        shown = f"as {v.shown}" if v.caught else (v.status or "no row")
        o.print(f"  {escape(v.case):<{width}}  {mark} {escape(shown)}: {escape(v.detail[:160])}", soft_wrap=True)
    for c in result.skipped:
        o.print(f"  {escape(c.name):<{width}}  [dim]GPU only: {escape(c.gpu_only)}[/]", soft_wrap=True)
    control = "[green]OK[/]" if result.control.startswith("OK") else f"[bold red]{escape(result.control[:200])}[/]"
    o.print(f"  {'control':<{width}}  honest kernel {control}", soft_wrap=True)
    n = len(result.verdicts)
    rate = f"{result.caught}/{n} classes caught ({100 * result.caught / max(n, 1):.0f}%)"
    o.print(f"{'[green]' if result.ok else '[bold red]'}{rate}[/] in {result.wall_s:.1f} s", soft_wrap=True)
