"""lab/graph_steps.py: the loop the graph diagnostics share (their measurements need CUDA; the
loop does not)."""
import importlib.util
from pathlib import Path

import pytest

from attnbench.backends.registry import all_backends
from attnbench.workloads.grids import get_grid

SCRIPT = Path(__file__).resolve().parents[1] / "graph_steps.py"


@pytest.fixture
def module():
    spec = importlib.util.spec_from_file_location("graph_steps", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def graph_steps(module):
    return module.graph_steps


def test_the_shared_selection_options_choose_backends_and_workloads(module):
    import argparse

    p = argparse.ArgumentParser()
    module.add_selection(p, grid="smoke", backends="reference", limit=5)
    backends, chosen, grid = module.selection(p.parse_args([]))
    assert [b.name for b in chosen] == ["reference"] and "reference" in backends and len(backends) > 1
    assert grid == get_grid("smoke")[:5]
    args = p.parse_args(["--where", "mode=prefill", "--backends", "reference,sdpa-math", "--limit", "2"])
    _, chosen, grid = module.selection(args)
    assert [b.name for b in chosen] == ["reference", "sdpa-math"]
    assert len(grid) == 2 and {w.mode for w in grid} == {"prefill"}
    assert args.device == "cuda"


class Refuses:
    name = "refuses"

    def prepare(self, w, inputs):
        raise RuntimeError()  # no message: the line still says what refused


def test_each_pair_is_prepared_and_called_once_and_a_refusal_is_a_line(graph_steps, capsys):
    reference = next(b for b in all_backends() if b.name == "reference")
    grid = [w for w in get_grid("smoke") if w.mode == "prefill"][:2]
    got = []
    for w, b, step in graph_steps(grid, [Refuses(), reference], "cpu", width=9):
        out = step()  # the prepared call again, on its workload's inputs
        got.append((w.batch, w.q_len, b.name, w.launch, w.l2, out.shape[0]))
    assert got == [(w.batch, w.q_len, "reference", "graph", "warm", w.batch) for w in grid]
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all(line.endswith(" refuses   skipped: RuntimeError: ") for line in lines)
