"""A run's store and compiler cache around conduct(): opened first (a path that is no store, or a store that
cannot be written, is refused before any worker starts); a store this run created is removed when the run
failed before it wrote a run or an attempt; the sweep's compiler cache held while the run lives, then kept
for the resume or removed when no other live run uses it (runner/compile_cache.py)."""
from __future__ import annotations

import sqlite3
from pathlib import Path

from ..store.db import Store, StoreError
from .compile_cache import CompileCache


class RunSession:
    def __init__(self, db: Path, log: Path, cache: CompileCache):
        self.db, self.cache = db, cache
        self.new_db, self.log = not db.exists(), None if log.exists() else log  # log: one this run creates
        self.store = Store(db)
        try:
            writable(self.store, db)
        except StoreError:
            self.store.close()
            raise
        self.lease = cache.enter()  # taken before the executor reads the cache: held until failed()/finished()

    def failed(self, bad_input: bool) -> int | None:
        """The run failed or was interrupted: drop what it created if it wrote nothing (bad_input: the log
        goes too). Bytes of compiled code kept for the resume, or None."""
        dropped = self.new_db and drop_unused(self.store, self.db, self.log, bad_input)
        lease, self.lease = self.lease, None
        return self.cache.after_failure(dropped, lease)

    def finished(self, held: int) -> None:
        """The run ended; `held` attempts are still claimed by another run."""
        lease, self.lease = self.lease, None
        self.cache.after_run(held, lease)

    def close(self) -> None:
        if self.lease is not None:  # neither failed() nor finished() ran: keep the cache, let go of it
            self.lease.end(remove=False)
            self.lease = None
        self.store.close()


def writable(store: Store, db: Path) -> None:
    """StoreError (one line, exit 2) when the store cannot be written: found before any worker starts, not at
    the run's first row. The probe rewrites one value as it is, in a transaction of its own."""
    try:
        with store.con:
            store.con.execute("UPDATE meta SET value=value WHERE key='schema_version'")
    except sqlite3.OperationalError as e:
        raise StoreError(f"{db} cannot be written ({e}): a run stores its rows there; make it writable or "
                         "choose another --db") from None


def drop_unused(store: Store, db: Path, log: Path | None, bad_input: bool) -> bool:
    """A run that failed before its run row (the cluster or a device refused it, interrupted while
    starting) leaves nothing behind: the store this command created is removed when it holds no run
    and no attempt; so is the log it created (`log`, None when it was there before), when the failure
    was bad input or the log is empty (a log that says why workers failed stays). True when the store
    was removed."""
    try:
        if store.count() or store.runs():
            return False
    except sqlite3.Error:
        return False
    store.close()
    for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm"), Path(f"{db}-journal")):
        p.unlink(missing_ok=True)
    if log is not None and log.exists() and (bad_input or log.stat().st_size == 0):
        log.unlink()
    return True
