"""cqb.sim.code_hash: every source file of the simulation subpackage is hashed,
nothing outside it is (the subpackage imports nothing else: tests/test_layers.py)."""

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


def test_editing_any_file_of_the_simulation_subpackage_changes_the_hash(package_copy):
    sim = package_copy / "sim"
    before = code_hash(sim)
    for path in source_files(sim):
        original = path.read_bytes()
        path.write_bytes(original + b"\n")
        assert code_hash(sim) != before, path
        path.write_bytes(original)
    assert code_hash(sim) == before
    (sim / "policies" / "new_policy.py").write_text("# a new module\n")  # no list to keep
    assert code_hash(sim) != before


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
        path.write_bytes(original + b"\n")
        assert core_module.kernels_hash(sim) != before and code_hash(sim) != code_before, path
        path.write_bytes(original)
    assert core_module.kernels_hash(sim) == before
