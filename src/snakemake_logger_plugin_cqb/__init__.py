"""The workflow's progress display, `--logger cqb` (profiles/default): the
rich logger plugin (snakemake-logger-plugin-rich) with done/total jobs and an
estimate of the time left beside its bars. The rest is the rich plugin's:
live bars in a terminal (redrawn in place, gone at the end), each failure as
it happens with its log file's content, the job stats at the start and a
summary at the end; piped to a file, only those lines. A dry-run prints
Snakemake's own text. The full commands stay in Snakemake's log
(.snakemake/log/). docs/pipeline.md shows what the screen looks like."""

from __future__ import annotations

import logging

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
    """A dry-run (`snakemake -n`: what would run, and why) keeps Snakemake's
    own text, every job with its reason: this handler then writes nothing and
    Snakemake adds its default one."""

    def __post_init__(self) -> None:
        if self.common_settings.dryrun:
            return
        super().__post_init__()
        self.progress.columns = progress_columns()
        self.progress.expand = False
        self.live_display.refresh_per_second = REFRESHES_PER_SECOND
        self.live_display.update(self.progress)  # the bars without the panel's frame

    def emit(self, record) -> None:
        if self.common_settings.dryrun:
            return
        super().emit(record)
        for task in self.progress.tasks:  # a rule whose jobs are all done leaves the display
            if task.visible and task.finished and task.description != TOTAL:
                self.progress.update(task.id, visible=False)

    def close(self) -> None:
        if self.common_settings.dryrun:
            logging.Handler.close(self)
        else:
            super().close()

    @property
    def writes_to_stream(self) -> bool:
        return not self.common_settings.dryrun
