"""The candidate benchmark through the workflow, in a throw-away copy, with the
example plugin (examples/greedy_rate) pip-installed into a scratch folder that
only these Snakemake processes see (PYTHONPATH), found through its entry point.

Slow: a copy of the session's smoke run of the paper's experiments
(conftest.shared_smoke_run), then `candidates`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import (CAN_RUN_REAL_DATA, DATASETS_MIRROR, REPO, SMOKE_CONFIG, copy_smoke_run, copy_workflow,
                      shared_smoke_targets)
from cqb.sim.runfile import load_run

pytestmark = pytest.mark.slow

SYNTHETIC = ["synthetic_base", "synthetic_slack", "synthetic_servers", "synthetic_dim"]
EXPERIMENTS = SYNTHETIC + (["mnist", "heart_disease", "coupon"] if CAN_RUN_REAL_DATA else [])
PAPER_TARGETS = ["fig2", "fig3"] + (["fig4"] if CAN_RUN_REAL_DATA else [])


def config_args(*items):
    return ["--config", f"data={{mirror: {DATASETS_MIRROR}}}",
            f"candidate_benchmark={{experiments: [{', '.join(EXPERIMENTS)}]}}", *items]


def run_snakemake(workdir, *args, env=None, check=True):
    process = subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=workdir, capture_output=True,
                             text=True, timeout=900, env=env)
    if check and process.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{process.stdout[-4000:]}\n{process.stderr[-4000:]}")
    return process


def job_counts(output: str) -> dict:
    lines = output.splitlines()
    start = lines.index("Job stats:") + 3
    counts = {}
    for line in lines[start:]:
        parts = line.split()
        if len(parts) != 2 or parts[0] == "total":
            break
        counts[parts[0]] = int(parts[1])
    return counts


@pytest.fixture(scope="module")
def plugin_env(tmp_path_factory):
    """The environment with the example plugin installed into a scratch folder."""
    scratch = tmp_path_factory.mktemp("plugin")
    source = shutil.copytree(REPO / "examples" / "greedy_rate", scratch / "source")  # no build/ in the repo
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--target", str(scratch / "site"), str(source)], check=True, capture_output=True)
    assert (scratch / "site" / "greedy_rate" / "__init__.py").exists()
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(scratch / "site"),
                                                                      os.environ.get("PYTHONPATH")])))


@pytest.fixture(scope="module")
def benchmark_run(tmp_path_factory, plugin_env):
    """The paper's smoke run (a copy of the shared one, its targets a superset
    of PAPER_TARGETS), then the candidates: (workdir, the candidates run's
    Snakemake log, run-file mtimes before)."""
    workdir = copy_smoke_run(tmp_path_factory, tmp_path_factory.mktemp("candidates") / "repo")
    assert set(PAPER_TARGETS) <= set(shared_smoke_targets())
    before = {path: path.stat().st_mtime_ns for path in (workdir / "results" / "smoke" / "runs").rglob("*.npz")}
    run_snakemake(workdir, "candidates", "--cores", "2", *SMOKE_CONFIG, *config_args("candidates=[greedy_rate]"),
                  env=plugin_env)
    # the job stats in Snakemake's own words: its log (the terminal has the progress display)
    log = max((workdir / ".snakemake" / "log").glob("*.snakemake.log"), key=lambda path: path.stat().st_mtime_ns)
    return workdir, log.read_text(), before


def test_only_the_candidates_runs_are_new_and_the_papers_are_reused(benchmark_run):
    workdir, output, before = benchmark_run
    # distinct instances of the cells: the base instance (shared by the four synthetic
    # experiments), ϵ = 0.15, K = 3, d = 3 and, with the data, the three pools; 2 seeds each
    n_instances = 4 + (3 if CAN_RUN_REAL_DATA else 0)
    assert job_counts(output) == {"simulate": 2 * n_instances, "candidates": 1}, output[-3000:]
    runs = workdir / "results" / "smoke" / "runs"
    after = {path: path.stat().st_mtime_ns for path in runs.rglob("*.npz")}
    assert {p: after[p] for p in before} == before  # the paper's run files are untouched
    new = set(after) - set(before)
    assert len(new) == 2 * n_instances and all(path.parent.name == "greedy_rate" for path in new)


def test_the_candidate_plays_the_papers_traces(benchmark_run):
    """Common random numbers: per instance and seed, the oracle's Q*(t) of the
    candidate's run file is that of CQB-ε's, and the seed and instance agree."""
    workdir, _, _ = benchmark_run
    runs = workdir / "results" / "smoke" / "runs"
    mine = sorted(runs.glob("*/T300/greedy_rate/seed*.npz"))
    assert mine
    for path in mine:
        candidate = load_run(path)
        paper = load_run(path.parent.parent / "cqb_eps" / path.name)
        np.testing.assert_array_equal(candidate["oracle_queue"], paper["oracle_queue"])
        assert candidate["metadata"]["seed"] == paper["metadata"]["seed"]
        assert candidate["metadata"]["instance"] == paper["metadata"]["instance"]
        assert candidate["metadata"]["policy"] == "greedy_rate"


def test_leaderboard_claims_and_figure_are_written_from_the_runs(benchmark_run):
    workdir, _, _ = benchmark_run
    figures = workdir / "results" / "smoke" / "figures"
    for name in ("candidates.tsv", "candidates_claims.tsv", "candidates.md", "candidates.pdf", "candidates.png"):
        assert (figures / name).stat().st_size > 0, name
    board = pd.read_csv(figures / "candidates.tsv", sep="\t", dtype={"sweep_value": str}, keep_default_na=False)
    assert list(dict.fromkeys(board["experiment"])) == EXPERIMENTS
    for (experiment, value), cell in board.groupby(["experiment", "sweep_value"]):
        assert cell["is_candidate"].astype(str).tolist().count("True") == 1, (experiment, value)
        assert "oracle" not in set(cell["policy"])
    base = board[board["experiment"] == "synthetic_base"]
    assert len(base) == 8  # 7 paper policies without the oracle + the candidate
    claims = pd.read_csv(figures / "candidates_claims.tsv", sep="\t")
    # one claim per distinct cell and baseline: base, ϵ = 0.15, K = 3, d = 3 (+ three datasets)
    assert len(claims) == 2 * (4 + (3 if CAN_RUN_REAL_DATA else 0))
    assert set(claims["verdict"]) <= {"holds", "does not hold", "inconclusive"}
    # recompute one claim from the run files: paired by seed, CQB-ε − greedy_rate of the mean regret
    runs = workdir / "results" / "smoke" / "runs" / "synth_K5_d5_lam0.7_eps0.15_acc0.005" / "T300"
    differences = []
    for seed in (0, 1):
        regret = {p: load_run(runs / p / f"seed{seed}.npz") for p in ("cqb_eps", "greedy_rate")}
        mean_regret = {p: np.mean(run["queue"] - run["oracle_queue"]) for p, run in regret.items()}
        differences.append(mean_regret["cqb_eps"] - mean_regret["greedy_rate"])
    row = claims.set_index("claim").loc["greedy_rate_below_cqb_eps_synthetic_slack_slack0.15"]
    assert row["value"] == pytest.approx(np.mean(differences), abs=1e-6)
    assert row["statement"] == "Greedy rate has lower mean regret than CQB-ε on synthetic_slack (ϵ = 0.15)"
    text = (figures / "candidates.md").read_text()
    assert text.startswith("Generated by the pipeline from simulation code") and "module greedy_rate" in text


def test_a_second_run_has_nothing_to_do(benchmark_run, plugin_env):
    workdir, _, _ = benchmark_run
    process = run_snakemake(workdir, "-n", "candidates", "--cores", "2", *SMOKE_CONFIG,
                            *config_args("candidates=[greedy_rate]"), env=plugin_env)
    assert "Nothing to be done" in process.stdout + process.stderr


def test_candidates_leave_the_other_targets_unchanged(tmp_path, plugin_env):
    # the default target's jobs are the same with no candidate and with one named:
    # the candidates' runs are requested by the `candidates` target only
    workdir = copy_workflow(tmp_path / "repo")
    counts = [job_counts(run_snakemake(workdir, "-n", "--cores", "2", *SMOKE_CONFIG, *config_args(*extra),
                                       env=plugin_env).stdout)
              for extra in ((), ("candidates=[greedy_rate]",))]
    assert counts[0] == counts[1] and counts[0]["simulate"] > 0
    assert "candidates" not in counts[0]
    process = run_snakemake(workdir, "-n", "candidates", "--cores", "1", *SMOKE_CONFIG, *config_args())
    assert "simulate" not in job_counts(process.stdout)  # the empty benchmark runs nothing …
    process = run_snakemake(workdir, "candidates", "--cores", "1", *SMOKE_CONFIG, *config_args(), check=False)
    assert process.returncode != 0 and "no candidates to benchmark" in process.stderr  # … and says why


def test_a_bad_candidate_name_is_one_line(tmp_path):
    workdir = copy_workflow(tmp_path / "repo")
    process = run_snakemake(workdir, "-n", "candidates", "--cores", "1", *SMOKE_CONFIG,
                            *config_args("candidates=[greedy_rat]"), check=False)
    errors = [line for line in process.stderr.splitlines() if line.startswith("config error:")]
    assert process.returncode != 0 and len(errors) == 1, process.stderr[-2000:]
    assert errors[0].startswith("config error: invalid config value candidates = 'greedy_rat': "
                                "not a registered policy or a policy_variants label")
