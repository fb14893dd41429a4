"""Backends entering the registry (backends/registry.py): a bad isolation or name is refused at the door."""
from __future__ import annotations

import importlib.metadata as md
import json
import sys
from types import SimpleNamespace

import pytest

from attnbench.backends import registry
from attnbench.backends.base import ISOLATIONS, Backend

PLUGIN = """\
from attnbench.backends.base import Backend


class Stub(Backend):
    def prepare(self, w, inputs):
        raise NotImplementedError


BACKENDS = [Stub(name={name!r}, family="plugin", isolation={isolation!r})]
"""


def plugin(tmp_path, name="stub", isolation="worker"):
    p = tmp_path / "stub_plugin.py"
    p.write_text(PLUGIN.format(name=name, isolation=isolation))
    return p


def run_with_plugin(cli, tmp_path, path):
    return cli("run", "--repeats", "1", "--plugin", path, "--grid", "smoke", "--device", "cpu", "--dry-run",
               "--db", tmp_path / "x.sqlite")


def assert_refused(res, tmp_path, *texts):
    assert res.rc == 2, (res.rc, res.err)
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("attnbench: error: "), res.err
    for t in texts:
        assert t in lines[0], lines[0]
    assert not (tmp_path / "x.sqlite").exists()


def test_a_misspelt_isolation_is_refused_naming_the_backend_and_the_allowed_values(cli, tmp_path):
    res = run_with_plugin(cli, tmp_path, plugin(tmp_path, name="my-kernel", isolation="proces"))
    assert_refused(res, tmp_path, "'my-kernel'", "'proces'", "worker, backend, attempt")


@pytest.mark.parametrize("name,reason", [
    ("", "must be a non-empty string"),
    (" lead", "leading or trailing whitespace"),
    ("trail ", "leading or trailing whitespace"),
    ("a,b", "contains a comma"),
    ("two\nlines", "U+000A"),
    ("tab\there", "U+0009"),
    ("bell\x07", "U+0007"),
    ("zero\u200bwidth", "U+200B"),
    ("[bold]x", "contains '['"),
    ("x]", "contains ']'"),
])
def test_a_name_that_breaks_comma_lists_or_tables_is_refused(cli, tmp_path, name, reason):
    res = run_with_plugin(cli, tmp_path, plugin(tmp_path, name=name))
    assert_refused(res, tmp_path, reason)
    res = cli("backends", "--plugin", plugin(tmp_path, name=name))
    assert_refused(res, tmp_path, reason)


@pytest.mark.parametrize("name", ["flash ü", "my-kernel_v2.1"])
def test_a_printable_name_enters(cli, tmp_path, name):
    res = cli("backends", "--json", "--plugin", plugin(tmp_path, name=name, isolation="attempt"))
    assert res.rc == 0, res.err
    by = {r["name"]: r for r in json.loads(res.out)}
    assert by[name]["isolation"] == "attempt"


def test_every_builtin_passes_the_checks():
    names = [b.name for b in registry.builtin()]
    assert {"reference", "sdpa-flash", "flex", "compile"} <= set(names)
    assert all(registry.name_problem(n) is None for n in names)
    assert {b.isolation for b in registry.builtin()} <= set(ISOLATIONS)


def test_a_bad_builtin_is_refused(monkeypatch):
    bad = SimpleNamespace(__name__="bad_module", make=lambda: [Backend(name="bad", family="x", isolation="thread")])
    monkeypatch.setattr(registry, "BUILTIN_MODULES", (*registry.BUILTIN_MODULES, bad))
    with pytest.raises(registry.BackendError, match="built-in module bad_module: backend 'bad' has isolation 'thread'"):
        registry.builtin()


def test_entry_point_backends_pass_the_same_checks(tmp_path, monkeypatch):
    (tmp_path / "ep_bad.py").write_text(
        "from attnbench.backends.base import Backend\n"
        "BACKENDS = [Backend(name='ep,kernel', family='plugin')]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("ep_bad", None)
    eps = md.EntryPoints([md.EntryPoint(name="mine", value="ep_bad:BACKENDS", group=registry.ENTRY_POINT_GROUP)])
    monkeypatch.setattr(registry.metadata, "entry_points",
                        lambda group: eps if group == registry.ENTRY_POINT_GROUP else md.EntryPoints([]))
    with pytest.raises(registry.BackendError, match="entry point mine: backend name 'ep,kernel' contains a comma"):
        registry.all_backends()
