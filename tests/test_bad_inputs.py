"""Small bad inputs of a run and its plugins: one line, exit 2, before any worker starts or anything is written."""
from __future__ import annotations

import pytest

from attnbench.runner.options import MAX_ATTEMPTS, OptionsError, check_plan_size, run_options


def refused(res, text: str) -> None:
    assert res.rc == 2, (res.rc, res.err)
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("attnbench: error: ") and text in lines[0], res.err


def run(cli, tmp_path, *extra):
    return cli("run", "--grid", "smoke", "--backends", "sdpa-math", "--db", tmp_path / "s.sqlite", *extra)


def test_a_billion_repeats_are_refused_at_once(cli, tmp_path):
    """The old failure: accepted, then planned for minutes with growing memory."""
    refused(run(cli, tmp_path, "--device", "cpu", "--repeats", "1000000000"), "--repeats 1000000000")
    assert not list(tmp_path.iterdir())


def test_the_plans_size_is_capped_not_only_the_repeats(cli, tmp_path):
    # smoke's 6 workloads × 1 backend: 20,000 repeats are 120,000 attempts, over the cap
    refused(run(cli, tmp_path, "--device", "cpu", "--repeats", str(MAX_ATTEMPTS // 5)), "120,000 attempts")
    assert not list(tmp_path.iterdir())
    check_plan_size(10, 10, MAX_ATTEMPTS // 100)  # exactly the cap is a plan
    with pytest.raises(OptionsError, match="more than the"):
        check_plan_size(10, 10, MAX_ATTEMPTS // 100 + 1)


@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_device_is_refused_not_the_default(cli, tmp_path, value):
    refused(run(cli, tmp_path, "--device", value), "--device")
    assert not list(tmp_path.iterdir())
    with pytest.raises(OptionsError):
        run_options(device=value, db=str(tmp_path / "s.sqlite"))


@pytest.mark.parametrize("source,text", [
    ("BACKENDS = []\n", "declares no backends (BACKENDS is empty)"),
    ("def backends():\n    return []\n", "declares no backends (backends() returned none)"),
    ("import sys\nsys.exit(3)\n", "failed to import: it called sys.exit(3)"),
    ("def backends():\n    import sys\n    sys.exit(0)\n", "it called sys.exit(0)"),
])
def test_a_plugin_that_offers_nothing_or_exits_is_named_in_one_line(cli, tmp_path, source, text):
    plugin = tmp_path / "my_plugin.py"
    plugin.write_text(source)
    for argv in (["backends", "--plugin", plugin],
                 ["run", "--grid", "smoke", "--device", "cpu", "--plugin", plugin, "--db", tmp_path / "s.sqlite"]):
        res = cli(*argv)
        refused(res, text)
        assert "my_plugin.py" in res.err
    assert not (tmp_path / "s.sqlite").exists()
