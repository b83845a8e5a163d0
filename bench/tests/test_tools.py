"""The measurement tools' logic (not their timings): a job's start-up and its
loop-start probe, the baseline trees, sim_speed's job sample, the timeline."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

import cqb.sim.simulate
from bench import trees
from bench.startup import FORKED, startup_table, startup_times
from cqb.sim.simulate import simulate

SMALL = {"kind": "synthetic", "n_servers": 2, "dim": 2, "arrival_rate": 0.5, "slack": 0.1}
SRC = Path(cqb.sim.simulate.__file__).parents[2]


def test_the_simulation_code_has_no_probe_of_its_own(capsys):
    """The loop-start probe wraps run_policy from outside (CLI_SCRIPT): the
    hashed simulation code prints nothing of it."""
    simulate(SMALL, "cqb_opt", None, 5, 0)
    assert "loop start" not in capsys.readouterr().err
    assert "environ" not in Path(cqb.sim.simulate.__file__).read_text()


def test_startup_times_measure_a_real_process_and_its_first_round(tmp_path):
    times = startup_times({"here": SRC}, runs=2, out_dir=tmp_path)
    process, loop_start, cpu = times["here"]["process"], times["here"]["loop_start"], times["here"]["cpu"]
    assert len(process) == len(loop_start) == len(cpu) == 2
    assert all(seconds > 0.02 for seconds in cpu)  # importing numpy alone; this process only waits
    # the loop starts after the process is spawned and before it has exited
    assert all(0 < start < total for start, total in zip(loop_start, process))
    assert (tmp_path / "startup.npz").exists()


def test_startup_table_says_when_a_source_has_no_probe():
    times = {"old": {"process": [0.3, 0.2, 0.25], "cpu": [0.2, 0.2, 0.3], "loop_start": []},
             "new": {"process": [0.14, 0.12, 0.13], "cpu": [0.1, 0.12, 0.1], "loop_start": [0.10, 0.11, 0.09]}}
    table = startup_table(times, (1.0, 0.5, 0.25), (1.5, 0.5, 0.25))
    assert "| old | 0.250 s | 0.200 s | no probe | no probe | 0.200 s |" in table
    assert "| new | 0.130 s | 0.120 s | 0.100 s | 0.090 s | 0.100 s |" in table
    assert "1.00, 0.50, 0.25 before" in table and "3 runs" in table


def test_startup_times_of_a_forked_job_add_the_forked_run_cpu(tmp_path):
    from cqb.jobs import client as run_client

    server = run_client.start()
    try:
        times = startup_times({"here": SRC}, runs=2, out_dir=tmp_path, server_socket=server.socket_path)
    finally:
        server.stop()
    forked = times[FORKED]
    assert len(forked["process"]) == len(forked["cpu"]) == 2
    assert forked["loop_start"] == []  # the loop runs in the server's fork, which the probe does not wrap
    # the job's process plus the forked run, which simulates 500 rounds of CQB-Opt
    assert all(cpu > 0.005 for cpu in forked["cpu"])


def test_sim_speed_samples_the_simulate_jobs_of_a_snakemake_log(tmp_path):
    """--jobs-from reads each simulate job's run from its shell line, and no other rule's."""
    from bench.sim_speed import sampled_jobs

    spec = '{"arrival_rate": 0.7, "dim": 5, "kind": "synthetic", "n_servers": 5, "slack": 0.1}'
    lines = [
        "localrule simulate:",
        "Shell command: cqb_job() { :; }; cqb_job run --instance-spec '" + spec + "' --policy cqb_opt"
        " --params '{\"bonus_scale\": 0.03}' --horizon 5000 --seed 60001 --trace t.npz --code-hash abc"
        " --out r.npz 2> r.log",
        "Shell command: \"${CQB_RUN_CLIENT:-cqb}\" run --draw-trace --instance-spec '" + spec + "'"
        " --horizon 5000 --seed 60001 --out t.npz 2> t.log",
        "Shell command: cqb_job() { :; }; cqb_job run --instance-spec '" + spec + "' --policy random"
        " --params '{}' --horizon 2000 --seed 7 --out q.npz 2> q.log",
    ]
    log = tmp_path / "snakemake.log"
    log.write_text("\n".join(lines) + "\n")
    jobs = sorted(sampled_jobs(log, 10, 0), key=lambda job: job["policy"])
    assert jobs == [
        {"spec": json.loads(spec), "policy": "cqb_opt", "params": {"bonus_scale": 0.03}, "horizon": 5000,
         "seed": 60001},
        {"spec": json.loads(spec), "policy": "random", "params": {}, "horizon": 2000, "seed": 7},
    ]
    assert len(sampled_jobs(log, 1, 0)) == 1


def test_the_sampled_jobs_ratio_is_of_the_sums_with_a_paired_bootstrap_interval():
    """The whole sample's ratio is Σ this / Σ baseline (the total CPU's), not a
    mean of the jobs' ratios; the interval holds it; a job's pair resampled
    together: with every job exactly 0.5× its baseline the interval is a point."""
    from bench.sim_speed import sample_rows

    jobs = [{"policy": "cqb_opt"}] * 3 + [{"policy": "random"}]
    before = [0.1, 0.2, 0.4, 1.0]
    after = [0.05, 0.1, 0.2, 1.0]  # the jobs' ratios average 0.625; the sums' ratio is 1.35 / 1.7
    rows = sample_rows(jobs, before, after)
    cells = {row.split(" | ")[0].strip("| *"): row.split(" | ") for row in rows[2:]}
    assert cells["all"][4] == f"{1.35 / 1.7:.2f}"
    low, high = (float(x) for x in cells["all"][5].strip("[] |").split(", "))
    assert low <= 1.35 / 1.7 <= high and low < high
    assert cells["cqb_opt"][4] == "0.50" and cells["cqb_opt"][5].strip(" |") == "[0.50, 0.50]"
    assert cells["cqb_opt"][2:4] == ["233.3", "116.7"]


def test_timeline_counts_the_seconds_short_of_jobs():
    """Two jobs side by side for two seconds, one alone for three, a second
    with none, a checkpoint alone: 5 short seconds, one of them empty, blamed
    on the rules that ran alone."""
    from bench.timeline import job_spans, short_seconds

    def stamp(second):
        return f"[Wed Dec  2 00:00:{second:02d} 2026]"

    lines = [stamp(0), "localrule simulate:", "    jobid: 1", stamp(0), "rule aggregate:", "    jobid: 2",
             stamp(1), "Finished jobid: 1 (Rule: simulate)", stamp(4), "Finished jobid: 2 (Rule: aggregate)",
             stamp(6), "localcheckpoint powered_look:", "    jobid: 3", stamp(6), "Finished jobid: 3"]
    spans = job_spans(lines)
    assert {job: rule for job, (rule, _, _) in spans.items()} == {1: "simulate", 2: "aggregate", 3: "powered_look"}
    span, short, empty, blame = short_seconds(spans, 2)
    assert (span, short, empty) == (7, 5, 1)
    assert blame == {"aggregate": 3, "powered_look": 1}


def test_a_baseline_is_a_checkout_or_its_src_folder(tmp_path):
    """Either names the folder that goes on PYTHONPATH; anything else is refused."""
    assert trees.SOURCE == SRC  # the tools time the checkout they sit in
    assert trees.source_folder(trees.CHECKOUT) == trees.source_folder(trees.SOURCE) == SRC
    with pytest.raises(SystemExit, match="not a cqb checkout"):
        trees.source_folder(tmp_path)


def test_a_baseline_that_does_not_run_is_refused_with_the_build_command(tmp_path):
    """A tree whose compiled parts are missing (a fresh checkout, never built):
    refused before any timing, with the command that builds it."""
    (tmp_path / "src" / "cqb").mkdir(parents=True)
    (tmp_path / "src" / "cqb" / "__init__.py").write_text("")  # imports, but has no simulation
    with pytest.raises(SystemExit, match="build_ext --inplace"):
        trees.check_runs(tmp_path)
    assert trees.check_runs(trees.CHECKOUT) == SRC


def _simulate_log(results: Path, instance: str, policy: str, seed: int, cpu: float) -> None:
    log = results / "logs" / "simulate" / instance / "T500" / policy / f"seed{seed}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(f"cqb 0.1.0 code x: {policy}\n{policy} seed {seed}: Q(T) = 1, Q*(T) = 1, 0.2 s "
                   f"({cpu:.2f} s CPU in this process), wrote run.npz\n")


TIMINGS_HEADER = ("date\tlabel\tcommand\twall_seconds\tload_before\tload_mean\tload_max\tcores\treturncode"
                  "\tcpu_seconds\tsnakemake_cpu_seconds\n")


def test_common_jobs_compares_only_trace_keys_with_the_same_jobs(tmp_path, capsys):
    """A key whose jobs differ between the runs (an extra policy) is left out
    of the common sum, and so is a log without its last line (a killed run);
    each run's row is its last timed run of the whole replication, with or
    without --config settings (not of a target)."""
    from bench.common_jobs import job_cpu, main

    old, new = tmp_path / "old", tmp_path / "new"
    for clone, scale in ((old, 1.0), (new, 0.5)):
        for seed in (0, 1):
            _simulate_log(clone / "results", "synth", "cqb_opt", seed, 0.1 * scale)
            _simulate_log(clone / "results", "synth", "random", seed, 0.04 * scale)
        timings = clone / "docs" / "results" / "timings.tsv"
        timings.parent.mkdir(parents=True)
        timings.write_text(TIMINGS_HEADER
                           + "d\twhole\t.venv/bin/snakemake --cores 2\t10\t1\t2\t2\t2\t0\t8\t1\n"
                           + f"d\tswitches\t.venv/bin/snakemake --cores 2 --config execution={{a: false}}"
                           f"\t{600 * scale + 5}\t1\t2.2\t3\t2\t0\t900\t90\n"
                           + "d\tone figure\t.venv/bin/snakemake --cores 2 fig8\t50\t1\t2\t2\t2\t0\t80\t9\n")
    _simulate_log(new / "results", "synth", "cqb_ts", 1, 0.3)  # seed 1 has a third job in the new run only
    _simulate_log(new / "results", "pool", "cqb_opt", 0, 0.5)  # a key the old run lacks
    killed = old / "results" / "logs" / "simulate" / "synth" / "T500" / "q_ucb" / "seed0.log"
    killed.parent.mkdir(parents=True)
    killed.write_text("cqb 0.1.0 code x: q_ucb\n")
    assert len(job_cpu(old / "results")) == 4 and len(job_cpu(new / "results")) == 6
    out_file = tmp_path / "speed.md"
    assert main([str(old), str(new), "--out", str(out_file)]) == 0
    out = capsys.readouterr().out
    assert out == out_file.read_text()
    # the old run: 0.28 s in all, seed 0's two jobs 0.14 s; the new one: seed 0's at half
    assert "| baseline | ? | 10 min 05 s | 900 | 90 | 2.2 | 4 | 0 | 70.0 | 2 | 0 | 70.0 |" in out
    assert "| this code | ? | 5 min 05 s | 900 | 90 | 2.2 | 6 | 1 | 156.7 | 2 | 0 | 35.0 |" in out
    assert "this code / baseline: 0.500" in out


def test_the_handoff_cost_counts_a_workers_runs_while_it_lives_and_once_after_it_is_reaped(tmp_path, monkeypatch):
    """A worker serves several runs before the server waits for it: its CPU
    is read while it lives (cutime alone would show none), and once after."""
    import subprocess
    import sys

    from bench.handoff_costs import _server_cpu
    from cqb.jobs import client as run_client

    for name in (run_client.RUN_SERVER_VARIABLE, run_client.RUN_CLIENT_VARIABLE, run_client.RUN_FALLBACK_VARIABLE):
        monkeypatch.delenv(name, raising=False)
    server = run_client.start(client=False, worker_runs=2)
    try:
        readings = [_server_cpu(server.pid)[1]]
        # the same run twice (the same work, so a double count reads as 2x, not as another seed's cost),
        # long enough that the run outweighs the first's warm-up and the second's exit;
        # the second is the worker's last: it exits and is reaped
        for name in ("first", "second"):
            done = subprocess.run([str(Path(sys.executable).parent / "cqb"), "run", "--policy", "cqb_opt", "--seed",
                                   "1", "--horizon", "100000", "--out", str(tmp_path / f"{name}.npz")],
                                  capture_output=True, text=True, timeout=60)
            assert done.returncode == 0 and "running in this process" not in done.stderr, done.stderr
            readings.append(_server_cpu(server.pid)[1])
    finally:
        server.stop()
    first, second = readings[1] - readings[0], readings[2] - readings[1]
    assert first > 0.05, readings  # the live worker's first run
    assert 0.5 * first < second < 1.5 * first, readings  # the second run, counted once (not its worker's life again)


def test_path_replay_replays_only_the_changed_runs_and_names_the_file_each_reproduces(tmp_path, capsys):
    import numpy as np

    from bench import path_replay
    from cqb.sim.runfile import save_run

    spec = SMALL
    for seed in (0, 1):
        new = simulate(spec, "cqb_opt", None, 60, seed)
        old = new
        if seed == 1:  # the old tree's path of seed 1 differs
            old = dataclasses.replace(new, queue=np.append(new.queue[:-1], new.queue[-1] + 1))
        for tree, result in (("old", old), ("new", new)):
            save_run(tmp_path / tree / "synth" / "T60" / "cqb_opt" / f"seed{seed}.npz", result)
    changed = path_replay.changed_runs(tmp_path / "old", tmp_path / "new")
    assert [name for name, _, _ in changed] == [str(Path("synth/T60/cqb_opt/seed1.npz"))]
    assert path_replay.main([str(tmp_path / "old"), str(tmp_path / "new"), "--workdir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert ": 1 runs whose queue path changed, replayed" in out
    assert "| the new run file | 1 |" in out and "old run file" not in out


def test_sim_speed_pairs_the_rounds_of_the_two_sources():
    from bench.sim_speed import speed_rows

    # round by round 1.5, 0.5, 1.0 (median 1.00), while the medians by source give 0.75
    times = {("baseline", "p"): [0.010, 0.030, 0.020], ("this checkout", "p"): [0.015, 0.015, 0.020]}
    header, rule, row = speed_rows(times, ["p"])
    assert row == "| p | 20.0 | 15.0 | 0.75 | 1.00 [0.50, 1.50] |"
    assert header.count("|") == rule.count("|")
