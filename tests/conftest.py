"""Shared fixtures: fabricated run files, a throw-away copy of the workflow,
and the policy registry with or without a plugin installed."""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from cqb.analysis.curves import Curve
from cqb.sim.runfile import save_run
from cqb.sim.simulate import RunResult

REPO = Path(__file__).resolve().parent.parent

# The test files that run Snakemake end to end, the longest first (wall time
# of each under `-n 2 --dist loadfile`, in this order: about 170, 270, 110,
# not yet timed (test_workflow_output.py), 90, 60, 40, 20 and 6 s). Each file
# goes whole to one worker, in the order of the collection; xdist's own
# reordering (by number of tests per file, turned off in pyproject.toml)
# would start these few-test, long files last. The Slurm
# file leads because most of it waits on the cluster, time the other worker's
# runs can use. tests/test_suite_order.py keeps every slow file in this list.
LONGEST_FILES_FIRST = (
    "test_workflow_slurm.py",
    "test_workflow.py",
    "test_workflow_fig7.py",
    "test_workflow_output.py",
    "test_workflow_candidates.py",
    "test_analysis_replication.py",
    "test_workflow_data.py",
    "test_mnist_readers.py",
    "test_workflow_traces.py",
    "test_jobs_faults.py",
    "test_workflow_module.py",
)


def pytest_collection_modifyitems(session, config, items):
    """The long files first (the order above), then the others as collected."""
    rank = {name: place for place, name in enumerate(LONGEST_FILES_FIRST)}
    here = Path(__file__).resolve().parent  # only this folder's files: bench/tests may reuse a name
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)) if item.path.parent == here else len(rank))  # stable


# What a run of the pipeline needs besides the installed package.
WORKFLOW_FILES = ("Snakefile", "profiles", "workflow", "config", "scripts")


def curve_of(label, files, sweep_param="", sweep_value=None) -> Curve:
    """A curve of given run files (what the plan builds, without the run's parameters)."""
    return Curve(label, sweep_param, None if sweep_value == "" else sweep_value, files=tuple(files))


def fabricate_run(path, queue, oracle_queue, seed=0, policy="cqb_opt"):
    """Write a run file in the documented format from given queue arrays."""
    queue = np.asarray(queue, dtype=np.int64)
    oracle_queue = np.asarray(oracle_queue, dtype=np.int64)
    result = RunResult(
        queue=queue,
        oracle_queue=oracle_queue,
        gap=np.where(queue > 0, 0.0, np.nan),
        explored=np.zeros(queue.shape, dtype=bool),
        metadata={"policy": policy, "seed": seed, "horizon": int(queue.shape[0])},
    )
    save_run(path, result)
    return Path(path)


@pytest.fixture
def random_runs(tmp_path):
    """Two curves of fabricated runs: {policy: (files, queue array, oracle array)}."""
    rng = np.random.default_rng(7)
    curves = {}
    for policy, n_seeds in (("cqb_opt", 4), ("random", 3)):
        queues = rng.integers(0, 40, size=(n_seeds, 50))
        oracles = rng.integers(0, 5, size=(n_seeds, 50))
        files = [fabricate_run(tmp_path / "runs" / policy / f"seed{s}.npz", queues[s], oracles[s], s, policy)
                 for s in range(n_seeds)]
        curves[policy] = (files, queues, oracles)
    return curves


def copy_workflow(destination: Path) -> Path:
    """The workflow (not results, data or the venv) copied to ``destination``."""
    destination.mkdir(parents=True, exist_ok=True)
    for name in WORKFLOW_FILES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, destination / name,
                            ignore=shutil.ignore_patterns("__pycache__", ".snakemake"))
        else:
            shutil.copy2(source, destination / name)
    return destination


@pytest.fixture
def workflow_copy(tmp_path):
    return copy_workflow(tmp_path / "repo")


def snakemake(workdir: Path, *args: str, timeout: int = 600, check: bool = True):
    """Run snakemake (this interpreter's) in ``workdir``; returns the CompletedProcess."""
    process = subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=workdir,
                             capture_output=True, text=True, timeout=timeout)
    if check and process.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed ({process.returncode}):\n"
                             f"{process.stdout[-4000:]}\n{process.stderr[-4000:]}")
    return process


# ------------------------------------------------------------------ policy plugins

def plugin_module(name: str, display_name: str, field: str) -> str:
    """The source of a plugin module registering policy ``name`` with one parameter."""
    return textwrap.dedent(f"""
        from dataclasses import dataclass
        from cqb.policies import register_policy

        @dataclass(frozen=True)
        class Params:
            {field}

        @register_policy({name!r}, {display_name!r}, Params)
        def make(env, contexts, rng, params):
            return object()
    """)


INSTALLED_PLUGIN_POLICY = "test_installed_greedy"


@pytest.fixture
def installed_plugin(tmp_path, monkeypatch) -> str:
    """A plugin package installed as pip installs one (a ``*.dist-info`` folder
    whose entry_points.txt names its module, on sys.path) and loaded by the
    registry's own discovery, as in a user's environment after `cqb policies`.
    Yields its policy's name."""
    from cqb.sim.policies import registry

    module = "cqb_test_installed_plugin"
    site = tmp_path / "site-packages"
    (site / "cqb_test_installed_plugin-0.1.dist-info").mkdir(parents=True)
    (site / "cqb_test_installed_plugin-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: cqb-test-installed-plugin\nVersion: 0.1\n")
    (site / "cqb_test_installed_plugin-0.1.dist-info" / "entry_points.txt").write_text(
        f"[cqb.policies]\ngreedy = {module}\n")
    (site / f"{module}.py").write_text(plugin_module(INSTALLED_PLUGIN_POLICY, "Greedy (test)", "prior: float = 0.5"))
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    monkeypatch.setattr(registry, "_plugins_loaded", False)  # discover it as a first listing does
    assert INSTALLED_PLUGIN_POLICY in registry.registered_policies()
    yield INSTALLED_PLUGIN_POLICY
    registry._specs.pop(INSTALLED_PLUGIN_POLICY, None)
    registry._display_names.pop(INSTALLED_PLUGIN_POLICY, None)
    sys.modules.pop(module, None)


@pytest.fixture(params=["environment as it is", "a plugin installed and loaded"])
def builtin_policies_only(request, monkeypatch):
    """The registry of the built-in policies alone, for a test that lists or
    counts them: whatever plugins this environment has installed (the README
    tells users to add their own) are left out until the test ends. Each such
    test also runs with a plugin installed and already loaded."""
    from cqb.sim.policies import registry

    if request.param == "a plugin installed and loaded":
        request.getfixturevalue("installed_plugin")
    tables = (registry._specs, registry._display_names)
    saved = [dict(table) for table in tables]
    builtin = registry.builtin_policies()
    for table in tables:
        for name in [name for name in table if name not in builtin]:
            del table[name]
    monkeypatch.setattr(registry, "_plugins_loaded", True)  # so no lookup loads them back
    yield
    for table, before in zip(tables, saved):  # in their order: plugins list in registration order
        table.clear()
        table.update(before)
