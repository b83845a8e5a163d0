"""environment.yml (conda) and requirements.txt (pip) list the same packages."""

from __future__ import annotations

import re
import tomllib

import yaml
from packaging.requirements import Requirement

from conftest import REPO

# Entries that are not packages of the pipeline (the interpreter, the installer, the project itself).
NOT_PACKAGES = {"python", "pip", "-e ."}


def package_name(requirement: str) -> str:
    """'scikit-learn>=1.4' → 'scikit-learn'; normalised as pip does (PEP 503)."""
    name = re.split(r"[<>=!~ ;\[]", requirement.strip(), maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def conda_packages() -> set[str]:
    environment = yaml.safe_load((REPO / "environment.yml").read_text())
    names = set()
    for entry in environment["dependencies"]:
        if isinstance(entry, dict):
            names |= {package_name(e) for e in entry.get("pip", []) if e.strip() not in NOT_PACKAGES}
        elif package_name(entry) not in NOT_PACKAGES:
            names.add(package_name(entry))
    return names


def pip_requirements() -> dict[str, str]:
    lines = [line.split("#")[0].strip() for line in (REPO / "requirements.txt").read_text().splitlines()]
    return {package_name(line): line for line in lines if line}


def test_same_packages():
    conda, pip = conda_packages(), set(pip_requirements())
    assert conda == pip, f"only in environment.yml: {sorted(conda - pip)}; only in requirements.txt: {sorted(pip - conda)}"


def test_requirements_cover_the_package_dependencies():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    needed = {package_name(r) for r in project["dependencies"]}
    for extra in ("pipeline", "test", "mnist"):
        needed |= {package_name(r) for r in project["optional-dependencies"].get(extra, [])}
    pinned = pip_requirements()
    missing = needed - set(pinned)
    assert not missing, f"pyproject.toml needs {sorted(missing)}, requirements.txt lacks them"
    # every pinned version lies in pyproject.toml's range
    for requirement in project["dependencies"] + sum(project["optional-dependencies"].values(), []):
        requirement = Requirement(requirement)
        version = pinned[package_name(requirement.name)].split("==")[1]
        assert requirement.specifier.contains(version), f"{requirement} vs {version}"


def test_requirements_are_pinned():
    unpinned = [line for line in pip_requirements().values() if "==" not in line]
    assert not unpinned, unpinned


def test_rule_environments_parse():
    for path in sorted((REPO / "workflow" / "envs").glob("*.yaml")):
        environment = yaml.safe_load(path.read_text())
        assert environment["channels"] and environment["dependencies"], path.name
