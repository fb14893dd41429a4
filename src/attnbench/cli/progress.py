"""The run's observer: on a terminal a spinner while the executor starts, a progress bar with ETA and
live counts per status; in a file or CI log a plain progress line at a steady interval; the end-of-run
summary."""
from __future__ import annotations

import os
import threading
import time
from collections import Counter

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from ..runner.conduct import Observer
from ..status import ORDER

INTERVAL_ENV = "ATTNBENCH_PROGRESS_S"  # seconds between progress lines when stderr is not a terminal; 0: none
DEFAULT_INTERVAL_S = 30.0
# In a log, "starting workers..." is printed once starting has taken this long (workers, ceilings: seconds
# to minutes); a start that fails sooner (a bad --devices, an unreachable cluster) prints its one error line.
STARTING_QUIET_S = 3.0
COLORS = {"OK": "green", "UNSUPPORTED": "dim", "OOM_PREDICTED": "yellow", "OOM": "yellow", "INCORRECT": "red",
          "DISPATCH_MISMATCH": "magenta", "IMPLAUSIBLE": "magenta", "TIMEOUT": "red", "CRASH": "red", "ERROR": "red"}


class _Now:
    """The line above the bar: what runs now (the task's description), cut to the console's width."""

    def __init__(self, progress: Progress):
        self.progress = progress

    def __rich__(self) -> Text:
        desc = self.progress.tasks[0].description if self.progress.tasks else ""
        return Text(f"now: {desc}" if desc else "", overflow="ellipsis", no_wrap=True, style="bold")


def interval_s(console: Console | None = None) -> float:
    """The seconds between plain progress lines: $ATTNBENCH_PROGRESS_S, else DEFAULT_INTERVAL_S (a value
    that is not a number of seconds is said on `console` and the default used)."""
    raw = os.environ.get(INTERVAL_ENV, "").strip()
    if not raw:
        return DEFAULT_INTERVAL_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not (0 <= value < float("inf")):
        if console is not None:
            console.print(f"{INTERVAL_ENV}={raw!r} is not a number of seconds: a progress line every "
                          f"{DEFAULT_INTERVAL_S:g} s", markup=False, highlight=False)
        return DEFAULT_INTERVAL_S
    return value


class SweepProgress(Observer):
    """Use as a context manager around conduct(): the bar is closed however the run ends. Two lines, so
    that an 80-column terminal shows both whole: what runs now (and where, when several devices run at
    once), then the bar, attempts done of planned, elapsed, ETA and counts per status. When the console
    is not a terminal (a file, a CI log), where a live bar would show nothing until the run ends, a
    plain line says the same every `interval_s()` seconds, and once more at the end."""

    def __init__(self, console: Console):
        self.console = console
        self.plain = not console.is_interactive
        self.interval = interval_s(console) if self.plain else 0.0
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._began = time.monotonic()
        self._eta = "-:--:--"
        self._now = ""
        self.counts: Counter = Counter()
        self.skipped = 0
        self.spinner = None
        self._starting: threading.Timer | None = None  # the plain "starting workers" line, due after a quiet spell
        self.progress = Progress(BarColumn(bar_width=16), MofNCompleteColumn(), TimeElapsedColumn(),
                                 TextColumn("ETA {task.fields[eta]}"), TextColumn("{task.fields[counts]}"),
                                 console=console)
        self.remaining = None  # runner/eta.py: Remaining, from forecast()
        self._eta_at = 0.0  # when the ETA was last worked out
        self.live = Live(Group(_Now(self.progress), self.progress), console=console, refresh_per_second=4)
        self.task = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._stop_spinner()
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=5)
        if self.task is not None:
            if self.plain:
                self._line()  # the state the run ended in
            else:
                self.live.stop()
        return False

    def _line(self) -> None:
        """One plain progress line: done of planned, elapsed, ETA, counts, what runs now."""
        if self.task is None:
            return
        task = self.progress.tasks[0]
        done, total = int(task.completed), int(task.total or 0)
        share = f" ({100 * done / total:.0f}%)" if total else ""
        counts = " ".join(f"{s} {self.counts[s]}" for s in ORDER if self.counts[s])
        counts += f" resumed-past {self.skipped}" if self.skipped else ""
        self.console.print(f"progress: {done}/{total} attempts{share}, {_clock(time.monotonic() - self._began)} "
                           f"elapsed, ETA {self._eta}" + (f"; {counts}" if counts else "")
                           + (f"; now: {self._now}" if self._now else ""),
                           markup=False, highlight=False, soft_wrap=True)

    def _tick(self) -> None:
        while not self._stop.wait(self.interval):
            self._line()

    def _stop_spinner(self) -> None:
        if self._starting is not None:
            self._starting.cancel()
            self._starting = None
        if self.spinner is not None:
            self.spinner.stop()
            self.spinner = None

    def starting(self, device: str) -> None:
        text = f"starting workers on {device} and measuring its ceilings..."
        if self.plain:  # said only when starting takes a while: a start that fails at once is its one error line
            self._starting = threading.Timer(STARTING_QUIET_S, self.console.print, (text,),
                                             {"markup": False, "highlight": False})
            self._starting.daemon = True
            self._starting.start()
            return
        self.spinner = self.console.status(escape(text))
        self.spinner.start()

    def begin(self, total: int, resumed: int, retried: int) -> None:
        self._stop_spinner()
        if retried:
            self.console.print(f"retrying {retried} attempts that ended TIMEOUT, CRASH or ERROR")
        self.skipped = resumed
        self.task = self.progress.add_task("", total=total, completed=resumed, counts=self._counts(), eta="-:--:--")
        self._began = time.monotonic()
        if not self.plain:
            self.live.start()
            return
        self._line()
        if self.interval > 0:
            self.console.print(f"(a progress line every {self.interval:g} s; {INTERVAL_ENV} sets it, 0 for none)",
                               markup=False, highlight=False)
            self._ticker = threading.Thread(target=self._tick, name="attnbench-progress", daemon=True)
            self._ticker.start()

    def forecast(self, remaining) -> None:
        self.remaining = remaining
        self._update_eta(force=True)

    def _update_eta(self, force: bool = False) -> None:
        """At most twice a second (the planned-out rows of a large grid arrive thousands at once)."""
        now = time.monotonic()
        if self.remaining is None or self.task is None or (not force and now - self._eta_at < 0.5):
            return
        self._eta_at = now
        self._eta = _clock(self.remaining.seconds())  # here, on the run's thread: the ticker only reads it
        self.progress.update(self.task, eta=self._eta)

    def _counts(self) -> str:
        text = " ".join(f"[{COLORS[s]}]{s} {self.counts[s]}[/]" for s in ORDER if self.counts[s])
        return text + (f" [dim]resumed-past {self.skipped}[/]" if self.skipped else "")

    def attempt(self, attempt, where: str | None = None) -> None:
        """Name what runs now: the backend and the workload (a compile can take minutes), and where
        when several devices run at once (the one that started last)."""
        w = attempt.workload
        what = f"{attempt.backend.name} {w.mode} B{w.batch} N{w.kv_len} {w.launch} r{attempt.repeat}"
        self._now = f"{where} {what}" if where else what
        self.progress.update(self.task, description=self._now)

    def row(self, row: dict) -> None:
        self.counts[row["status"]] += 1
        self.progress.update(self.task, advance=1, counts=self._counts())
        self._update_eta()


def _clock(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def summary(console: Console, store, counts: Counter, skipped: int, db, overhead: dict | None = None,
            startup_s: float | None = None) -> None:
    parts = ", ".join(f"{s} {counts[s]}" for s in ORDER if counts[s]) or "nothing new"
    console.print(f"[bold]done[/]: {sum(counts.values())} attempts this run ({parts})"
                  + (f"; {skipped} already in the store" if skipped else ""))
    if startup_s is not None:  # worker start and provenance are in it, the rest of the ledger is not
        console.print(f"start-up before the first attempt: {startup_s:.1f} s")
    if overhead:
        console.print("sweep overhead outside attempts: " + ", ".join(f"{k.replace('_', ' ')} {v:.1f} s"
                                                                    for k, v in overhead.items()))
    console.print(f"store: {escape(str(db))} ({store.count()} attempts)")
    console.print(f"see results: [bold]attnbench show --db {escape(str(db))}[/]")
