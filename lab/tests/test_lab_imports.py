"""lab/: every name a lab script imports from attnbench exists and is public, so a module that moves in the
product breaks here rather than on a lent GPU machine (lab/README.md, rule 1). That the product never imports
the lab is tests/test_architecture.py's."""
import ast
import importlib
from pathlib import Path

import pytest

LAB = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(LAB.glob("*.py"))


def _attnbench_imports(path: Path) -> list[tuple[str, str | None, int]]:
    """(module, name or None for `import module`, line) of each attnbench import, at any depth of the file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.split(".")[0] == "attnbench":
            found += [(node.module, a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.Import):
            found += [(a.name, None, node.lineno) for a in node.names if a.name.split(".")[0] == "attnbench"]
    return found


def test_the_lab_has_scripts_that_import_attnbench():
    # the check below is not vacuous: these scripts import the product (others may drive it as a command or
    # read exports with pandas alone, and need not)
    names = {"sweep_parts.py", "graph_steps.py", "profile_attempt.py"}
    assert names <= {p.name for p in SCRIPTS}
    assert all(_attnbench_imports(p) for p in SCRIPTS if p.name in names)


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_each_attnbench_import_resolves_to_a_public_name(path):
    bad = []
    for module, name, line in _attnbench_imports(path):
        private = [part for part in module.split(".") + ([name] if name else []) if part.startswith("_")]
        if private:
            bad.append(f"{path.name}:{line}: {module} {name or ''} is private")
            continue
        try:
            mod = importlib.import_module(module)
        except ImportError as e:
            bad.append(f"{path.name}:{line}: {module}: {e}")
            continue
        if name is not None and not hasattr(mod, name):
            try:
                importlib.import_module(f"{module}.{name}")
            except ImportError:
                bad.append(f"{path.name}:{line}: {module} has no {name}")
    assert not bad, "\n".join(bad)

