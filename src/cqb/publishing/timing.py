"""``cqb time``: a command run as a child process, its wall and CPU time and the
machine's load sampled while it runs, appended to the timings table; and the
Markdown the README and docs/benchmarks.md show of that table."""

from __future__ import annotations

import datetime
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from ..analysis.formatting import format_number
from ..io.files import atomic_write_text

TIMING_COLUMNS = ("date", "label", "command", "wall_seconds", "load_before", "load_mean", "load_max",
                  "cores", "returncode", "cpu_seconds", "snakemake_cpu_seconds")
LOAD_SAMPLE_SECONDS = 10


# Runs `snakemake` in this interpreter and, at exit, writes the CPU seconds of
# that process alone (scheduling, DAG, metadata, bookkeeping) and of the
# children it reaped (the jobs) to the file named by its first argument.
SNAKEMAKE_LAUNCHER = """\
import atexit, json, resource, sys
usage_file = sys.argv.pop(1)

def record():
    own = resource.getrusage(resource.RUSAGE_SELF)
    jobs = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(usage_file, "w") as out:
        json.dump({"snakemake_cpu": own.ru_utime + own.ru_stime,
                   "jobs_cpu": jobs.ru_utime + jobs.ru_stime}, out)

atexit.register(record)
from snakemake.cli import main
sys.argv[0] = "snakemake"
main()
"""


def children_cpu() -> float:
    """CPU seconds (user + system) of this process's finished, waited-for children."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_command(command: list[str], label: str, table: Path) -> dict:
    """Run ``command``, then append its wall time and the 1-minute load
    average (before, and the mean and maximum of samples every 10 s while it
    ran) to ``table`` (a TSV): a timing is only meaningful with the load it
    was measured under, which includes the command's own jobs."""
    if not command:
        raise ValueError("no command to time (cqb time --label TEXT -- COMMAND ...)")
    usage_file = None
    if Path(command[0]).name == "snakemake":  # its own CPU apart from its jobs'
        handle, usage_file = tempfile.mkstemp(suffix=".json")
        os.close(handle)
        launched = [sys.executable, "-c", SNAKEMAKE_LAUNCHER, usage_file, *command[1:]]
    else:
        launched = command
    load_before = round(os.getloadavg()[0], 2)
    cpu_before = children_cpu()
    started = time.perf_counter()
    process = subprocess.Popen(launched)
    samples = []
    while True:
        try:
            returncode = process.wait(timeout=LOAD_SAMPLE_SECONDS)
            break
        except subprocess.TimeoutExpired:
            samples.append(os.getloadavg()[0])
    samples = samples or [os.getloadavg()[0]]
    wall = time.perf_counter() - started
    snakemake_cpu = ""
    if usage_file:
        try:
            snakemake_cpu = round(json.loads(Path(usage_file).read_text())["snakemake_cpu"], 1)
        except (OSError, ValueError, KeyError):
            pass  # snakemake died before its exit handler
        os.unlink(usage_file)
    row = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "label": label, "command": " ".join(command),
           "wall_seconds": round(wall, 1), "load_before": load_before,
           "load_mean": round(sum(samples) / len(samples), 2), "load_max": round(max(samples), 2),
           "cores": os.cpu_count(), "returncode": returncode,
           "cpu_seconds": round(children_cpu() - cpu_before, 1), "snakemake_cpu_seconds": snakemake_cpu}
    _append_timing(table, row)
    return row


def _append_timing(table: Path, row: dict) -> None:
    """Append ``row``; a table with fewer columns (an older header) gets the
    new header, its rows padded with empty cells."""
    table.parent.mkdir(parents=True, exist_ok=True)
    lines = table.read_text().splitlines() if table.exists() else []
    header = "\t".join(TIMING_COLUMNS)
    if lines and lines[0] != header:
        old_columns = lines[0].split("\t")
        padding = "\t" * (len(TIMING_COLUMNS) - len(old_columns))
        if tuple(old_columns) != TIMING_COLUMNS[:len(old_columns)]:
            raise ValueError(f"{table}: unknown timing columns {old_columns}")
        lines = [header] + [line + padding for line in lines[1:]]
    elif not lines:
        lines = [header]
    lines.append("\t".join(str(row[c]).replace("\t", " ") for c in TIMING_COLUMNS))
    atomic_write_text(table, "\n".join(lines) + "\n")


TIMINGS_SHOWN = 4  # the docs page shows the latest runs; every run is in timings.tsv


def timings_markdown(table: Path, last: int = TIMINGS_SHOWN) -> str:
    all_rows = pd.read_csv(table, sep="\t")
    rows = all_rows.tail(last)
    lines = ["| what | wall time | CPU: all processes; Snakemake's own | load (1 min): before; mean, max "
             "while running | cores | date |",
             "| --- | ---: | ---: | --- | ---: | --- |"]
    for row in rows.itertuples():
        minutes, seconds = divmod(int(round(row.wall_seconds)), 60)
        failed = "" if row.returncode == 0 else f" (exit {row.returncode})"
        cpu = getattr(row, "cpu_seconds", math.nan)
        own = getattr(row, "snakemake_cpu_seconds", math.nan)
        cpu = "" if pd.isna(cpu) else f"{cpu:.0f} s; " + ("–" if pd.isna(own) else f"{own:.0f} s")
        lines.append(f"| `{row.command}`: {row.label}{failed} | {minutes} min {seconds:02d} s | {cpu} | "
                     f"{row.load_before}; {format_number(row.load_mean)}, {format_number(row.load_max)} | {row.cores} | {row.date} |")
    if len(all_rows) > len(rows):
        lines.append("")
        lines.append(f"The latest {len(rows)} of {len(all_rows)} runs; all of them are in docs/results/timings.tsv.")
    return "\n".join(lines)


def last_run_markdown(table: Path) -> str:
    """One line on the last timed run of the whole replication (the last
    `cqb time` row whose label starts with "the whole replication"; a row of
    another target may name the replication it ran on top of, and a run of an
    older tree for a side-by-side is labelled "a baseline, ...", so that the
    table stays in date order and the README reports this code's run)."""
    rows = pd.read_csv(table, sep="\t")
    whole = rows[rows["label"].str.startswith("the whole replication")]
    if whole.empty:
        return "No timed run of the whole replication yet (`cqb time`, docs/pipeline.md)."
    row = whole.iloc[-1]
    minutes, seconds = divmod(int(round(row["wall_seconds"])), 60)
    cpu = "" if pd.isna(row.get("cpu_seconds")) else f", {row['cpu_seconds']:.0f} s of CPU in all"
    return (f"The last timed run of the whole replication took **{minutes} min {seconds:02d} s** on "
            f"{row['cores']} cores{cpu} ({row['date']}; load {row['load_before']} before, "
            f"{row['load_mean']} mean; `{row['command']}`; exit {row['returncode']}): {row['label']}.")
