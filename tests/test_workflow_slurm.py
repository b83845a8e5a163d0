"""The pipeline on a real Slurm: a single-node cluster started on this machine.

The module fixture starts slurmctld, slurmd and munged from a generated config
in a temporary directory (tests/slurm_cluster.py) and stops them by pid at the
end. Without the Slurm binaries it runs .ci/install-slurm.sh when root; it
skips (with the reason) only when Slurm cannot be installed.

Slow (several minutes): `pytest -m "not slurm"` leaves these out.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import copy_workflow, shared_smoke_run, shared_smoke_targets
from slurm_cluster import SlurmCluster, SlurmUnavailable, ensure_slurm_installed

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

REPO = Path(__file__).resolve().parent.parent
SMOKE_CONFIG = "config/smoke.yaml"
# Figure 2 of the smoke config (synthetic: no dataset needed): 20 runs in two
# groups, two aggregates and the figure, each Slurm job a Snakemake process of
# its own
TARGETS = ("fig2",)
# the experiments fig2 aggregates, each with its per-round, per-run and per-curve tables
TARGET_EXPERIMENTS = {"synthetic_base", "synthetic_slack"}
PROFILE = "profiles/slurm"
# What this cluster needs on top of the profile (a real site needs none of
# these): no accounts, no accounting database (job status from squeue, kept
# MinJobAge = 300 s), a short first status check, and the Slurm logs of
# successful jobs kept as evidence.
SLURM_FLAGS = (
    "--workflow-profile", PROFILE,
    "--slurm-no-account",
    "--slurm-status-command", "squeue",
    "--slurm-init-seconds-before-status-checks", "2",
    "--slurm-keep-successful-logs",
)
# The profile batches 50 simulations per Slurm job; the smoke run has fewer
# than 30, so split them in two to use both CPUs of the node (measured the
# fastest way through this node: 82-87 s against 120-124 s for one group of
# 50 and 128-217 s as a job array; docs/cluster.md, "Batching").
SMOKE_GROUPS = ("--group-components", "sim=14")
TIMEOUT = 1200
SUBMITTED = re.compile(r"has been submitted with SLURM jobid (\d+) \(log: (.+?)\)\.?$", re.M)


@pytest.fixture(scope="module")
def cluster():
    if os.geteuid() != 0:
        pytest.skip("a local Slurm (slurmd, SlurmUser=root) needs root; not root here")
    try:
        ensure_slurm_installed(install=True)
    except SlurmUnavailable as error:
        pytest.skip(f"Slurm is not installed and could not be installed: {error}")
    # from here on a failure to start is an error, not a skip
    started = time.monotonic()
    with SlurmCluster() as slurm:
        print(f"single-node Slurm up in {time.monotonic() - started:.1f} s: {slurm.pids}")
        yield slurm


def snakemake(workdir: Path, *args: str, env=None) -> subprocess.CompletedProcess:
    """Run snakemake in ``workdir`` (stdout and stderr merged into .stdout)."""
    process = subprocess.run(
        [sys.executable, "-m", "snakemake", *args],
        cwd=workdir, env=env, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=TIMEOUT,
    )
    (workdir / f"snakemake-{time.strftime('%H%M%S')}-{os.getpid()}.out").write_text(process.stdout)
    return process


def smoke_dirs() -> tuple[Path, Path]:
    """(results dir, figures dir) of the smoke config, relative to the workdir."""
    smoke = yaml.safe_load((REPO / SMOKE_CONFIG).read_text())
    return Path(smoke.get("results_dir", "results")), Path(smoke.get("figures_dir", "figures"))


def result_tables(workdir: Path) -> dict[str, bytes]:
    """Aggregate tables and figure data tables (not logs or benchmarks)."""
    results, figures = smoke_dirs()
    tables = {}
    for root in {workdir / results, workdir / figures}:
        for path in root.rglob("*.tsv"):
            rel = path.relative_to(workdir)
            if "benchmarks" in rel.parts:  # timings, not results
                continue
            if "aggregate" in rel.parts or path.parent == workdir / figures:
                tables[rel.as_posix()] = path.read_bytes()
    return tables


def run_id_of(output: str) -> str:
    match = re.search(r"SLURM run ID: (\S+)", output)
    assert match, f"no SLURM run ID in the output:\n{output[-3000:]}"
    return match.group(1)


def test_cluster_runs_a_batch_job(cluster, tmp_path):
    """sbatch --wrap hostname completes; srun inside finds the config without SLURM_CONF."""
    out = tmp_path / "job-%j.out"
    job = cluster.run(["sbatch", "--parsable", "-o", str(out),
                       "--wrap", "hostname; env -u SLURM_CONF srun -n1 hostname"]).stdout.strip()
    assert cluster.wait_job(job, timeout=60) == "COMPLETED"
    text = Path(str(out).replace("%j", job)).read_text().split()
    assert text == [cluster.hostname, cluster.hostname]


def first_run_file(workdir: Path, policy: str) -> str:
    """A run file of ``policy`` that the smoke fig2 needs (from a dry run)."""
    dry = snakemake(workdir, "-n", "-p", "--forceall", "fig2", "--cores", "1", "--configfile", SMOKE_CONFIG)
    assert dry.returncode == 0, dry.stdout[-4000:]
    match = re.search(rf"output: (\S+/{policy}/seed\d+\.npz)", dry.stdout)
    assert match, f"no {policy} run in the dry run:\n{dry.stdout[-3000:]}"
    return match.group(1)


# The file's Slurm runs come before the one test that reads the shared smoke
# run: while they wait on the cluster, the other worker builds it.
def test_failing_job_reports_its_log_and_rerun_completes(cluster, tmp_path):
    workdir = copy_workflow(tmp_path / "fail")
    target = first_run_file(workdir, "cqb_eps")
    # A job that fails at run time: the config is checked when the workflow
    # loads, so the fault goes into the job's command line instead (τ from the
    # paper's formula needs slack ϵ > 2·explore_prob, and 0.1 > 1.0 is false).
    rule_file = workdir / "workflow" / "rules" / "simulate.smk"
    good_rule = rule_file.read_text()
    simulate_line = '" --trace-cache {params.trace:q} --code-hash {params.code_hash}'
    assert good_rule.count(simulate_line) == 1
    rule_file.write_text(good_rule.replace(
        simulate_line,
        '" --trace-cache {params.trace:q} --set explore_prob=0.5 --set tau=null --code-hash {params.code_hash}'))

    bad = snakemake(workdir, target, *SLURM_FLAGS, "--configfile", SMOKE_CONFIG, env=cluster.env)
    output = bad.stdout
    assert bad.returncode != 0, output[-4000:]
    submitted = SUBMITTED.findall(output)
    assert len(submitted) == 1, output[-4000:]  # the simulate job alone: it draws its seed's trace itself
    (job_id, slurm_log), = submitted
    assert cluster.jobs().get(job_id) == "FAILED", cluster.jobs()
    # Snakemake's error names the Slurm log, which holds the job's own output
    error = output[output.index("Error in"):]
    assert f"log: {slurm_log} (check log file(s) for error details)" in error, error[:3000]
    assert Path(slurm_log).is_file()
    slurm_log_text = Path(slurm_log).read_text(errors="replace")
    assert "Error in rule simulate" in slurm_log_text, slurm_log_text[-3000:]
    # ... and the rule's own log, with the job's one-line error
    rule_log = re.search(rf"output: {re.escape(target)}\n\s+log: (\S+)", error)
    assert rule_log, error[:3000]
    assert "cqb: error: tau formula needs slack" in (workdir / rule_log.group(1)).read_text()
    assert not (workdir / target).exists()

    rule_file.write_text(good_rule)
    fixed = snakemake(workdir, target, *SLURM_FLAGS, "--configfile", SMOKE_CONFIG, env=cluster.env)
    assert fixed.returncode == 0, fixed.stdout[-6000:]
    assert (workdir / target).is_file()
    (job_id, _), = SUBMITTED.findall(fixed.stdout)
    assert cluster.jobs().get(job_id) == "COMPLETED"


def test_smoke_run_on_slurm_matches_local_run(cluster, tmp_path, tmp_path_factory):
    results, figures = smoke_dirs()

    slurm_dir = copy_workflow(tmp_path / "slurm")
    started = time.monotonic()
    run = snakemake(slurm_dir, *TARGETS, *SLURM_FLAGS, *SMOKE_GROUPS,
                    "--configfile", SMOKE_CONFIG, env=cluster.env)
    slurm_seconds = time.monotonic() - started
    assert run.returncode == 0, f"Slurm run failed:\n{run.stdout[-8000:]}\n{cluster.diagnostics()}"
    output = run.stdout

    # the local run: the session's shared smoke run, whose targets include these
    assert set(TARGETS) <= set(shared_smoke_targets())
    local_dir, local_seconds = shared_smoke_run(tmp_path_factory)
    print(f"smoke {' '.join(TARGETS)}: Slurm {slurm_seconds:.0f} s; the shared local smoke run, "
          f"{' '.join(shared_smoke_targets())} with --cores 2: {local_seconds:.0f} s")

    # the figures come out
    for figure in TARGETS:
        for ext in ("pdf", "png", "tsv"):
            path = slurm_dir / figures / f"{figure}.{ext}"
            assert path.is_file() and path.stat().st_size > 0, path

    # the simulations went through Slurm: every Slurm job the plugin logged is
    # known to slurmctld under this run's job name and completed, its log is
    # there, and every run file was written by one of those jobs
    run_id = run_id_of(output)
    submitted = SUBMITTED.findall(output)
    assert submitted, f"no Slurm submission in the output:\n{output[-4000:]}"
    states, names = cluster.jobs(), cluster.job_names()
    logs = []
    for job_id, log in submitted:
        assert names.get(job_id) == run_id, (job_id, names)
        assert states.get(job_id) == "COMPLETED", (job_id, states.get(job_id))
        log = Path(log)
        assert log.is_file() and log.is_relative_to(slurm_dir / ".snakemake" / "slurm_logs"), log
        logs.append(log.read_text(errors="replace"))
    run_files = sorted(p.relative_to(slurm_dir).as_posix()
                       for p in (slurm_dir / results / "runs").rglob("*.npz"))
    assert run_files
    not_in_slurm = [f for f in run_files if not any(f in text for text in logs)]
    assert not not_in_slurm, f"run files not made by a Slurm job: {not_in_slurm[:5]}"
    assert "localrule simulate" not in output

    # bit-identical tables: every table of the Slurm run, as the local run wrote it
    slurm_tables, local_tables = result_tables(slurm_dir), result_tables(local_dir)
    aggregated = {Path(name).name.split(".")[0] for name in slurm_tables if "aggregate" in name}
    assert TARGET_EXPERIMENTS <= aggregated, sorted(slurm_tables)
    assert {f"{figures.as_posix()}/{figure}.tsv" for figure in TARGETS} <= set(slurm_tables), sorted(slurm_tables)
    assert set(slurm_tables) <= set(local_tables), sorted(set(slurm_tables) - set(local_tables))
    differing = [name for name in slurm_tables if slurm_tables[name] != local_tables[name]]
    assert not differing, f"Slurm and local tables differ: {differing}"
