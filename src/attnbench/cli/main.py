"""attnbench command line: build the parser from the command list, dispatch, turn bad input into one line
and exit 2."""
from __future__ import annotations

import argparse
import logging
import sqlite3
import sys
import time

from .. import __version__
from ..status import ORDER
from .commands import COMMANDS
from .usage import Parser, UsageError

EPILOG = f"""Every attempt (workload × backend × repeat) becomes exactly one row with a status:
{", ".join(ORDER[:-1])} or {ORDER[-1]}.
Typical use:
  attnbench run                       # the smoke grid on CPU, the quick grid on a CUDA device
  attnbench run --grid quick --repeats 3
  attnbench run --devices all         # every GPU of this host
  attnbench run --executor ray --address auto   # every GPU of a Ray cluster
  attnbench show --db attnbench.sqlite
Bad input exits with code 2 and writes nothing."""


def build_parser() -> Parser:
    p = Parser(prog="attnbench", description="Truthful attention-kernel benchmarks.", epilog=EPILOG,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"attnbench {__version__}")
    p.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND", parser_class=Parser)
    for command in COMMANDS:
        sp = sub.add_parser(command.NAME, help=command.HELP, description=command.DESCRIPTION,
                            epilog=getattr(command, "EPILOG", None),
                            formatter_class=getattr(command, "FORMATTER", argparse.HelpFormatter))
        command.add_arguments(sp)
    return p


def main(argv: list[str] | None = None) -> int:
    from ..backends.registry import BackendError
    from ..procinfo import age_s
    from ..runner.options import OptionsError
    from ..store.db import StoreError
    from ..workloads import WorkloadError
    from ..workloads.grids import GridError

    # when the command began: run as a program, at the process's start (the interpreter and imports are
    # the command's too); called from Python (tests, notebooks), now
    began = time.monotonic() - ((age_s() or 0.0) if argv is None else 0.0)
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = build_parser().parse_args(argv)
        args.began, args.argv = began, list(argv)
        logging.basicConfig(level=(logging.WARNING, logging.INFO, logging.DEBUG)[min(args.verbose, 2)],
                            format="%(levelname)s %(name)s: %(message)s")
        if not args.cmd:
            build_parser().print_help()
            return 0
        return {c.NAME: c for c in COMMANDS}[args.cmd].run(args)
    except (UsageError, OptionsError, GridError, BackendError, StoreError, WorkloadError) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]  # one line, whatever the library said
        print(f"attnbench: error: {first}", file=sys.stderr)
        return 2
    except sqlite3.OperationalError as e:  # a full disk or a lock held past the timeout while writing
        print(f"attnbench: error: the store could not be written: {str(e).splitlines()[0]}; every row written "
              "before is kept: run the same command again to resume", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("attnbench: interrupted; run the same command again to resume", file=sys.stderr)
        return 130
