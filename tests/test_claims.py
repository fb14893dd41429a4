"""Claims that expire: a claim of another host lapses CLAIM_STALE_S after its run's last heartbeat, or at once
with --take-over-claims; a run killed on another host is resumed to completion here; SIGTERM and a full disk
end a run as Ctrl-C does (claims released, one line)."""
from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import time

import pytest

from attnbench.store.db import Store
from conftest import ATTNBENCH, FAKES, TINY_GRID, needs_console_script, rows_of

AWAY = "gpu-node-17 boot=5f0c start=81234"  # a claim written by a run on another host


def stamp(seconds_ago: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - seconds_ago))


def claim_away(con, key: str, seconds_ago: float) -> None:
    con.execute("INSERT OR REPLACE INTO claims VALUES (?, 'far-run', ?, 4242, ?)", (key, AWAY, stamp(seconds_ago)))
    con.commit()


def test_a_claim_of_another_host_lapses_without_its_heartbeat(tmp_path):
    from attnbench.store import claims

    s = Store(tmp_path / "s.sqlite")
    claim_away(s.con, "stale", claims.CLAIM_STALE_S + 60)  # its run stopped refreshing 11 minutes ago
    claim_away(s.con, "fresh", 30)  # refreshed 30 s ago: that run is alive
    assert s.claim("stale", "run-here")  # was refused forever ("another run claims them")
    assert not s.claim("fresh", "run-here")
    assert s.claim("fresh", "run-here", take_over=True)  # the user says that run is gone
    assert {r[0] for r in s.con.execute("SELECT host FROM claims")} == {claims.own_id()}
    s.close()


def test_claims_left_on_attempts_that_have_rows_go_with_the_next_release(tmp_path):
    from conftest import make_row

    s = Store(tmp_path / "s.sqlite")
    s.insert(make_row(0))  # written by a run that then could not release its claim (a full disk)
    claim_away(s.con, "key0000", 5)
    claim_away(s.con, "running", 5)
    s.release_claims("run-here")
    assert [k for (k,) in s.con.execute("SELECT attempt_key FROM claims")] == ["running"]
    s.close()


def test_a_claim_whose_time_cannot_be_read_is_held_and_a_live_local_one_is_never_taken_over(tmp_path):
    from attnbench.store import claims

    s = Store(tmp_path / "s.sqlite")
    s.con.execute("INSERT INTO claims VALUES ('odd', 'far-run', ?, 1, 'yesterday')", (AWAY,))
    s.con.execute("INSERT INTO claims VALUES ('mine', 'live-run', ?, ?, ?)",
                  (claims.own_id(), os.getpid(), stamp(9999)))
    s.con.commit()
    assert not s.claim("odd", "run-here")
    assert not s.claim("mine", "run-here", take_over=True)  # this host knows that process is alive
    s.close()


def test_a_live_run_refreshes_its_claims(tmp_path):
    from attnbench.store import claims

    s = Store(tmp_path / "s.sqlite")
    assert s.claim("k1", "run-a")
    s.con.execute("UPDATE claims SET claimed_at=?", (stamp(3000),))
    s.con.commit()
    with claims.Heartbeat(s.path, "run-a", every_s=0.05):
        deadline = time.monotonic() + 20
        while claims.age_s(s.con.execute("SELECT claimed_at FROM claims").fetchone()[0]) > 60:
            assert time.monotonic() < deadline, "the heartbeat never refreshed the claim"
            time.sleep(0.05)
    s.close()


def test_who_holds_claims_is_said_with_how_fresh_they_are():
    from attnbench.store import claims

    rows = [{"host": AWAY, "pid": 4242, "claimed_at": stamp(42)}, {"host": AWAY, "pid": 4242, "claimed_at": stamp(90)}]
    said = claims.describe(rows)  # one holder, its freshest claim
    assert re.fullmatch(r"gpu-node-17 pid 4242, refreshed 4\d s ago", said), said


@pytest.mark.slow
def test_a_run_killed_on_another_host_is_resumed_to_completion_on_this_one(cli, tmp_path, write_yaml):
    db = tmp_path / "s.sqlite"
    argv = ("run", "--config", write_yaml(TINY_GRID), "--backends", "reference", "--repeats", "2", "--max-time",
            "0.05", "--db", db, "--device", "cpu")
    assert cli(*argv).rc == 0
    con = sqlite3.connect(db)
    keys = [k for (k,) in con.execute("SELECT attempt_key FROM attempts ORDER BY rowid LIMIT 2")]
    con.executemany("DELETE FROM attempts WHERE attempt_key=?", [(k,) for k in keys])  # killed mid-attempt there
    for k in keys:
        claim_away(con, k, 90)  # ... 90 s ago: its claims look alive for another 8.5 minutes
    res = cli(*argv)
    assert res.rc == 0 and "2 attempts have no row" in res.err and "gpu-node-17 pid 4242" in res.err, res.err
    assert "--take-over-claims" in res.err
    res = cli(*argv, "--take-over-claims")  # the user knows that job is gone
    assert res.rc == 0 and "have no row" not in res.err, res.err
    assert len(rows_of(db)) == 4 and not con.execute("SELECT * FROM claims").fetchall()
    con.execute("DELETE FROM attempts WHERE attempt_key=?", (keys[0],))
    claim_away(con, keys[0], 605)  # killed 10 minutes ago (store/claims.py CLAIM_STALE_S): no option needed
    res = cli(*argv)
    assert res.rc == 0 and "have no row" not in res.err, res.err
    assert len(rows_of(db)) == 4 and not con.execute("SELECT * FROM claims").fetchall()
    con.close()


@needs_console_script
@pytest.mark.slow
def test_sigterm_ends_a_run_as_ctrl_c_does(tmp_path):
    """A batch system's stop: workers stopped, the run's claims released, one line, exit 128 + 15; the
    resume then runs the attempt."""
    db, grid = tmp_path / "s.sqlite", tmp_path / "g.yaml"
    grid.write_text("workloads:\n  - {mode: prefill, batch: 1, q_heads: 2, kv_heads: 1, head_dim: 16, seqlen: 32, "
                    "dtype: fp32}\n")
    argv = [ATTNBENCH, "run", "--config", str(grid), "--plugin", FAKES, "--repeats", "1", "--max-time", "0.05",
            "--db", str(db), "--device", "cpu", "--timeout", "120"]
    p = subprocess.Popen([*argv, "--backends", "fake-hang"], cwd=tmp_path, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env={**os.environ, "ATTNBENCH_PROGRESS_S": "0"})
    try:
        deadline = time.monotonic() + 240
        while not (db.exists() and _claims(db)):  # the hanging attempt is claimed: the run is in it
            assert p.poll() is None and time.monotonic() < deadline, p.communicate()
            time.sleep(0.2)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
    finally:
        p.kill()
    assert p.returncode == 128 + signal.SIGTERM, err  # was -15: killed where it stood, without a word
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines[-1].startswith("attnbench: terminated (SIGTERM)") and "Traceback" not in err, err
    assert _claims(db) == []  # were left behind
    assert rows_of(db) == []  # the hanging attempt has no row: the resume runs it


def _claims(db) -> list:
    con = sqlite3.connect(db, timeout=30)
    try:
        return con.execute("SELECT * FROM claims").fetchall()
    except sqlite3.OperationalError:  # the run has not made its tables yet
        return []
    finally:
        con.close()


DISK_FULL = '''
from attnbench.backends.base import Backend


class DiskFull(Backend):
    def prepare(self, w, inputs):
        raise OSError(28, "No space left on device", "/tmp/torchinductor/xy/kernel.cpp")


BACKENDS = [DiskFull(name="fake-disk-full", family="plugin", kernel_families={"cpu": frozenset({"unfused-gemm"})})]
'''


@pytest.mark.slow
def test_a_full_disk_stops_the_run_in_one_line_and_charges_no_backend(cli, tmp_path, write_yaml):
    plugin = tmp_path / "full.py"
    plugin.write_text(DISK_FULL)
    db = tmp_path / "s.sqlite"
    res = cli("run", "--config", write_yaml(TINY_GRID), "--plugin", plugin, "--backends", "fake-disk-full",
              "--repeats", "1", "--max-time", "0.05", "--db", db, "--device", "cpu")
    assert res.rc == 1, res.err  # was 0, with an ERROR row blaming the backend for the host's disk
    lines = [ln for ln in res.err.splitlines() if ln.startswith("attnbench:")]
    assert len(lines) == 1 and "the disk is full" in lines[0] and "Traceback" not in res.err, res.err
    assert rows_of(db) == [] and _claims(db) == []
