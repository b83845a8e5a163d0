"""environment.yml and every per-rule env (workflow/envs/, conda) pin the versions
requirements.txt pins (pip); requirements-light.txt is the same less PyTorch; each
per-rule env installs what its rule imports, the cqb package included."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.version import Version

from conftest import REPO

# Entries that are not packages of the pipeline (the interpreter, the installer and the
# build backend, the project itself, the C compiler that builds cqb.sim._core: pip users
# have the system's).
NOT_PACKAGES = {"python", "pip", "setuptools", "-e .", "c-compiler"}
# What the light install leaves out: the mnist extra (numpy reads MNIST instead).
PYTORCH = {"torch", "torchvision"}
CONDA_FILES = [REPO / "environment.yml"] + sorted((REPO / "workflow" / "envs").glob("*.yaml"))


def package_name(requirement: str) -> str:
    """'scikit-learn>=1.4' → 'scikit-learn'; normalised as pip does (PEP 503)."""
    name = re.split(r"[<>=!~ ;\[]", requirement.strip(), maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def conda_entries(path: Path) -> list[str]:
    """Every dependency line of a conda env file, its pip section's included."""
    entries = []
    for entry in yaml.safe_load(path.read_text())["dependencies"]:
        entries += entry.get("pip", []) if isinstance(entry, dict) else [entry]
    return [entry.strip() for entry in entries]


def conda_packages() -> set[str]:
    entries = conda_entries(REPO / "environment.yml")
    return {package_name(e) for e in entries if not e.startswith("-")} - NOT_PACKAGES


def pip_requirements(path: Path = REPO / "requirements.txt") -> dict[str, str]:
    """{package: its line} of a requirements file, following its `-r` includes."""
    found = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line.startswith("-r "):
            found |= pip_requirements(path.parent / line[3:].strip())
        elif line:
            found[package_name(line)] = line
    return found


def pinned_version(line: str) -> str | None:
    """'numpy==2.4.6', 'numpy ==2.4.6' (conda) → '2.4.6'; None when not pinned exactly."""
    match = re.fullmatch(r"[\w.-]+\s*==\s*([\w.+!-]+)", line.strip())
    return match.group(1) if match else None


def test_same_packages():
    conda, pip = conda_packages(), set(pip_requirements())
    assert conda == pip, f"only in environment.yml: {sorted(conda - pip)}; only in requirements.txt: {sorted(pip - conda)}"


@pytest.mark.parametrize("path", CONDA_FILES, ids=lambda path: path.name)
def test_conda_files_pin_the_versions_requirements_pins(path):
    pinned = pip_requirements()
    for entry in conda_entries(path):
        name = package_name(entry)
        if name in NOT_PACKAGES or entry.startswith("-"):
            continue
        assert name in pinned, f"{path.name}: {entry} is not in requirements.txt"
        assert pinned_version(entry) == pinned_version(pinned[name]), f"{path.name}: {entry} vs {pinned[name]}"


def test_conda_files_use_the_python_and_build_floor_of_pyproject():
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    python = Requirement("python" + pyproject["project"]["requires-python"]).specifier
    backend = next(Requirement(r) for r in pyproject["build-system"]["requires"] if r.startswith("setuptools"))
    for path in CONDA_FILES:
        entries = {package_name(e): e for e in conda_entries(path)}
        version = entries["python"].split("=")[-1].strip()
        assert python.contains(version), f"{path.name}: python {version} vs requires-python {python}"
        assert Requirement(entries["setuptools"].replace(" ", "")).specifier == backend.specifier, path.name


def test_the_build_links_the_numpy_release_the_runtime_pins():
    """The choosers call numpy's random distributions from its static library
    (setup.py): built against another release, they could draw other values
    than the Generator in the same process."""
    build = tomllib.loads((REPO / "pyproject.toml").read_text())["build-system"]["requires"]
    numpy_build = next(r for r in build if package_name(r) == "numpy")
    assert pinned_version(numpy_build) == pinned_version(pip_requirements()["numpy"]), numpy_build


def test_the_light_install_is_the_default_less_pytorch():
    full, light = pip_requirements(), pip_requirements(REPO / "requirements-light.txt")
    assert set(full) - set(light) == PYTORCH and all(full[name] == light[name] for name in light)
    mnist = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["mnist"]
    assert {package_name(r): r for r in mnist} == {name: full[name] for name in PYTORCH}


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
    unpinned = [line for line in pip_requirements().values() if pinned_version(line) is None]
    assert not unpinned, unpinned


def test_rule_environments_parse():
    for path in sorted((REPO / "workflow" / "envs").glob("*.yaml")):
        environment = yaml.safe_load(path.read_text())
        assert environment["channels"] and environment["dependencies"], path.name


# --- per-rule conda environments (workflow/envs/) ------------------------------------
#
# Static: no conda here. For every rule with a `conda:` directive, read what it runs
# (its `script:`, or the `cqb` command / script / `-m` module of its `shell:`), follow
# its imports through the cqb package, and check that the env lists every
# third-party distribution and installs the package itself.

RULES_DIR = REPO / "workflow" / "rules"
ENVS_DIR = REPO / "workflow" / "envs"
PACKAGE_DIR = REPO / "src" / "cqb"
# import name → distribution name, where they differ
DISTRIBUTIONS = {"sklearn": "scikit-learn", "yaml": "pyyaml", "imblearn": "imbalanced-learn",
                 "PIL": "pillow", "skimage": "scikit-image"}
# Imported only inside the functions that read MNIST (cqb.data.fetch_mnist,
# load_mnist_arrays), which only the rules of a dataset of MNIST archives call (defined in
# workflow/rules/data.smk in a loop over those datasets): needed by exactly those envs.
MNIST_ONLY = {"torch", "torchvision"}
MNIST_RULES = {'data:f"download_{_dataset}"', 'data:f"preprocess_{_dataset}"'}
# Provided by Snakemake to `script:` rules (its preamble adds its own path), not by the env.
SNAKEMAKE_PROVIDED = {"snakemake"}
_STRING = re.compile(r'"([^"]*)"|\'([^\']*)\'')


def _directive_values(body: list[str], directive: str) -> list[str]:
    """The string literals of a rule directive (its line and the more indented ones below)."""
    for index, line in enumerate(body):
        match = re.match(rf"^(\s*){directive}:(.*)$", line)
        if not match:
            continue
        indent, text = len(match.group(1)), [match.group(2)]
        for following in body[index + 1:]:
            if following.strip() and len(following) - len(following.lstrip()) <= indent:
                break
            if not following.strip().startswith("#"):
                text.append(following)
        return ["".join(m) for line in text for m in _STRING.findall(line)]
    return []


def _line_of(body: list[str], directive: str) -> int:
    return next(i for i, line in enumerate(body) if re.match(rf"^\s*{directive}:", line))


def conda_rules() -> list[dict]:
    """Every rule with a conda env: name, source file, env path, script or shell command."""
    rules = []
    for smk in sorted(RULES_DIR.glob("*.smk")):
        lines = smk.read_text().splitlines()
        for start, line in enumerate(lines):
            header = re.match(r"^(\s*)rule\b\s*(\w*)\s*:", line)
            if not header:
                continue
            indent = len(header.group(1))
            body = []
            for following in lines[start + 1:]:
                if following.strip() and len(following) - len(following.lstrip()) <= indent:
                    break
                body.append(following)
            conda = _directive_values(body, "conda")
            if not conda:
                continue
            # `rule:` defined in a loop takes its name from a `name:` expression
            name = header.group(2) or f"{smk.stem}:{body[_line_of(body, 'name') + 1].strip()}"
            rules.append({
                "name": name, "smk": smk, "env": (smk.parent / conda[0]).resolve(),
                "script": [(smk.parent / s).resolve() for s in _directive_values(body, "script")],
                "shell": "".join(_directive_values(body, "shell")),
            })
    return rules


def _cqb_console_module() -> str:
    entry = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]["cqb"]
    return entry.split(":")[0]


def run_targets(rule: dict) -> list[Path]:
    """The Python files a rule runs: its script, or what its shell command starts."""
    if rule["script"]:
        return rule["script"]
    shell = rule["shell"]
    if re.fullmatch(r"cp \S+ \S+ 2> \S+", shell) or shell.startswith("echo "):
        return []  # a copy (rule powered_final) or a message (candidates without any): no Python at all
    targets = [REPO / path for path in re.findall(r"(scripts/[\w/]+\.py)", shell)]
    modules = re.findall(r"-m\s+(cqb[\w.]*)", shell)
    # the simulate rule's `cqb_job`: the compiled client runs only beside the run
    # server (never under --sdm conda) and otherwise, or on fallback, `cqb`
    if re.search(r"(^|[\s;&|(])cqb\s", shell) or re.search(r"\$\{+CQB_RUN_CLIENT:-cqb\}+", shell):
        modules.append(_cqb_console_module())
    targets += [module_file(module) for module in modules]
    assert targets, f"rule {rule['name']}: cannot tell what `{shell}` runs"
    return targets


def module_file(module: str) -> Path:
    relative = Path(*module.split(".")[1:])
    package = PACKAGE_DIR / relative / "__init__.py"
    return package if package.exists() else PACKAGE_DIR / relative.with_suffix(".py")


def _module_name(path: Path) -> str | None:
    if PACKAGE_DIR not in path.parents and path.parent != PACKAGE_DIR:
        return None
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def third_party_imports(files: list[Path]) -> set[str]:
    """Top-level names of every non-stdlib import, following cqb modules transitively."""
    found, seen, todo = set(), set(), list(files)
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        here = _module_name(path)
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative import inside the package
                    base = here.split(".") if is_package else here.split(".")[:-1]
                    base = base[: len(base) - node.level + 1]
                    prefix = ".".join(base + ([node.module] if node.module else []))
                    modules = [prefix] + [f"{prefix}.{alias.name}" for alias in node.names]
                else:
                    modules = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if top == "cqb":
                    found.add("cqb")
                    for candidate in (module_file(module),):
                        if candidate.exists():
                            todo.append(candidate)
                    # importing cqb.x runs cqb/__init__.py and the parents' too
                    parts = module.split(".")
                    for depth in range(1, len(parts)):
                        todo.append(module_file(".".join(parts[:depth])))
                elif top not in sys.stdlib_module_names and top != "__future__":
                    found.add(top)
    return found


def env_distributions(path: Path) -> set[str]:
    environment = yaml.safe_load(path.read_text())
    names = set()
    for entry in environment["dependencies"]:
        entries = entry.get("pip", []) if isinstance(entry, dict) else [entry]
        names |= {package_name(e) for e in entries if not e.strip().startswith("-")}
    return names


def installs_the_package(env: Path) -> bool:
    """The env's post-deploy script pip-installs the repository (editable)."""
    script = env.with_name(env.stem + ".post-deploy.sh")
    command = r"^[^#\n]*pip install\b[^\n]*(--editable|\s-e)\s"
    return script.is_file() and re.search(command, script.read_text(), re.MULTILINE) is not None


CONDA_RULES = conda_rules()


def test_rules_with_conda_envs_are_found():
    names = {rule["name"] for rule in CONDA_RULES}
    assert MNIST_RULES | {"download_dataset_file", "preprocess_dataset", "build_instance",
            "simulate", "aggregate"} <= names, names
    assert all(rule["env"].is_file() for rule in CONDA_RULES), [str(r["env"]) for r in CONDA_RULES]


@pytest.mark.parametrize("rule", CONDA_RULES, ids=lambda rule: rule["name"])
def test_rule_env_installs_what_the_rule_imports(rule):
    targets = run_targets(rule)
    if not targets:  # runs no Python: its env needs nothing of ours
        assert rule["shell"].startswith(("cp ", "echo ")), rule
        return
    imports = third_party_imports(targets) - SNAKEMAKE_PROVIDED
    needed = {package_name(DISTRIBUTIONS.get(name, name)) for name in imports - MNIST_ONLY - {"cqb"}}
    if rule["name"] in MNIST_RULES:
        needed |= MNIST_ONLY
    listed = env_distributions(rule["env"])
    missing = needed - listed
    assert not missing, f"rule {rule['name']}: {rule['env'].name} lacks {sorted(missing)}"
    assert "cqb" in imports and installs_the_package(rule["env"]), (
        f"rule {rule['name']}: {rule['env'].name} does not install the cqb package "
        f"(needs {rule['env'].stem}.post-deploy.sh running pip install -e)"
    )


def test_every_env_that_installs_cqb_can_compile_its_kernel():
    envs = [REPO / "environment.yml"] + sorted((REPO / "workflow" / "envs").glob("*.yaml"))
    for env in envs:
        if env.name == "environment.yml" or installs_the_package(env):
            assert "c-compiler" in env_distributions(env), f"{env.name} installs cqb but has no c-compiler"


def test_import_scan_follows_the_package():
    # The scan itself: cqb.data pulls scikit-learn (preprocess) and scipy (semisynthetic).
    found = third_party_imports([REPO / "scripts" / "build_instance.py"])
    assert {"cqb", "numpy", "sklearn", "scipy", "imblearn", "pandas"} <= found, found


@pytest.mark.parametrize("shell, expected", [
    ("cqb run --instance {params.instance:q} --out {output:q}", "src/cqb/cli.py"),
    ("{params.python} scripts/simulate.py --out {output:q}", "scripts/simulate.py"),
    ("python -m cqb.analysis.aggregate {input:q} > {output:q}", "src/cqb/analysis/aggregate.py"),
])
def test_shell_commands_are_traced_to_their_code(shell, expected):
    rule = {"name": "example", "script": [], "shell": shell}
    assert run_targets(rule) == [REPO / expected]


# --- the floors (requirements-floors.txt) ------------------------------------------------
#
# One table of the oldest tested versions; .ci/run installs exactly it in .venv-floors.

FLOORS_FILE = REPO / "requirements-floors.txt"


def floors() -> dict[str, Version]:
    return {name: Version(pinned_version(line)) for name, line in pip_requirements(FLOORS_FILE).items()}


def stated_requirements() -> list[Requirement]:
    """pyproject.toml's ranges: the dependencies and the extras that are not pinned (mnist is)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    return [Requirement(r) for r in project["dependencies"] + extras["pipeline"] + extras["test"]]


def test_the_floors_file_pins_every_package_once():
    lines = [line.split("#")[0].strip() for line in FLOORS_FILE.read_text().splitlines()]
    lines = [line for line in lines if line]
    assert all(pinned_version(line) for line in lines), lines
    assert len(lines) == len(floors()), "a package is listed twice"


def test_pyproject_lower_bounds_are_the_floors():
    table, stated = floors(), {package_name(r.name): r for r in stated_requirements()}
    assert set(stated) == set(table), (
        f"only in pyproject.toml: {sorted(set(stated) - set(table))}; "
        f"only in requirements-floors.txt: {sorted(set(table) - set(stated))}")
    for name, requirement in stated.items():
        lower = [Version(s.version) for s in requirement.specifier if s.operator == ">="]
        assert lower == [table[name]], f"pyproject.toml: {requirement} vs requirements-floors.txt: {table[name]}"
        assert requirement.specifier.contains(table[name]), f"{requirement} excludes its floor {table[name]}"


def test_the_workflow_and_the_slurm_profile_state_the_same_floors():
    table = floors()
    min_version = re.search(r'min_version\("([\d.]+)"\)', (REPO / "workflow" / "Snakefile").read_text()).group(1)
    assert Version(min_version) == table["snakemake"], f"workflow/Snakefile min_version {min_version}"
    header = (REPO / "profiles" / "slurm" / "config.yaml").read_text()
    stated = re.search(r"snakemake-executor-plugin-slurm >= ([\d.]+)", header).group(1)
    assert Version(stated) == table["snakemake-executor-plugin-slurm"], f"profiles/slurm: >= {stated}"


def test_ci_tests_the_floors():
    run = (REPO / ".ci" / "run").read_text()
    assert re.search(r"\.venv-floors/bin/python -m pip install [^\n]*-r requirements-floors\.txt", run), run
