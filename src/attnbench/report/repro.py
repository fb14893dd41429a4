"""show --repro in the terminal: per attempt, the command and grid block that re-measure it (issue 42.4)."""
from __future__ import annotations

import pandas as pd
from rich.text import Text


def repro_lines(frame: pd.DataFrame) -> list:
    """Per row: the attempt, its command, its YAML block (indented) and its versions, never wrapped (a
    command folded at the terminal's width would not paste)."""
    if frame.empty:
        return ["no attempt in the selection"]
    out = []
    for r in frame.to_dict("records"):
        block = "\n".join("    " + line for line in r["yaml"].splitlines())
        out.append(Text(f"{r['backend']} {r['status']} {r['workload']} (attempt {r['attempt_key']}, workload "
                        f"{r['workload_key']})\n  {r['command']}\n  repro-{r['workload_key'][:8]}.yaml:\n{block}\n"
                        f"  ran under: {r['versions']}\n", no_wrap=True, overflow="ignore"))
    return out
