"""Rich progress bar with ETA and live counts per status, and the end-of-sweep summary."""
from __future__ import annotations

from collections import Counter

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from ..status import ORDER

COLORS = {"OK": "green", "UNSUPPORTED": "dim", "OOM_PREDICTED": "yellow", "OOM": "yellow", "INCORRECT": "red",
          "DISPATCH_MISMATCH": "magenta", "TIMEOUT": "red", "CRASH": "red", "ERROR": "red"}


class SweepProgress:
    def __init__(self, total: int, console: Console):
        self.counts: Counter = Counter()
        self.skipped = 0
        self.progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                                 TextColumn("{task.fields[counts]}"), console=console)
        self.task = self.progress.add_task("sweep", total=total, counts="")

    def __enter__(self):
        self.progress.__enter__()
        return self

    def __exit__(self, *exc):
        return self.progress.__exit__(*exc)

    def update(self, row: dict) -> None:
        if row["status"] == "SKIPPED":
            self.skipped += 1
        else:
            self.counts[row["status"]] += 1
        text = " ".join(f"[{COLORS[s]}]{s} {self.counts[s]}[/]" for s in ORDER if self.counts[s])
        if self.skipped:
            text += f" [dim]resumed-past {self.skipped}[/]"
        desc = f"{row['backend'][:16]:<16}"
        self.progress.update(self.task, advance=1, counts=text, description=desc)


def summary(console: Console, store, counts: Counter, skipped: int, db, overhead: dict | None = None) -> None:
    parts = ", ".join(f"{s} {counts[s]}" for s in ORDER if counts[s]) or "nothing new"
    console.print(f"[bold]done[/]: {sum(counts.values())} attempts this run ({parts})"
                  + (f"; {skipped} already in the store" if skipped else ""))
    if overhead:
        console.print("sweep overhead outside attempts: " + ", ".join(f"{k.replace('_', ' ')} {v:.1f} s"
                                                                    for k, v in overhead.items()))
    console.print(f"store: {db} ({store.count()} attempts)")
    console.print(f"see results: [bold]attnbench show --db {db}[/]")
