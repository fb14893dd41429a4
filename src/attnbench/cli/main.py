"""attnbench command line: parse, dispatch to a subcommand, turn bad input into one line and exit 2."""
from __future__ import annotations

import logging
import sqlite3
import sys
import time

from . import commands
from .parser import UsageError, build_parser


def main(argv: list[str] | None = None) -> int:
    from ..backends.registry import BackendError
    from ..store.db import StoreError
    from ..workloads import WorkloadError
    from ..workloads.grids import GridError

    from ..procinfo import age_s

    # when the command began: run as a program, at the process's start (the interpreter and imports are
    # the command's too); called from Python (tests, notebooks), now
    began = time.monotonic() - ((age_s() or 0.0) if argv is None else 0.0)
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = build_parser().parse_args(argv)
        args.began = began
        logging.basicConfig(level=(logging.WARNING, logging.INFO, logging.DEBUG)[min(args.verbose, 2)],
                            format="%(levelname)s %(name)s: %(message)s")
        if not args.cmd:
            build_parser().print_help()
            return 0
        return getattr(commands, "cmd_" + args.cmd)(args, argv)
    except (UsageError, GridError, BackendError, StoreError, WorkloadError) as e:
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
