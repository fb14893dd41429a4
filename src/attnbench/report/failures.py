"""`show --failures` in the terminal: the attempts that did not end OK, one entry per status and reason."""
from __future__ import annotations

from rich import box
from rich.table import Table
from rich.text import Text

REASON_CHARS = 160  # a library's refusal can run to pages; --format json keeps it whole
WORKLOADS = 3  # example workloads named per group
BACKENDS = 6  # backends named per group


def _cut(text: str, most: int) -> str:
    return text if len(text) <= most else text[:most] + " …"


def groups_table(groups: list[dict], attempts: int) -> Table:
    """analysis/failures.reason_groups' records as one table: per group the attempts, the status, the
    backends, the first reason and example workloads; every name and reason is text, never markup."""
    t = Table(title=f"Attempts that did not end OK: {attempts}, in {len(groups)} group(s) of status and reason "
                    "(numbers in the reason aside)", box=box.SIMPLE_HEAD, title_justify="left", pad_edge=False,
              caption="show --failures --format json (or csv, md) lists every attempt with its whole reason",
              caption_justify="left")
    t.add_column("n", justify="right", no_wrap=True)
    t.add_column("status, backends, reason (the group's first), workloads", overflow="fold")
    for g in groups:
        names = ", ".join(f"{b} {n}" for b, n in g["backends"][:BACKENDS])
        more_b = len(g["backends"]) - BACKENDS
        shown = g["workloads"][:WORKLOADS]
        more_w = len(g["workloads"]) - len(shown)
        cell = Text()
        cell.append(g["status"], style="bold")
        cell.append(f"  {names}" + (f" and {more_b} more" if more_b > 0 else "") + "\n")
        cell.append(_cut(str(g["reason"]), REASON_CHARS) + "\n", style="dim")
        more = f" (+{more_w} more workloads)" if more_w > 0 else ""
        cell.append(("e.g. " if more else "workloads: ") + "; ".join(shown) + more)
        t.add_row(str(g["attempts"]), cell)
    return t
