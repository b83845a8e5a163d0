"""What the terminal shows through the profile's logger (snakemake_logger_plugin_cqb):
a dry run's summary per rule and reason, and the one line a Ctrl-C ends with.

The summary's and the line's wording without Snakemake; a real dry run of the
whole workflow and a real SIGINT to a running one (slow).
"""

from __future__ import annotations

import io
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from conftest import DATASETS_MIRROR, REPO, copy_workflow, run_file_of_log, snakemake
from snakemake_logger_plugin_cqb import (FAILURE_HOLD, REASONS_HEADING, DryRunSummary, LogHandler, reason_words,
                                         stopped_line)
from test_workflow_candidates import job_counts

SUMMARY_LINE = re.compile(r"^ +([\d,]+) (?:checkpoint )?(\w+): (.+)$")
# the smoke config's fig2 with runs long enough (a few tenths of a second) to be caught mid-run
LONG_RUNS = ("--configfile", "config/smoke.yaml", "--config",
             "experiments={synthetic_base: {horizon: 50000}, synthetic_slack: {horizon: 50000}}")
RESULTS = Path("results/smoke")
# Snakemake as a terminal starts it: SIGINT at its default action and not
# blocked. A process inherits both through exec, and a pytest worker can hand
# SIGINT down ignored or blocked (then no Ctrl-C reaches the run, which goes
# on to its end).
AS_FROM_A_TERMINAL = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                      "signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT}); "
                      "os.execv(sys.executable, [sys.executable, '-m', 'snakemake', *sys.argv[1:]])")
INTERRUPTED = re.compile(r"Interrupted: (\d+) jobs? stopped, (?:its|their) partial outputs removed\. "
                         r"Rerun the same command to continue\.")


def test_reasons_are_named_in_a_few_words_per_part():
    # Snakemake's texts (snakemake.jobs.Reason.__str__), file lists included
    assert reason_words("Missing output files: results/a.npz, results/b.npz") == ("missing output",)
    assert reason_words("Missing output files: x.tsv; Input files updated by another job: a.npz, b.npz") == (
        "missing output", "input updated by another job")
    assert reason_words("Forced execution") == ("forced",)
    assert reason_words("Params have changed since last execution: only in new: abc") == ("params changed",)
    assert reason_words("Finished (was: Updated input files: a; Code has changed since last execution)") == (
        "updated input", "code changed")
    assert reason_words("Some reason of a later Snakemake: its files") == ("some reason of a later snakemake",)
    assert reason_words("") == ("no reason given",)


def test_the_summary_counts_jobs_per_rule_and_reason_in_the_job_stats_order():
    summary = DryRunSummary()
    for _ in range(14387):
        summary.add("simulate", "Missing output files: results/runs/x.npz")
    summary.add("simulate", "Forced execution")
    summary.add("fig2", "Missing output files: figures/fig2.png; Input files updated by another job: a.tsv")
    summary.add("powered_look", "Missing output files: look1.json", checkpoint=True)
    summary.add("aggregate", "Missing output files: a.tsv")
    assert summary.lines(["simulate", "aggregate", "powered_look"]) == [
        "14,387 simulate: missing output",
        "     1 simulate: forced",
        "     1 aggregate: missing output",
        "     1 checkpoint powered_look: missing output",
        "     1 fig2: missing output, input updated by another job",  # not in the stats: as first seen
    ]


def test_the_interrupt_line_says_how_many_jobs_stopped_and_what_to_do():
    assert stopped_line(3, True) == ("Interrupted: 3 jobs stopped, their partial outputs removed. "
                                     "Rerun the same command to continue.")
    assert INTERRUPTED.fullmatch(stopped_line(1, True)) and INTERRUPTED.fullmatch(stopped_line(2, True))
    assert stopped_line(2, False) == "Interrupted: 2 jobs stopped. Rerun the same command to continue."
    assert stopped_line(0, True) == "Interrupted: no job was running. Rerun the same command to continue."


def progress_handler():
    """The profile's handler of a run, its console writing into a buffer, with
    Python's own SIGINT handler beneath it (a test runner may have another)."""
    from snakemake.settings.types import OutputSettings

    handler = LogHandler(OutputSettings(dryrun=False, stdout=True), None)
    handler.console.file = io.StringIO()
    return handler


def job_error_record(jobid: int) -> logging.LogRecord:
    """A job's failure as Snakemake logs it (snakemake.jobs.Job.get_log_error_info)."""
    from snakemake_interface_logger_plugins.common import LogEvent

    record = logging.LogRecord("snakemake", logging.ERROR, __file__, 1, f"Error in rule simulate, jobid: {jobid}",
                               None, None)
    fields = dict(event=LogEvent.JOB_ERROR, rule_name="simulate", rule_msg=None, jobid=jobid, input=[],
                  output=[f"run{jobid}.npz"], log=[], conda_env=None, container_img=None, aux={}, indent=False,
                  shellcmd="cqb run")
    for name, value in fields.items():
        setattr(record, name, value)
    return record


@pytest.fixture
def python_sigint_handler():
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def test_a_failure_logged_before_the_sigint_reaches_the_main_thread_is_not_shown(python_sigint_handler):
    """The race of a terminal's Ctrl-C: the stopped job's failure is logged (in
    another thread) before the main thread runs the SIGINT handler."""
    handler = progress_handler()
    shown = threading.Thread(target=handler.emit, args=(job_error_record(3),))
    shown.start()
    time.sleep(FAILURE_HOLD / 10)
    with pytest.raises(KeyboardInterrupt):  # what Snakemake's scheduler catches
        signal.raise_signal(signal.SIGINT)
    shown.join()
    handler.close()
    output = handler.console.file.getvalue()
    assert "Failed" not in output and output.strip().endswith("Rerun the same command to continue."), output


def test_failures_without_a_sigint_are_shown_after_one_hold(python_sigint_handler):
    """Three failures logged together, handled one after the other in one
    thread (Snakemake's queue listener): one wait, not three."""
    handler = progress_handler()
    start = time.monotonic()
    records = [job_error_record(jobid) for jobid in (3, 4, 5)]
    listener = threading.Thread(target=lambda: [handler.emit(record) for record in records])
    listener.start()
    listener.join()
    took = time.monotonic() - start
    handler.close()
    output = handler.console.file.getvalue()
    assert output.count("Failed") == 3 and "Interrupted" not in output, output
    assert FAILURE_HOLD * 0.9 <= took < FAILURE_HOLD * 2, took


def summary_counts(output: str) -> dict[str, dict[str, int]]:
    """rule → {reasons: jobs} from a dry run's summary."""
    lines = output.splitlines()
    counts: dict[str, dict[str, int]] = {}
    for line in lines[lines.index(REASONS_HEADING) + 1:]:
        match = SUMMARY_LINE.match(line)
        if not match:
            break
        jobs, rule, reasons = match.groups()
        counts.setdefault(rule, {})[reasons] = int(jobs.replace(",", ""))
    return counts


@pytest.fixture(scope="module")
def forced_dry_run(tmp_path_factory) -> subprocess.CompletedProcess:
    """`snakemake -n --forceall` of the full config in a fresh copy: every job of
    `all` (the default target), each forced. One dry run for both tests below."""
    workdir = copy_workflow(tmp_path_factory.mktemp("forced") / "repo")
    return snakemake(workdir, "-n", "--forceall", "--config", f"data={{mirror: {DATASETS_MIRROR}}}")


@pytest.mark.slow
def test_a_forced_dry_run_of_the_whole_workflow_is_short_and_names_every_rule(forced_dry_run):
    # 14,498 jobs: each job's listing with its command took 20.6 MB
    process = forced_dry_run
    output = process.stdout + process.stderr
    assert len(output.encode()) < 50_000, len(output.encode())
    assert "run --instance-spec" not in output and "Reason:" not in output  # no job listed
    stats = job_counts(process.stdout)
    reasons = summary_counts(process.stdout)
    assert stats["simulate"] > 10_000 and len(stats) > 20, stats
    assert {rule: sum(jobs.values()) for rule, jobs in reasons.items()} == stats
    assert all(set(jobs) == {"forced"} for jobs in reasons.values()), reasons
    assert "checkpoint powered_look: forced" in process.stdout


@pytest.mark.slow
def test_the_full_config_builds_every_figure_from_the_designs_runs(forced_dry_run):
    stats = job_counts(forced_dry_run.stdout)
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    for figure in config["figures"]:
        assert stats.get(figure) == 1, figure
    # shared runs are counted once: fig2 left and the ϵ = 0.1 sweep, fig3's K = 5 and d = 5
    n_simulate = stats["simulate"]
    # fig2 + fig3: 8×10 base + 2×2×10 (ϵ = 0.05, 0.15) + 2×2×3×10 (K ≠ 5, d ≠ 5) = 240;
    # fig6: CQB-Opt and CQB-ε × 4×10 (c_β ≠ each one's default; the oracle and the defaults are the base runs);
    # fig5: 3 policies × (120 + 60 + 30 + 30 + 60) base − the 2×10 base runs at T = 5000,
    # and 3 × (30 + 10 + 10 + 10 + 20) at K = 9; fig4: 3×8×10; tuning 7×5×30 and the
    # stall check 5×200; Figure 7's cells 1880 (as in tests/test_config_experiments.py); the powered
    # reading's first look (later looks and the tuning's stage 2 wait for their checkpoints):
    # stall_rate_defaults 5×400 on seeds 60000–60399, and 20 seeds of every other unit not among
    # those (Random on the base instance, 2×2 at ϵ ≠ 0.1, 2×3 at K ≠ 5, 2×3 at d ≠ 5, 3×7 real-data)
    assert stats.get("fig5") == 1 and stats.get("regret_rates") == 1
    powered_first_look = 5 * 400 + 20 * (1 + 4 + 6 + 6 + 21)
    assert "checkpoint powered_look: forced" in forced_dry_run.stdout
    assert "checkpoint tuning_contenders: forced" in forced_dry_run.stdout
    # and the confirmatory study's one look: CQB-Opt at d = 5, 10, 20 on its registered seeds
    confirmatory = sum((len(entry["sweep_values"])) * entry["seeds"] for entry in config["confirmatory"]["claims"])
    # Figure 5's registered second stage: 4519 CQB-η-2 runs (base) and 289 CQB-ε runs (K = 9)
    # Figure 9: 570 runs (as in tests/test_config_experiments.py); its claims' first powered look,
    # 20 seeds of each unit not shared: CQB-Opt at 3 T on each adversary, CQB-ε under the
    # subspace adversary at T = 8000, CQB-Opt on the i.i.d. control at T = 8000
    adversarial = 570 + 20 * (3 + 3 + 1 + 1)
    assert n_simulate == (240 + 80 + (3 * 486 - 20) + 3 * 80 + 240 + 7 * 5 * 30 + 5 * 200 + 1880
                          + powered_first_look + confirmatory + 4519 + 289 + adversarial)


def simulate_logs(workdir: Path) -> list[Path]:
    return sorted((workdir / RESULTS / "logs" / "simulate").rglob("*.log"))


def run_file_of(workdir: Path, log: Path) -> Path:
    return run_file_of_log(workdir / RESULTS, log)


def a_run_in_flight(workdir: Path) -> bool:
    """A simulate job has started its run (its log's first line) and written no run file."""
    for log in simulate_logs(workdir):
        try:
            started = log.read_text().startswith("cqb ")
        except FileNotFoundError:
            continue
        if started and not run_file_of(workdir, log).exists():
            return True
    return False


def outputs(workdir: Path) -> dict[str, bytes]:
    """The run files and the tables (the figures' images carry dates)."""
    results = workdir / RESULTS
    files = [*(results / "runs").rglob("*.npz"), *(results / "aggregate").glob("*.tsv"),
             *(results / "figures").glob("*.tsv")]
    return {str(path.relative_to(results)): path.read_bytes() for path in files}


@pytest.mark.slow
def test_a_ctrl_c_stops_the_jobs_in_one_line_and_the_same_command_continues(tmp_path):
    workdir = copy_workflow(tmp_path / "interrupted")
    args = ["fig2", "--cores", "2", *LONG_RUNS]
    process = subprocess.Popen([sys.executable, "-c", AS_FROM_A_TERMINAL, *args], cwd=workdir,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not (len(list((workdir / RESULTS / "runs").rglob("*.npz"))) >= 2 and a_run_in_flight(workdir)):
            assert process.poll() is None, "the run ended before it could be interrupted"
            assert time.monotonic() < deadline, "no run in flight after five minutes"
            time.sleep(0.02)
        os.killpg(process.pid, signal.SIGINT)  # as a terminal's Ctrl-C: Snakemake and its jobs
        output, _ = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode != 0, output[-3000:]
    lines = [line for line in output.splitlines() if line.strip()]
    stopped = INTERRUPTED.fullmatch(lines[-1])
    assert stopped and int(stopped.group(1)) >= 1, output[-3000:]
    for shown in ("Failed", "Error in rule", "WorkflowError", "did not complete", "Traceback", "Interrupted:"):
        assert shown not in "\n".join(lines[:-1]), output[-3000:]

    # the runs stopped mid-way: "interrupted" in their logs, no run file, no temporary, no record
    interrupted = [log for log in simulate_logs(workdir)
                   if log.read_text().rstrip().endswith("cqb: the run was interrupted: its job was stopped")]
    assert 1 <= len(interrupted) <= int(stopped.group(1))
    assert not any("killed by signal" in log.read_text() for log in simulate_logs(workdir))
    assert not any(run_file_of(workdir, log).exists() for log in interrupted)
    assert not [path for path in (workdir / "results").rglob(".*") if path.is_file()]
    assert not list((workdir / ".snakemake").glob("incomplete/*"))

    snakemake(workdir, *args)  # the same command continues
    uninterrupted = copy_workflow(tmp_path / "uninterrupted")
    snakemake(uninterrupted, *args)
    assert outputs(workdir).keys() == outputs(uninterrupted).keys() and len(outputs(workdir)) > 20
    differing = [name for name, content in outputs(workdir).items() if outputs(uninterrupted)[name] != content]
    assert not differing, differing
