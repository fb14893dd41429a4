"""Output files of the commands that read stores side by side: checked before reading, written whole."""
from __future__ import annotations

from pathlib import Path

from .usage import UsageError


def writable(path: str | None, option: str) -> Path | None:
    """The path of an output option, refused (UsageError) when its directory is missing or it is one."""
    if path is None:
        return None
    p = Path(path)
    if not p.parent.exists():
        raise UsageError(f"directory of {option} does not exist: {p.parent}")
    if p.is_dir():
        raise UsageError(f"{option} is a directory: {p}")
    return p


def write_whole(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".partial")
    tmp.write_text(text)
    tmp.replace(path)  # nothing half-written under the final name

