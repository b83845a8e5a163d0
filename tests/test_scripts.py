"""The Snakemake scripts (scripts/*.py) import only names the package has:
they run only inside workflow jobs, so a name a refactoring removed would
otherwise show first as a failed job of a full run."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

SCRIPTS = sorted((Path(__file__).resolve().parents[1] / "scripts").glob("*.py"))


def package_imports(path: Path) -> list[tuple[str, str]]:
    """(module, name) of every `from cqb… import name` in the file, at any depth."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "cqb":
            found += [(node.module, alias.name) for alias in node.names]
    return found


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_every_package_name_a_script_imports_exists(script):
    missing = []
    for module, name in package_imports(script):
        imported = importlib.import_module(module)
        if not hasattr(imported, name):
            try:  # a submodule named in a from-import
                importlib.import_module(f"{module}.{name}")
            except ImportError:
                missing.append(f"{module}.{name}")
    assert not missing, f"{script.name} imports names the package lacks: {missing}"


def test_the_check_reads_nested_imports(tmp_path):
    """Its own mutant: an import inside a function is found, and a name the package lacks is caught."""
    script = tmp_path / "s.py"
    script.write_text("def main():\n    from cqb.figures.plotting import POLICY_COLOURS\n")
    assert package_imports(script) == [("cqb.figures.plotting", "POLICY_COLOURS")]
    assert not hasattr(importlib.import_module("cqb.figures.plotting"), "POLICY_COLOURS")
