"""What a registry or a catalog reads: the workflow catalog's settings and
layout, the package's metadata, and the citation file."""

from __future__ import annotations

import re
import tomllib
import warnings

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

import cqb
from conftest import REPO
from cqb.publishing.citation import sync_citation_version


def code_lines(path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_the_catalog_finds_the_workflow_where_its_settings_say():
    # the catalog takes workflow/Snakefile when workflow/ exists; the top-level
    # Snakefile only includes it (both load the same workflow: test_workflow_module.py)
    assert (REPO / "workflow" / "Snakefile").is_file()
    assert code_lines(REPO / "Snakefile") == ['workflow.include("workflow/Snakefile", overwrite_default_target=True)']
    settings = yaml.safe_load((REPO / ".snakemake-workflow-catalog.yml").read_text())["usage"]
    # the catalog adds --cores itself; the conda route is pinned but not run in CI
    assert not re.search(r"(^|\s)(--cores|-c|-j|--jobs)\b", settings["mandatory-flags"]["flags"])
    assert settings["software-stack-deployment"]["conda"] is False


def pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def test_the_metadata_is_what_a_registry_accepts():
    project = pyproject()["project"]
    # PEP 639: an SPDX expression and the licence file, no licence classifier beside them
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert not [c for c in project["classifiers"] if c.startswith("License ::")]
    backend = next(Requirement(r) for r in pyproject()["build-system"]["requires"] if r.startswith("setuptools"))
    assert not backend.specifier.contains("76.9") and backend.specifier.contains("77.0")
    # the authors are whom LICENSE names
    holder = re.search(r"Copyright \(c\) \d{4} (.+)", (REPO / "LICENSE").read_text()).group(1).strip()
    assert [author["name"].lower() for author in project["authors"]] == [holder.lower()]
    # the pinned numpy and pandas need Python 3.11; the classifiers name the tested version only
    python = SpecifierSet(project["requires-python"])
    assert python.contains("3.11") and not python.contains("3.10")
    assert {c.rsplit(" ", 1)[-1] for c in project["classifiers"] if re.fullmatch(r".*Python :: 3\.\d+", c)} == {"3.11"}
    assert project["keywords"] and project["urls"]
    assert "pytest-xdist" in {Requirement(r).name for r in project["optional-dependencies"]["test"]}


def test_setuptools_reads_the_metadata_without_a_deprecation_warning():
    # what `pip install .` prints as SetuptoolsDeprecationWarning (e.g. a licence as a
    # TOML table, or licence classifiers), read the way the build backend reads it
    import setuptools
    from setuptools.config import pyprojecttoml
    from setuptools.dist import Distribution

    if Version(setuptools.__version__) < Version("77"):
        pytest.skip(f"setuptools {setuptools.__version__} predates PEP 639")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        distribution = Distribution()
        pyprojecttoml.apply_configuration(distribution, REPO / "pyproject.toml")
    deprecations = [str(w.message) for w in caught if "Deprecat" in w.category.__name__]
    assert not deprecations, deprecations
    assert distribution.metadata.license_expression == "MIT"


def test_the_citation_cites_the_paper_and_this_version():
    citation = yaml.safe_load((REPO / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0" and citation["type"] == "software"
    assert citation["version"] == cqb.__version__ == pyproject()["project"]["version"]
    (paper,) = citation["references"]
    assert "arXiv:2601.19300" in [identifier["value"] for identifier in paper["identifiers"]]
    assert [author["family-names"] for author in paper["authors"]] == ["Bae", "Kang", "Lee"]


def test_publish_keeps_the_citations_version_in_step(tmp_path):
    citation = tmp_path / "CITATION.cff"
    text = (REPO / "CITATION.cff").read_text()
    citation.write_text(re.sub(r'(?m)^version: .*$', 'version: "0.0.1"', text))
    assert sync_citation_version(citation, cqb.__version__) == [str(citation)]
    assert citation.read_text() == text  # only the version line changed back
    assert yaml.safe_load(citation.read_text())["version"] == cqb.__version__
    assert sync_citation_version(citation, cqb.__version__) == []  # in step: not rewritten
    assert sync_citation_version(tmp_path / "absent.cff", cqb.__version__) == []


def test_the_build_requires_every_package_the_kernels_cimport():
    """pip builds in an isolated environment holding only the build requirements:
    a package whose .pxd a kernel cimports (scipy's cython_blas) must be one of them."""
    cimported = set()
    for path in (REPO / "src" / "cqb" / "sim").glob("*.py"):
        cimported |= set(re.findall(r"cython\.cimports\.([A-Za-z_]\w*)", path.read_text()))
    third_party = cimported - {"cython", "cpython", "libc", "libcpp", "posix", "cqb"}
    required = {Requirement(r).name for r in pyproject()["build-system"]["requires"]}
    assert third_party and third_party <= required, f"cimported {sorted(third_party)}, build requires {sorted(required)}"
