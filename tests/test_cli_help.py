"""--help explains every command and every option."""
from __future__ import annotations

import argparse

from attnbench.cli.main import build_parser


def subparsers():
    p = build_parser()
    (sub,) = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
    return sub.choices


def test_every_command_has_a_description_and_every_option_a_help_text():
    missing = []
    for name, sp in subparsers().items():
        if not sp.description:
            missing.append(f"{name}: no description")
        for a in sp._actions:
            if isinstance(a, argparse._HelpAction) or a.help == argparse.SUPPRESS:
                continue
            if not a.help:
                missing.append(f"{name} {'/'.join(a.option_strings) or a.dest}: no help")
    assert not missing, missing


def test_help_is_readable_at_80_columns(monkeypatch, capsys):
    import pytest

    monkeypatch.setenv("COLUMNS", "80")
    for name in subparsers():
        with pytest.raises(SystemExit):
            build_parser().parse_args([name, "--help"])
        text = capsys.readouterr().out
        assert max(len(line) for line in text.splitlines()) <= 80, name
        assert "%%" not in text, name  # a description is printed as written: one % is one %
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--help"])
    assert "%%" not in capsys.readouterr().out
