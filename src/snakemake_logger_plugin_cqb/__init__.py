"""The workflow's terminal output, `--logger cqb` (profiles/default).

A run: the rich logger plugin (snakemake-logger-plugin-rich) with done/total
jobs and an estimate of the time left beside its bars. The rest is the rich
plugin's: live bars in a terminal (redrawn in place, gone at the end), each
failure as it happens with its log file's content, the job stats at the start
and a summary at the end; piped to a file, only those lines. Every job's
command goes to Snakemake's log (.snakemake/log/), not to the screen.

A Ctrl-C: the jobs it stops are no failures. The display then shows nothing
more of the run (no failed job, no closing error) and ends with one line: how
many jobs were stopped, whether their partial outputs were removed (the
workflow's `onerror` does that, workflow/rules/execution.smk, and says so in
a record carrying STOPPED_JOBS), and that the same command continues. A
terminal's Ctrl-C reaches the jobs too, and a stopped job's failure can be
logged (from an executor thread) before Snakemake's main thread runs the
SIGINT handler: a failure is shown only after FAILURE_HOLD seconds without
a SIGINT.

A dry run (`-n`): Snakemake's job stats, then per rule how many jobs would
run and why ("14,387 simulate: missing output"), not every job; with `-p` (or
`--verbose`), Snakemake's own listing of every job with its reason and
command. docs/pipeline.md shows the screens.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from collections import Counter

try:
    from snakemake_logger_plugin_rich import LogHandler as RichLogHandler
except ImportError as error:  # Snakemake imports every logger plugin: fail only where this one is asked for
    from snakemake_interface_logger_plugins.base import LogHandlerBase

    MISSING = f"--logger cqb needs snakemake-logger-plugin-rich ({error}); pip install -r requirements.txt"

    class RichLogHandler(LogHandlerBase):
        writes_to_file = has_filter = has_formatter = needs_rulegraph = False

        def __post_init__(self) -> None:
            raise SystemExit(MISSING)

# How often the bars are redrawn in a terminal (the rich plugin's: 8 per
# second). Each redraw rewrites every bar: with one every 2 s, narrow bars,
# no frame and only the total and the rules with jobs left, a 17-minute run
# sends well under 1 MB to the terminal.
REFRESHES_PER_SECOND = 0.5
BAR_WIDTH = 30
TOTAL = "Total Progress"  # the rich plugin's name of the bar of all jobs
# The attribute of the record in which the workflow's onerror reports the
# jobs it found stopped, their outputs removed (workflow/rules/execution.smk).
STOPPED_JOBS = "cqb_stopped_jobs"
# What the handler does: a run's progress display, a dry run's summary, or
# nothing (a dry run with -p or --verbose: Snakemake's own listing).
PROGRESS, SUMMARY, LISTING = "progress", "summary", "listing"
# The reasons Snakemake gives for a job (snakemake.jobs.Reason.__str__, each
# part up to its file list), in a few words.
REASON_WORDS = (
    ("Forced execution", "forced"),
    ("Missing output files", "missing output"),
    ("Incomplete output files", "incomplete output"),
    ("Updated input files", "updated input"),
    ("Input files updated by another job", "input updated by another job"),
    ("Set of input files has changed", "set of input files changed"),
    ("Code has changed", "code changed"),
    ("Params have changed", "params changed"),
    ("Software environment definition has changed", "software environment changed"),
    ("Rules with neither input nor output files", "no input or output: always runs"),
    ("Rules with a run or shell declaration but no output", "no output: always runs"),
    ("Output file is a pipe", "pipe to fill"),
    ("Job provides a service", "service to keep"),
)
REASONS_HEADING = "Reasons (jobs per rule; every job with its reason and command: add -p):"
# What Snakemake says after listing a job of a checkpoint or handover rule:
# the summary marks the rule instead.
PER_JOB_NOTES = ("DAG of jobs will be updated after completion.", "Handing over execution to foreign system...")
# How long a job's failure waits for a SIGINT before it is shown. A Ctrl-C
# stops the jobs as it reaches Snakemake (one process group); a stopped job's
# failure is logged by the executor's thread, while the main thread, waiting
# in the scheduler, runs the Python SIGINT handler only once that failure wakes
# it: milliseconds later. The wait counts from the failure's logging, so
# failures logged together wait once.
FAILURE_HOLD = 0.5


def reason_words(reason: str) -> tuple[str, ...]:
    """A job's reason text in short words, one per part ("missing output",
    "updated input"); a part not listed in REASON_WORDS by its text up to the
    first colon."""
    text = reason.strip()
    if text.startswith("Finished (was: ") and text.endswith(")"):
        text = text[len("Finished (was: "):-1]
    words: list[str] = []
    for part in filter(None, (part.strip() for part in text.split("; "))):
        short = next((short for prefix, short in REASON_WORDS if part.startswith(prefix)), None)
        short = short or part.split(":", 1)[0].strip().rstrip(".").lower()
        if short not in words:
            words.append(short)
    return tuple(words) or ("no reason given",)


class DryRunSummary:
    """A dry run's jobs counted per rule and reason."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, tuple[str, ...]]] = Counter()
        self.checkpoints: set[str] = set()

    def add(self, rule: str, reason: str, checkpoint: bool = False) -> None:
        self.counts[(rule, reason_words(reason))] += 1
        if checkpoint:
            self.checkpoints.add(rule)

    def lines(self, rule_order=()) -> list[str]:
        """One line per rule and set of reasons, "<jobs> <rule>: <reasons>"
        (a checkpoint's rule named "checkpoint <rule>", as Snakemake does): rules
        in ``rule_order`` (the job stats'), then as first seen; a rule's most
        frequent reasons first."""
        first_seen = list(dict.fromkeys(rule for rule, _ in self.counts))
        rank = {rule: place for place, rule in enumerate(dict.fromkeys([*rule_order, *first_seen]))}
        groups = sorted(self.counts.items(), key=lambda item: (rank[item[0][0]], -item[1]))
        width = max((len(f"{count:,}") for count in self.counts.values()), default=1)
        return [f"{count:>{width},} {'checkpoint ' * (rule in self.checkpoints)}{rule}: {', '.join(words)}"
                for (rule, words), count in groups]


def stopped_line(jobs: int, outputs_removed: bool) -> str:
    """The line an interrupted run ends with."""
    if jobs == 0:
        return "Interrupted: no job was running. Rerun the same command to continue."
    stopped = f"{jobs} job{'s' if jobs != 1 else ''} stopped"
    if outputs_removed:
        stopped += f", {'its' if jobs == 1 else 'their'} partial outputs removed"
    return f"Interrupted: {stopped}. Rerun the same command to continue."


def progress_columns():
    """Spinner, rule, bar, done/total, percentage, time elapsed, time left."""
    from rich.progress import (BarColumn, MofNCompleteColumn, SpinnerColumn, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)

    return (
        SpinnerColumn(spinner_name="dots", style="default", finished_text="[dim green]✓"),
        TextColumn("[bold blue]{task.description}"),
        BarColumn(bar_width=BAR_WIDTH, complete_style="green", finished_style="dim green"),
        MofNCompleteColumn(),
        TextColumn("[progress.percentage]{task.percentage:>3.0f}%"),
        TimeElapsedColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),
    )


class LogHandler(RichLogHandler):  # type: ignore[valid-type,misc]
    """The progress display of a run, the summary of a dry run; nothing (so
    that Snakemake adds its default handler) for a dry run with -p or -v."""

    def __post_init__(self) -> None:
        settings = self.common_settings
        if settings.dryrun:
            self.mode = LISTING if settings.printshellcmds or settings.verbose else SUMMARY
            self.summary, self.rule_order, self.reasons_shown = DryRunSummary(), None, False
            self.stream = sys.stdout if settings.stdout else sys.stderr
            return
        self.mode = PROGRESS
        # every job's command in Snakemake's log file, whose handler is made
        # after this one with the same settings (not on the screen: the rich
        # plugin shows commands only with --verbose)
        settings.printshellcmds = True
        super().__post_init__()
        self.progress.columns = progress_columns()
        self.progress.expand = False
        self.live_display.refresh_per_second = REFRESHES_PER_SECOND
        self.live_display.update(self.progress)  # the bars without the panel's frame
        self.said_interrupted = False
        self.interrupt_seen = threading.Event()  # a SIGINT came; a held failure waits on it
        self.running: set = set()  # started jobs not yet reported ended
        self.stopped_jobs: int | None = None  # from the workflow's onerror
        self.previous_sigint = self._watch_interrupts()

    def _watch_interrupts(self):
        """Note a Ctrl-C (SIGINT) as it arrives, before the failures of the
        jobs it stops are logged, then hand it to the handler before (which
        raises KeyboardInterrupt for Snakemake). The handler before, or None."""
        previous = signal.getsignal(signal.SIGINT)
        if not callable(previous):  # ignored (a background job) or not Python's: leave it
            return None

        def note_interrupt(number, frame):
            self.interrupt_seen.set()
            previous(number, frame)

        try:
            signal.signal(signal.SIGINT, note_interrupt)
        except ValueError:  # not the main thread
            return None
        self.note_interrupt = note_interrupt
        return previous

    def emit(self, record) -> None:
        if self.mode == SUMMARY:
            self._summarise(record)
            return
        if self.mode == LISTING:
            return
        if not self.interrupted and str(getattr(record, "event", "")) == "job_error":
            self._hold_failure(record)
        if self.interrupted:  # the stopped jobs' "failures" and the closing error: close() says it all
            if getattr(record, STOPPED_JOBS, None) is not None:
                self.stopped_jobs = int(getattr(record, STOPPED_JOBS))
            return
        self._track(record)
        super().emit(record)
        for task in self.progress.tasks:  # a rule whose jobs are all done leaves the display
            if task.visible and task.finished and task.description != TOTAL:
                self.progress.update(task.id, visible=False)

    @property
    def interrupted(self) -> bool:
        return self.interrupt_seen.is_set()

    def _hold_failure(self, record) -> None:
        """Wait, until FAILURE_HOLD after the failure was logged, for a SIGINT
        that stopped its job; never in the main thread, which must run the
        SIGINT handler (Snakemake's queue listener calls emit in its own)."""
        if threading.current_thread() is threading.main_thread():
            return
        left = getattr(record, "created", time.time()) + FAILURE_HOLD - time.time()
        if left > 0:
            self.interrupt_seen.wait(left)

    def _track(self, record) -> None:
        event = str(getattr(record, "event", ""))
        if event == "job_info":
            self.running.add(getattr(record, "jobid", None))
        elif event == "job_finished":
            self.running.discard(getattr(record, "job_id", None))
        elif event == "job_error":
            self.running.discard(getattr(record, "jobid", None))

    def _summarise(self, record) -> None:
        """A dry run: jobs counted, not listed; the rest as Snakemake's own
        handler writes it."""
        event = str(getattr(record, "event", ""))
        if event == "job_info":
            self.summary.add(str(getattr(record, "rule_name", "?")), str(getattr(record, "reason", "") or ""),
                             bool(getattr(record, "is_checkpoint", False)))
            return
        if event == "shellcmd":
            return
        if event == "run_info":  # the job stats: before the jobs, and again after them
            if self.rule_order is None:
                self.rule_order = [rule for rule in getattr(record, "stats", {}) if rule != "total"]
                self._write(self.format(record))
            else:
                self._write_reasons()
            return
        message = record.getMessage() if not event else ""
        if message.startswith("Reasons:"):  # Snakemake's, rules per reason
            self._write_reasons()
            return
        if message in PER_JOB_NOTES:
            return
        self._write(self.format(record))

    def _write_reasons(self) -> None:
        if self.reasons_shown or not self.summary.counts:
            return
        self.reasons_shown = True
        lines = self.summary.lines(self.rule_order or ())
        self._write("\n".join([REASONS_HEADING, *("    " + line for line in lines)]))

    def _write(self, text: str) -> None:
        if not text or text == "None":
            return
        try:
            self.stream.write(text + "\n")
            self.stream.flush()
        except (BrokenPipeError, ValueError):  # a closed pipe (`| head`): nothing more to say
            pass

    def close(self) -> None:
        if self.mode != PROGRESS:
            if self.mode == SUMMARY:
                self._write_reasons()
            logging.Handler.close(self)
            return
        super().close()  # the bars gone
        if self.previous_sigint is not None and signal.getsignal(signal.SIGINT) is self.note_interrupt:
            try:
                signal.signal(signal.SIGINT, self.previous_sigint)
            except ValueError:
                pass
        if self.interrupted and not self.said_interrupted:  # Snakemake closes its handlers twice
            self.said_interrupted = True
            removed = self.stopped_jobs is not None
            line = stopped_line(self.stopped_jobs if removed else len(self.running), removed)
            self.console.print(line, highlight=False, markup=False, soft_wrap=True)

    @property
    def writes_to_stream(self) -> bool:
        return self.mode != LISTING

    @property
    def has_filter(self) -> bool:  # a summary: Snakemake's own filter and formatter
        return self.mode != SUMMARY

    @property
    def has_formatter(self) -> bool:
        return self.mode != SUMMARY
