"""The attempt's steps (runner/attempt.py STEPS): named once, phases as the row documents them, every
decision a gate of runner/gates.py."""
from __future__ import annotations

from attnbench import record
from attnbench.runner import attempt, gates, steps


def test_step_names_are_unique():
    names = [s.name for s in attempt.STEPS]
    assert len(names) == len(set(names))


def test_the_phases_are_the_rows_phases_in_their_order():
    # phases_s keeps the order phases first run in; a phase met again (probe, recheck) adds up
    seen = []
    for s in attempt.STEPS:
        if s.phase and s.phase not in seen:
            seen.append(s.phase)
    doc = next(c.doc for c in record.COLUMNS if c.name == "phases_s")
    assert doc.split(": ", 1)[1].split(", ") == seen


def test_every_step_either_measures_or_is_a_gate():
    for s in attempt.STEPS:
        assert s.run.__module__ in (steps.__name__, gates.__name__), s.name
        if s.run.__module__ == gates.__name__:
            assert s.phase is None, f"{s.name}: a gate decides on what was measured; it is not timed"
    assert all(s.when is None or s.when.__module__ == gates.__name__ for s in attempt.STEPS)
