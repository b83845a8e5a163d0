"""The trace cache through the workflow, in a throw-away copy: no `trace`
jobs; each simulate job passes its seed's trace file as `--trace-cache`, so
the first job of a seed draws it and the others read it; the trace files are
no Snakemake outputs, so deleting a run file reruns that run only and
deleting the traces reruns nothing."""

from __future__ import annotations

import re
import shutil

import pytest

from conftest import REPO, copy_workflow, snakemake
from test_workflow_candidates import job_counts

SMOKE = ("--configfile", "config/smoke.yaml")
DATA = ("--config", f"data={{mirror: {REPO.parent / 'shared' / 'datasets'}}}")
RUN = re.compile(r"output: (results/smoke/runs/([^/\s]+)/T(\d+)/([^/\s]+)/seed(\d+)\.npz)")


def _dry(workdir, *targets, forceall=True):
    process = snakemake(workdir, "-n", "-p", *(["--forceall"] if forceall else []), *targets, "--cores", "1",
                        *SMOKE, *DATA)
    return process.stdout


def test_a_dry_run_has_no_trace_jobs_and_every_run_names_its_trace_cache(workflow_copy):
    output = _dry(workflow_copy, "fig2", "fig3")
    counts = job_counts(output)
    assert "trace" not in counts and counts["simulate"] > 0, counts
    commands = [line for line in output.splitlines() if " run --instance-spec " in line]
    assert len(commands) == counts["simulate"]
    for command in commands:
        assert "--draw-trace" not in command and " --trace " not in command
        horizon, seed = re.search(r"--horizon (\d+) --seed (\d+)", command).groups()
        instance = re.search(r"--out results/smoke/runs/([^/]+)/", command).group(1)
        assert f"--trace-cache results/smoke/traces/{instance}/T{horizon}/seed{seed}.npz " in command, command


def test_a_pool_run_still_depends_on_its_pool_file(workflow_copy):
    if not (REPO.parent / "shared" / "datasets").is_dir():
        pytest.skip("no dataset mirror: the pool instances' data rules cannot be planned")
    output = _dry(workflow_copy, "fig4")
    blocks = [block for block in output.split("\n\n") if "rule simulate:" in block and "/mnist" in block]
    assert blocks, output[-3000:]
    assert all(re.search(r"input: \S*data/processed/mnist/\S+\.npz", block) for block in blocks), blocks[0]


def test_the_first_run_of_a_seed_draws_its_trace_and_the_others_read_it(workflow_copy):
    """Two policies of one seed, one job after the other: the trace file is
    written once; removing one run file reruns that run alone, removing the
    trace folder reruns nothing."""
    runs = RUN.findall(_dry(workflow_copy, "fig2"))
    instance, horizon, seed = runs[0][1], runs[0][2], runs[0][4]
    pair = sorted({path for path, i, h, _, s in runs if (i, h, s) == (instance, horizon, seed)})[:2]
    assert len(pair) == 2, runs[:4]
    snakemake(workflow_copy, *pair, "--cores", "1", *SMOKE, *DATA)
    trace = workflow_copy / f"results/smoke/traces/{instance}/T{horizon}/seed{seed}.npz"
    assert trace.is_file()
    assert [path.name for path in trace.parent.iterdir()] == [trace.name]
    logs = [workflow_copy / path.replace("/runs/", "/logs/simulate/").replace(".npz", ".log") for path in pair]
    for log in logs:
        assert "trace cache" not in log.read_text(), log.read_text()  # none there, then a valid one: no news
    # written once, by the first job, before either run file
    assert trace.stat().st_mtime_ns < min((workflow_copy / path).stat().st_mtime_ns for path in pair)
    (workflow_copy / pair[0]).unlink()
    assert job_counts(_dry(workflow_copy, *pair, forceall=False)) == {"simulate": 1}
    snakemake(workflow_copy, pair[0], "--cores", "1", *SMOKE, *DATA)
    shutil.rmtree(workflow_copy / "results/smoke/traces")
    process = snakemake(workflow_copy, "-n", *pair, "--cores", "1", *SMOKE, *DATA)
    assert "Nothing to be done" in process.stdout + process.stderr, process.stdout[-3000:]


def test_a_truncated_trace_cache_is_drawn_again_by_the_next_job(workflow_copy):
    """A cache cut short (a full disk, a copy interrupted) costs a redraw and
    one warning line in the job's log, not a failed job."""
    runs = RUN.findall(_dry(workflow_copy, "fig2"))
    path, instance, horizon, _, seed = runs[0]
    snakemake(workflow_copy, path, "--cores", "1", *SMOKE, *DATA)
    trace = workflow_copy / f"results/smoke/traces/{instance}/T{horizon}/seed{seed}.npz"
    trace.write_bytes(trace.read_bytes()[:1000])
    (workflow_copy / path).unlink()
    snakemake(workflow_copy, path, "--cores", "1", *SMOKE, *DATA)
    log = (workflow_copy / path.replace("/runs/", "/logs/simulate/").replace(".npz", ".log")).read_text()
    warnings = [line for line in log.splitlines() if "trace cache" in line]
    assert len(warnings) == 1 and "is corrupt or truncated" in warnings[0] and "drawing it again" in warnings[0], log
    from cqb.sim.trace import load_trace

    spec = __import__("json").loads(re.search(r"--instance-spec '([^']+)'", _dry(workflow_copy, path)).group(1))
    load_trace(trace, spec, int(horizon), int(seed))  # whole again


def test_a_local_run_sweeps_the_killed_writes_temporaries_and_its_jobs_skip_their_own_scan(workflow_copy):
    """At its start the workflow removes every hidden .tmp file under the run
    folder (a killed write's: no job is running yet) and tells its jobs so:
    they then skip the listing of their output's folder, which would have
    removed any `.NAME.*` file of theirs (kept here, as it is no .tmp)."""
    path = sorted(RUN.findall(_dry(workflow_copy, "fig2")))[0][0]
    out = workflow_copy / path
    out.parent.mkdir(parents=True)
    other = workflow_copy / "results/smoke/runs/elsewhere/.seed3.npz.k2j4h6g8.tmp"
    other.parent.mkdir(parents=True)
    stale, unswept = out.parent / f".{out.name}.q8w7e6r5.tmp", out.parent / f".{out.name}.partial"
    for file in (stale, other, unswept):
        file.write_bytes(b"half")
    snakemake(workflow_copy, path, "--cores", "1", *SMOKE, *DATA)
    assert out.is_file() and not stale.exists() and not other.exists()
    assert unswept.exists()  # the job did not list its folder
