"""A run's options (runner/options.py), its compiler-cache policy (runner/compile_cache.py), its store's
lifecycle (runner/session.py), and the executor registry the run command reads (runner/executors/)."""
from __future__ import annotations

import re

import pytest

from attnbench.backends.base import DeviceInfo
from attnbench.runner.compile_cache import CompileCache, sweep_cache_of
from attnbench.runner.executors import REGISTRY
from attnbench.runner.executors.base import Executor, Placement, Registration, Started, Target
from attnbench.runner.options import OptionsError, run_options
from attnbench.runner.session import RunSession
from attnbench.store.db import Store
from conftest import FAKES, TINY_GRID


CPU = {"device": "cpu"}


@pytest.mark.parametrize("kw,text", [
    (dict(device="tpu"), "bad --device 'tpu'"),
    (dict(CPU, address="auto"), "--address needs --executor ray"),
    (dict(CPU, replicate=True), "--replicate needs --devices"),
    (dict(CPU, devices="cpu:0,cpu:1"), "--device and --devices exclude each other"),
    (dict(devices="cpu:0,cpu:0"), "names cpu:0 twice"),
    (dict(executor="slurm"), "unknown executor 'slurm'"),
    (dict(CPU, repeats=0), "--repeats must be at least 1"),
    (dict(CPU, tol=float("inf")), "--tol must be positive and finite"),
    (dict(CPU, timeout_s=-1.0), "--timeout must be positive"),
    (dict(CPU, tag=" "), "--tag is empty"),
    (dict(CPU, db="{d}/no/x.sqlite"), "directory of --db does not exist"),
    (dict(CPU, compile_cache="{d}/no/cache"), "is not a directory that exists or can be made"),
])
def test_bad_options_are_one_options_error(tmp_path, kw, text):
    kw = {k: v.format(d=tmp_path) if isinstance(v, str) else v for k, v in kw.items()}
    with pytest.raises(OptionsError, match=re.escape(text)) as e:
        run_options(**{"db": str(tmp_path / "s.sqlite"), **kw})
    assert isinstance(e.value, ValueError) and list(tmp_path.iterdir()) == []  # nothing written


def test_options_name_the_target_and_the_sweeps_cache(tmp_path):
    db = tmp_path / "s.sqlite"
    one = run_options(device="cpu", db=str(db))
    assert (one.device, one.label, one.target.devices) == ("cpu", "cpu", None)
    assert one.cache == CompileCache(None, sweep_cache_of(db)) and one.log_path == str(tmp_path / "s.sqlite.log")
    two = run_options(devices="cpu:0,cpu:1", replicate=True, db=str(db))
    assert (two.device, two.label, [d.label for d in two.target.devices]) == ("cpu", "cpu:0,cpu:1", ["cpu:0", "cpu:1"])
    assert run_options(device="cpu", db=str(db), dry_run=True).cache == CompileCache(None, None)  # writes nothing
    named = run_options(device="cpu", db=str(db), compile_cache=str(tmp_path / "mine"))
    assert named.cache == CompileCache(tmp_path / "mine", None)  # the user's: never removed
    cfg = named.worker_config()
    assert cfg.compile_cache == str((tmp_path / "mine").resolve()) and cfg.run_cache is None


def test_the_sweeps_cache_is_kept_for_the_resume_and_removed_when_the_sweep_has_finished(tmp_path):
    db = tmp_path / "s.sqlite"
    cache = CompileCache.of(db, None, sweep=True)
    assert cache.worker_config()["run_cache_resumed"] is False
    (cache.sweep / "inductor").mkdir(parents=True)
    (cache.sweep / "inductor" / "k").write_text("compiled")
    assert cache.worker_config()["run_cache_resumed"] is True
    assert cache.after_failure(store_dropped=False) == len("compiled") and cache.sweep.is_dir()
    cache.after_run(held=3)  # another run still holds attempts: the sweep goes on
    assert cache.sweep.is_dir()
    cache.after_run(held=0)
    assert not cache.sweep.exists()
    assert CompileCache.of(db, None, sweep=False) == CompileCache(None, None)  # workers on other hosts
    sweep_cache_of(db).write_text("not a directory")
    with pytest.raises(ValueError, match="not a directory"):
        CompileCache.of(db, None, sweep=True)


def test_a_store_the_run_created_goes_when_the_run_wrote_nothing(tmp_path):
    db, log = tmp_path / "s.sqlite", tmp_path / "s.sqlite.log"
    session = RunSession(db, log, CompileCache(None, None))
    log.write_text("why a worker failed\n")
    assert session.failed(bad_input=False) is None
    session.close()
    assert not db.exists() and log.exists()  # a log that says why stays, unless the input was bad
    Store(db).close()
    session = RunSession(db, log, CompileCache(None, None))  # the store was there before: it stays
    session.failed(bad_input=True)
    session.close()
    assert db.exists()


class Recording(Executor):
    """An executor of one fake device that plans like any other and runs nothing."""

    def start(self, device, backends):
        prov = {"device": {"type": "cpu", "name": "CPU recorded", "total_memory": 1 << 40}}
        self.started = Started(prov, DeviceInfo.from_dict(prov["device"]), Placement("CPU recorded", 0))
        return self.started

    def run(self, attempts, sink, claim=None):
        raise AssertionError("a dry run runs nothing")


def test_an_executor_is_one_class_plus_one_registration(cli, tmp_path, monkeypatch):
    """--executor's choices come from the registry; the run command builds what the registration builds."""
    built = []

    def build(cfg, target, replicate, address):
        built.append((target.label, cfg.timeout_s))
        return Recording()

    reg = Registration("recording", lambda device, devices, replicate, address: Target("cpu", None, "rec:0", True),
                       build)
    monkeypatch.setitem(REGISTRY, "recording", reg)
    (tmp_path / "tiny.yaml").write_text(TINY_GRID)
    res = cli("run", "--executor", "recording", "--config", tmp_path / "tiny.yaml", "--plugin", FAKES, "--backends",
              "fake-good", "--repeats", "1", "--timeout", "7", "--db", tmp_path / "s.sqlite", "--dry-run")
    assert res.rc == 0, res.err
    assert built == [("rec:0", 7.0)] and " attempts: " in res.out and not (tmp_path / "s.sqlite").exists()
    monkeypatch.delitem(REGISTRY, "recording")
    res = cli("run", "--executor", "recording", "--db", tmp_path / "s.sqlite")
    assert res.rc == 2 and "invalid choice: 'recording'" in res.err
