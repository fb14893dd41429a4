"""Bad input (UsageError: one line, exit 2), the argument parser that raises it, and shared argument types."""
from __future__ import annotations

import argparse

DEFAULT_DB = "attnbench.sqlite"


class UsageError(Exception):
    """Bad input: one line, exit code 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2, no usage dump
        raise UsageError(message)


def csv_list(s: str) -> list[str]:
    """An argument type: a comma list of one or more names."""
    items = [x.strip() for x in s.split(",") if x.strip()]
    if not items:  # an empty list would silently mean "no filter": everything
        raise argparse.ArgumentTypeError(f"{s!r} names nothing")
    return items
