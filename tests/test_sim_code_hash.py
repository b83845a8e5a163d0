"""cqb.sim.code_hash: what runs in every source file of the simulation subpackage
is hashed (not its docstrings, comments or layout), nothing outside it is (the subpackage imports nothing else: tests/test_layers.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import cqb
from cqb.sim.code_hash import SIMULATION_ROOT, code_hash, simulation_code_hash, source_files

PACKAGE = Path(cqb.__file__).parent


@pytest.fixture
def package_copy(tmp_path):
    copy = tmp_path / "cqb"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def test_the_installed_hash_is_the_hash_of_the_sim_folder():
    assert SIMULATION_ROOT == PACKAGE / "sim"
    assert simulation_code_hash() == code_hash(PACKAGE / "sim")


def test_every_source_file_of_the_subpackage_is_hashed_and_no_build_product(package_copy):
    sim = package_copy / "sim"
    hashed = {path.relative_to(sim).as_posix() for path in source_files(sim)}
    sources = {path.relative_to(sim).as_posix() for path in sim.rglob("*")
               if "__pycache__" not in path.parts and path.suffix in (".py", ".pxd")}
    assert hashed == sources and {"_rounds.py", "_algebra.pxd", "core.py", "simulate.py", "policies/registry.py"} <= hashed
    assert not any(path.suffix in (".c", ".so", ".sha256") for path in source_files(sim))
    before = code_hash(sim)
    # build products: the compiled core, its build record, Cython's C, bytecode
    (sim / "__pycache__").mkdir(exist_ok=True)
    (sim / "__pycache__" / "simulate.cpython-311.pyc").write_bytes(b"\0")
    (sim / "_rounds.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\0")
    (sim / "_kernels.sha256").write_text("0" * 64 + "\n")
    (sim / "_rounds.c").write_text("/* generated */\n")
    assert code_hash(sim) == before


def test_a_one_token_code_edit_of_any_file_changes_the_hash(package_copy):
    sim = package_copy / "sim"
    before = code_hash(sim)
    for path in source_files(sim):
        original = path.read_bytes()
        # one more statement (a .py) or declaration line (a .pxd) at the end
        path.write_bytes(original + (b"\n_probe = 1\n" if path.suffix == ".py" else b"\ncdef int _probe\n"))
        assert code_hash(sim) != before, path
        path.write_bytes(original)
    assert code_hash(sim) == before
    (sim / "policies" / "new_policy.py").write_text("# a new module\n")  # no list to keep
    assert code_hash(sim) != before


@pytest.mark.parametrize("edit", [
    ("core.py", "BUILT_MODULES", "BUILT_MODULES_"),           # a name
    ("_rounds.py", "cython.double", "cython.float"),          # a Cython type annotation
    ("instances.py", "0.005", "0.0051"),                      # a literal
    ("_algebra.pxd", "double", "float"),                      # a declaration
    ("_rounds.py", "@cython.cfunc\n", "@cython.ccall\n"),     # a decorator
])
def test_a_code_edit_changes_the_hash(package_copy, edit):
    name, old, new = edit
    path = package_copy / "sim" / name
    before = code_hash(package_copy / "sim")
    text = path.read_text()
    assert old in text, edit
    path.write_text(text.replace(old, new, 1))
    assert code_hash(package_copy / "sim") != before


def test_docstrings_comments_and_layout_leave_the_hash(package_copy):
    sim = package_copy / "sim"
    before = code_hash(sim)
    for path in source_files(sim):
        text = path.read_text()
        lines = text.split("\n")
        # a comment on its own line and a trailing one, blank lines, a reworded docstring
        lines.insert(0, "# a new comment")
        edited = "\n".join(lines) + "\n\n# trailing comment\n\n"
        if path.suffix == ".py":
            edited = edited.replace('"""', '"""Reworded. ', 1) if '"""' in edited else edited
        path.write_text(edited)
    assert code_hash(sim) == before
    instances = sim / "instances.py"
    text = instances.read_text()
    assert "def pool_instance(" in text
    instances.write_text(text.replace('    """An instance whose arrivals', '    """A wholly new docstring.\n\n    An instance whose arrivals', 1))
    assert code_hash(sim) == before


def test_a_string_that_is_not_a_docstring_counts(package_copy):
    """Only a body's first bare string is a docstring: an error message is code."""
    path = package_copy / "sim" / "instances.py"
    before = code_hash(package_copy / "sim")
    text = path.read_text()
    assert "the context pool is empty" in text
    path.write_text(text.replace("the context pool is empty", "the pool is empty"))
    assert code_hash(package_copy / "sim") != before


def test_editing_any_file_outside_it_leaves_the_hash(package_copy):
    sim = package_copy / "sim"
    before = code_hash(sim)
    outside = [path for path in package_copy.rglob("*") if path.is_file() and sim not in path.parents]
    assert any(path.name == "aggregate.py" for path in outside) and any(path.name == "policies.py" for path in outside)
    for path in outside:
        path.write_bytes(path.read_bytes() + b"\n")
    (package_copy / "analysis" / "new_module.py").write_text("# a new module\n")
    assert code_hash(sim) == before


def test_a_renamed_file_changes_the_hash(package_copy):
    sim = package_copy / "sim"
    before = code_hash(sim)
    (sim / "rng.py").rename(sim / "seeds.py")
    assert code_hash(sim) != before


def test_the_build_record_and_the_code_hash_cover_every_kernel(package_copy):
    """Every compiled module of cqb.sim, and every source written for Cython
    (it imports cython), is in cqb.sim.core.BUILT_MODULES, which setup.py
    compiles and whose .py and .pxd the build record and the code hash cover:
    an edit of any of them is a stale build and another code hash."""
    import importlib.machinery

    from cqb.sim import core as core_module

    sim = package_copy / "sim"
    built = {path.name.split(".")[0] for path in (PACKAGE / "sim").iterdir()
             if path.name.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))}
    for_cython = {path.stem for path in sim.glob("*.py") if "\nimport cython\n" in path.read_text()}
    declared = {path.stem for path in sim.glob("*.pxd")}
    assert built == for_cython == set(core_module.BUILT_MODULES) >= declared
    covered = core_module.kernel_sources(sim)
    assert {path.name for path in covered} == {f"{name}.py" for name in for_cython} | {f"{name}.pxd" for name in declared}
    before, code_before = core_module.kernels_hash(sim), code_hash(sim)
    for path in covered:
        original = path.read_bytes()
        path.write_bytes(original + (b"\n_probe = 1\n" if path.suffix == ".py" else b"\ncdef int _probe\n"))
        assert core_module.kernels_hash(sim) != before and code_hash(sim) != code_before, path
        path.write_bytes(original)
    assert core_module.kernels_hash(sim) == before
