"""The run's progress display names what runs now, and on which device when several run at once, in
two lines that an 80-column terminal shows whole."""
from __future__ import annotations

import io
from types import SimpleNamespace

from rich.console import Console

from attnbench.cli.progress import SweepProgress


def attempt(backend: str, repeat: int = 0):
    w = SimpleNamespace(mode="decode", batch=8, kv_len=4096, launch="graph")
    return SimpleNamespace(backend=SimpleNamespace(name=backend), workload=w, repeat=repeat)


def screen(p: SweepProgress, width: int = 80) -> list[str]:
    c = Console(file=io.StringIO(), width=width, color_system=None, force_terminal=True)
    c.print(p.live.renderable)
    return c.file.getvalue().rstrip("\n").split("\n")


def test_the_display_names_the_attempt_the_device_and_the_counts_within_80_columns():
    console = Console(file=io.StringIO(), width=80, force_terminal=False)
    with SweepProgress(console) as p:
        p.begin(total=1491, resumed=300, retried=0)
        p.attempt(attempt("flex", 2))
        now, bar = screen(p)
        assert now == "now: flex decode B8 N4096 graph r2"
        p.attempt(attempt("sdpa-cudnn"), "cuda:1")
        for _ in range(1234 - 300):
            p.row({"status": "OK"})
        for _ in range(40):
            p.row({"status": "UNSUPPORTED"})
        now, bar = screen(p)
        assert now == "now: cuda:1 sdpa-cudnn decode B8 N4096 graph r0"
        assert "1274/1491" in bar and "ETA" in bar and "OK 934 UNSUPPORTED 40 resumed-past 300" in bar, bar
        assert len(bar) <= 80 and "…" not in bar
        p.attempt(attempt("[red]a-plugin[/red]-backend-" + "x" * 60), "cuda:0")
        now, _ = screen(p)
        assert now.startswith("now: cuda:0 [red]a-plugin[/red]") and len(now) == 80  # literal, cut to the width


def test_in_a_log_the_last_state_ends_its_line():
    """(Plain progress lines in a log at a steady interval: tests/test_output_ci.py.)"""
    out = io.StringIO()
    console = Console(file=out, width=80, force_terminal=False)
    with SweepProgress(console) as p:
        p.begin(total=1, resumed=0, retried=0)
        p.attempt(attempt("flex"))
        p.row({"status": "OK"})
    console.print("done")
    lines = out.getvalue().split("\n")
    assert lines[-3].startswith("progress: 1/1 attempts (100%)"), lines
    assert lines[-3].endswith("; OK 1; now: flex decode B8 N4096 graph r0") and lines[-2] == "done"


def test_the_eta_is_the_forecasts_and_is_worked_out_at_most_twice_a_second(monkeypatch):
    """The bar's ETA is Remaining.seconds() (runner/eta.py), not a rate over the last seconds; the
    planned-out rows of a large grid arrive thousands at once and do not each work it out again."""
    import attnbench.cli.progress as progress

    class Forecast:
        calls = 0

        def seconds(self):
            self.calls += 1
            return 4 * 3600 + 62.4

    clock = [100.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    console = Console(file=io.StringIO(), width=80, force_terminal=False)
    with SweepProgress(console) as p:
        p.begin(total=25344, resumed=0, retried=0)
        assert "ETA -:--:--" in screen(p)[1]
        f = Forecast()
        p.forecast(f)
        assert "ETA 4:01:02" in screen(p)[1] and f.calls == 1
        for _ in range(5000):
            p.row({"status": "UNSUPPORTED"})
        assert f.calls == 1
        clock[0] += 0.6
        p.row({"status": "OK"})
        assert f.calls == 2
