"""Shared fixtures: fabricated run files, a throw-away copy of the workflow,
and the policy registry with or without a plugin installed."""

from __future__ import annotations

import fcntl
import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from cqb.presentation import policy_styles

from cqb.analysis.curves import Curve
from cqb.sim.runfile import save_run
from cqb.sim.simulate import RunResult

REPO = Path(__file__).resolve().parent.parent

# The test files that run Snakemake end to end, the longest first (wall time
# of each under `-n 2 --dist loadfile`, in this order: about 180, 170, 80, 55,
# 40, 35, 30, 25, 15 and 15 s; Figure 7's reads the shared smoke run, built by
# then). Each file goes whole to one worker, in the order of the collection;
# xdist's own reordering (by number of tests per file, turned off in
# pyproject.toml) would start these few-test, long files last. The Slurm file
# leads: its runs wait on the cluster while the other worker builds the shared
# smoke run (shared_smoke_run) that both files read. tests/test_suite_order.py
# keeps every slow file in this list.
LONGEST_FILES_FIRST = (
    "test_workflow_slurm.py",
    "test_workflow.py",
    "test_workflow_output.py",
    "test_workflow_docs_commands.py",
    "test_jobs_faults.py",
    "test_workflow_data.py",
    "test_workflow_traces.py",
    "test_analysis_replication_statistics.py",
    "test_workflow_candidates.py",
    "test_mnist_readers.py",
    "test_workflow_module.py",
    "test_workflow_fig7.py",
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


# ------------------------------------------------------------------ the shared smoke run

DATASETS_MIRROR = REPO.parent / "shared" / "datasets"
CAN_RUN_REAL_DATA = DATASETS_MIRROR.is_dir() and importlib.util.find_spec("torchvision") is not None
SMOKE_CONFIG = ("--configfile", "config/smoke.yaml")


def smoke_targets() -> list[str]:
    """What tests/test_workflow.py reads of the smoke run: the claims include the
    real-data experiments, so they need fig4's data (the mirror and torchvision)."""
    return ["fig2", "fig3", "fig5", "fig6", "powered_claims", "tuning"] + (
        ["fig4", "claims", "calibration", "replication"] if CAN_RUN_REAL_DATA else [])


def shared_smoke_targets() -> list[str]:
    """The shared run's targets: the smoke targets, and Figure 7 where the data allow."""
    return smoke_targets() + (["fig7", "fig4_assumptions"] if CAN_RUN_REAL_DATA else [])


def smoke_args(*targets, cores=2) -> list[str]:
    # targets first: --configfile takes every following word as a file
    return [*targets, "--cores", str(cores), *SMOKE_CONFIG, "--config", f"data={{mirror: {DATASETS_MIRROR}}}"]


def session_folder(tmp_path_factory) -> Path:
    """A folder of this pytest session that every xdist worker sees (the
    workers' base folders share their parent, which is the session's own)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def shared_smoke_run(tmp_path_factory) -> tuple[Path, float]:
    """One end-to-end smoke run for the whole session, whichever worker asks
    first (the others wait on its lock): (its workflow copy, its seconds).
    Tests only read it or run Snakemake dry on it; a test that writes copies
    it (copy_smoke_run). A failed run fails every test that asks, with its
    output."""
    folder = session_folder(tmp_path_factory) / "shared-smoke"
    folder.mkdir(exist_ok=True)
    workdir, done, failed = folder / "repo", folder / "seconds", folder / "failure"
    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if failed.exists():
            raise AssertionError(f"the shared smoke run failed:\n{failed.read_text()}")
        if not done.exists():
            shutil.rmtree(workdir, ignore_errors=True)
            copy_workflow(workdir)
            started = time.monotonic()
            try:
                snakemake(workdir, *smoke_args(*shared_smoke_targets()), timeout=900)
            except (AssertionError, subprocess.TimeoutExpired) as error:
                failed.write_text(str(error))
                raise
            done.write_text(f"{time.monotonic() - started:.1f}")
    return workdir, float(done.read_text())


def run_file_of_log(results: Path, log: Path) -> Path:
    """The run file a simulate job's log (results/logs/simulate/...) names."""
    return results / "runs" / log.relative_to(results / "logs" / "simulate").with_suffix(".npz")


def copy_smoke_run(tmp_path_factory, destination: Path) -> Path:
    """A writable copy of the shared smoke run: workflow, data, results and
    Snakemake's records, with their times (so nothing is out of date)."""
    workdir, _ = shared_smoke_run(tmp_path_factory)
    try:
        shutil.copytree(workdir, destination, symlinks=True)
    except shutil.Error as error:  # only a file another test's Snakemake made and removed meanwhile
        lasting = [problem for problem in error.args[0] if os.path.lexists(problem[0])]
        if lasting:
            raise shutil.Error(lasting) from error
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
    policy_styles._styles.pop(INSTALLED_PLUGIN_POLICY, None)
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
    tables = (registry._specs, policy_styles._styles)
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
