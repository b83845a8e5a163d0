"""The declared versions are true: every file gives the same floors
(workflow/Snakefile's min_version, pyproject.toml, the Slurm profile's header),
the pinned versions (requirements.txt, environment.yml) and the installed ones
meet them, and every key of every
profile, the commented-out ones included, is an option of the installed
Snakemake (plugins' options included)."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import version

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.version import Version

from conftest import REPO
from test_environment import conda_entries, package_name, pinned_version, pip_requirements

PROFILES = sorted((REPO / "profiles").glob("*/config.yaml"))
# a key a reader may uncomment: `# key: value` at the start of a line
COMMENTED_KEY = re.compile(r"^# ?([a-z][a-z0-9-]*[a-z0-9]): \S+$")


def floors_of(requirements: list[str]) -> dict[str, str]:
    """{package: its >= floor} of the requirements that have one."""
    floors = {}
    for line in requirements:
        requirement = Requirement(line)
        for specifier in requirement.specifier:
            if specifier.operator == ">=":
                floors[requirement.name] = specifier.version
    return floors


def pyproject_floors() -> dict[str, str]:
    return floors_of(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
                     ["pipeline"])


def test_every_file_gives_the_same_floors():
    pyproject = pyproject_floors()
    assert set(pyproject) == {"snakemake", "snakemake-executor-plugin-slurm", "snakemake-logger-plugin-rich", "rich"}
    min_version = re.search(r'min_version\("([0-9.]+)"\)', (REPO / "workflow" / "Snakefile").read_text()).group(1)
    assert Version(min_version) == Version(pyproject["snakemake"])
    slurm_header = re.search(r"snakemake-executor-plugin-slurm >= ([0-9.]+)",
                             (REPO / "profiles/slurm/config.yaml").read_text()).group(1)
    assert Version(slurm_header) == Version(pyproject["snakemake-executor-plugin-slurm"])


@pytest.mark.parametrize("package", ["snakemake", "snakemake-executor-plugin-slurm", "snakemake-logger-plugin-rich",
                                     "rich"])
def test_the_installed_and_pinned_versions_meet_the_floors(package):
    floor = Version(pyproject_floors()[package])
    pinned = pinned_version(pip_requirements()[package])
    conda = next(pinned_version(e) for e in conda_entries(REPO / "environment.yml") if package_name(e) == package)
    assert Version(version(package)) >= floor and Version(pinned) >= floor and Version(conda) >= floor


def snakemake_options() -> set[str]:
    from snakemake.cli import get_argument_parser

    return {option for action in get_argument_parser()._actions for option in action.option_strings}


@pytest.mark.parametrize("profile", PROFILES, ids=[p.parent.name for p in PROFILES])
def test_every_profile_key_is_an_option_of_the_installed_snakemake(profile):
    text = profile.read_text()
    keys = set(yaml.safe_load(text)) | {m.group(1) for line in text.splitlines() if (m := COMMENTED_KEY.match(line))}
    unknown = sorted(key for key in keys if f"--{key}" not in snakemake_options())
    assert not unknown, f"{profile.relative_to(REPO)}: no such Snakemake option: {unknown}"
