"""Output files of the commands that read stores side by side: checked before reading, written whole."""
from __future__ import annotations

import contextlib
from pathlib import Path

from .usage import UsageError


def writable(path: str | None, option: str, reads=()) -> Path | None:
    """The path of an output option, refused (UsageError) when its directory is missing, it is one, it is
    one of the files the command `reads` (an export read and written at once), or it is a SQLite database
    or the -wal, -shm or -journal file beside one (store/io.py)."""
    from ..store.db import StoreError
    from ..store.io import refuse_to_overwrite_a_store

    if path is None:
        return None
    p = Path(path)
    if not p.parent.exists():
        raise UsageError(f"directory of {option} does not exist: {p.parent}")
    try:
        refuse_to_overwrite_a_store(None, p, option)
    except StoreError as e:
        raise UsageError(str(e)) from None
    if any(p.resolve() == Path(r).resolve() for r in reads):  # an export read and written at once
        raise UsageError(f"{option} {p} is a file this command reads; write the output elsewhere")
    return p


def write_whole(path: Path, text: str) -> None:
    """Write text to path through a .partial file renamed at the end: a full disk or a read-only place is one
    line (UsageError), with nothing half-written under either name."""
    tmp = path.with_name(path.name + ".partial")
    try:
        tmp.write_text(text)
        tmp.replace(path)  # nothing half-written under the final name
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror or e}") from None
    finally:
        with contextlib.suppress(OSError):  # a read-only place refuses even the removal of what is not there
            tmp.unlink(missing_ok=True)
