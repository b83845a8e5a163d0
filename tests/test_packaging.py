"""What a registry or a catalog reads: the workflow catalog's settings and
layout, the package's metadata, and the citation file."""

from __future__ import annotations

import re

import yaml

from conftest import REPO


def code_lines(path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_the_catalog_finds_the_workflow_where_its_settings_say():
    # the catalog takes workflow/Snakefile when workflow/ exists; the top-level
    # Snakefile only includes it (both load the same workflow: test_workflow_module.py)
    assert (REPO / "workflow" / "Snakefile").is_file()
    assert code_lines(REPO / "Snakefile") == ['include: "workflow/Snakefile"']
    settings = yaml.safe_load((REPO / ".snakemake-workflow-catalog.yml").read_text())["usage"]
    # the catalog adds --cores itself; the conda route is pinned but not run in CI
    assert not re.search(r"(^|\s)(--cores|-c|-j|--jobs)\b", settings["mandatory-flags"]["flags"])
    assert settings["software-stack-deployment"]["conda"] is False
