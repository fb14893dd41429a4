"""The commands, in the order `attnbench --help` lists them: one module each, with NAME, HELP, DESCRIPTION,
optionally EPILOG and FORMATTER, add_arguments(parser) and run(args) -> int. Adding a command is one new
module here plus one entry in COMMANDS."""
from __future__ import annotations

from . import (advise, analyze, backends, compare, env, explain, export, import_, model, referee, report, run, selftest,
               show)

COMMANDS = (run, selftest, backends, env, show, export, import_, analyze, compare, advise, model, report, explain,
            referee)
