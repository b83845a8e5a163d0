"""Shared fixtures: fabricated run files and a throw-away copy of the workflow."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cqb.sim.runfile import save_run
from cqb.sim.simulate import RunResult

REPO = Path(__file__).resolve().parent.parent
# What a run of the pipeline needs besides the installed package.
WORKFLOW_FILES = ("Snakefile", "workflow", "config", "scripts")


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
