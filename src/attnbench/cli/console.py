"""The rich consoles every command prints to: `out` (results) and `err` (progress, notes, what was written).

Commands look them up at call time (`console.out`), so that the entry point and tests can replace them."""
from __future__ import annotations

from rich.console import Console

err = Console(stderr=True)
out = Console()
