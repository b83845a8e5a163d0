"""Generated results: the text the README shows, with where it came from.

The pipeline's ``claims`` rule writes the claims table and a results summary
(per experiment and policy: final Q(T), the median, the stalled runs) with a
provenance record: the simulation code hash, a hash of the config and the
checksums of the processed pool files the runs played on. The
``cqb publish`` command copies them into ``docs/results/`` and splices them
into the README between markers, so no number in the README is typed by hand;
a test fails when the committed code hash is not the current code's.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from .. import __version__
from ..analysis.formatting import format_number
from ..io.files import atomic_write_text, file_digest
from .published_figures import publish_report

BEGIN = "<!-- generated:{name} begin (cqb publish; do not edit) -->"
END = "<!-- generated:{name} end -->"


# The config's group of switches for how jobs run (the run server, the
# scheduler patch), not what they compute: not part of the config hash.
EXECUTION_KEY = "execution"


def config_hash(config: dict) -> str:
    science = {key: value for key, value in config.items() if key != EXECUTION_KEY}
    text = json.dumps(science, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def provenance(config: dict, code_hash: str, run_code_hashes: set[str], version: str) -> dict:
    """Where generated results came from. ``run_code_hashes`` are the code
    hashes recorded in the run files read: more than one means the results
    mix runs of different code, which is refused."""
    if len(run_code_hashes) > 1:
        raise ValueError(f"the run files come from different simulation code {sorted(run_code_hashes)}: "
                         "rerun the simulations (snakemake reruns them when the code hash changed)")
    run_hash = next(iter(run_code_hashes), code_hash)
    if run_hash != code_hash:
        raise ValueError(f"the run files were made by simulation code {run_hash}, the installed code is "
                         f"{code_hash}: rerun the simulations first")
    return {"code_hash": code_hash, "config_hash": config_hash(config), "cqb_version": version}


def pool_checksums(paths) -> dict[str, str]:
    """path -> SHA-256 (16 hex digits) of each processed pool file a result
    played on: the runs depend on its θ* and rows to the last bit."""
    return {path: file_digest(path)[:16] for path in sorted(map(str, paths))}


def results_summary(curves: dict[str, pd.DataFrame], display_names: dict, descriptions: dict) -> str:
    """Markdown: per experiment, one row per curve with its final regret,
    median, tail regret, stalled runs and runs with an uncertified projection
    (from :func:`cqb.analysis.summaries.curve_summaries`)."""
    lines = []
    for experiment, table in curves.items():
        lines += [f"**{experiment}** — {descriptions.get(experiment, '')}", "",
                  "| policy | sweep | Q(T) − Q*(T) mean | median | tail regret mean | median | stalled [95% interval] "
                  "| stalled seeds | projection not converged: runs, seeds |",
                  "| --- | --- | ---: | ---: | ---: | ---: | --- | --- | --- |"]
        for row in table.itertuples():
            sweep = f"{row.sweep_param} = {row.sweep_value}" if row.sweep_param else ""
            lines.append(
                f"| {display_names.get(row.policy.split('.', 1)[0], row.policy)} | {sweep} | "
                f"{format_number(row.final_regret_mean)} | {format_number(row.final_regret_median)} | "
                f"{format_number(row.tail_regret_mean)} | {format_number(row.tail_regret_median)} | "
                f"{row.n_stalled}/{row.n_runs} [{row.stall_ci_low:.2f}, {row.stall_ci_high:.2f}] | "
                f"{row.stalled_seeds} | {_unconverged(row)} |")
        lines.append("")
    return "\n".join(lines)


def _unconverged(row) -> str:
    """Runs of a curve with a projection that ended uncertified, and their seeds."""
    count = getattr(row, "n_unconverged_runs", 0)
    return f"{count}/{row.n_runs}" + (f": {row.unconverged_seeds}" if count else "")


def markdown_table(table: pd.DataFrame) -> str:
    """A plain Markdown table (numbers to 3 significant digits)."""
    def cell(value):
        return format_number(value) if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(map(str, table.columns)) + " |",
             "| " + " | ".join("---" for _ in table.columns) + " |"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in table.itertuples(index=False)]
    return "\n".join(lines)


def provenance_line(record: dict) -> str:
    registry = (f", claims registry `{record['claims_registry_hash']}`" if record.get("claims_registry_hash")
                else "")
    return (f"Generated by the pipeline from simulation code `{record['code_hash']}` and config "
            f"`{record['config_hash']}`{registry} (cqb {record['cqb_version']}).")


def splice(text: str, name: str, block: str) -> str:
    """Replace the generated block ``name`` of ``text`` (between its markers)."""
    begin, end = BEGIN.format(name=name), END.format(name=name)
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), flags=re.DOTALL)
    if not pattern.search(text):
        raise ValueError(f"no generated block {name!r} (markers {begin!r} … {end!r})")
    return pattern.sub(lambda _: f"{begin}\n{block.rstrip()}\n{end}", text, count=1)


def generated_block(text: str, name: str) -> str:
    begin, end = BEGIN.format(name=name), END.format(name=name)
    start = text.index(begin) + len(begin)
    return text[start:text.index(end, start)].strip("\n")


# generated summaries beside the claims: file in the figures folder → README block

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


# Generated blocks outside the README: (the file in the figures folder, its
# block) → the docs page (relative to the repository) that holds the block.
DOCS_BLOCKS = {("fig5_summary.md", "rates"): "docs/figures.md",
               ("fig7.md", "fig7"): "docs/figures.md",
               ("fig8.md", "fig8"): "docs/figures.md"}


# Pages that show a summary's prose only, its tables linked (the page's size)
PROSE_ONLY = {"fig7.md": "results/fig7.md", "fig8.md": "results/fig8.md"}
# Figure 8 is its own target, run after (and less often than) the replication:
# its files keep the provenance of the run that made them, published beside
# them, and a publish without them leaves the published ones in place.
OWN_RUN = {"fig8.md": "fig8_provenance.json"}  # the summary → its run's record


def summary_record(name: str, results: Path) -> dict:
    """The provenance the published summary ``name`` was made with: its own
    run's (OWN_RUN) where it has one, else the replication's."""
    own = OWN_RUN.get(name)
    path = results / (own if own and (results / own).exists() else "provenance.json")
    return json.loads(path.read_text())


def block_text(name: str, summary: str) -> str:
    """What a docs page's generated block shows of the summary ``name``: all
    of it, or (PROSE_ONLY) the lines before its first table and a link to it."""
    if name not in PROSE_ONLY:
        return summary
    prose = []
    for line in summary.splitlines():
        if line.startswith("|"):
            break
        prose.append(line)
    return "\n".join(prose).rstrip("\n") + f"\n\nEvery cell's numbers: [{PROSE_ONLY[name]}]({PROSE_ONLY[name]}).\n"


def publish(source: Path, destination: Path, readme: Path) -> list[str]:
    """Copy the generated result files from ``source`` (the pipeline's
    output folder) into ``destination`` (docs/results/), splice the README's
    blocks (``summary``: the paper's claims in both readings; ``lastrun``:
    the last timed full run) and the docs pages' blocks (the full claims table
    is docs/results/claims.md; Figures 5 and 7 in their pages; the timings in
    docs/benchmarks.md), and publish the report with its figures."""
    names = ("claims.md", "claims.tsv", "results.md", "provenance.json")
    missing = [n for n in names if not (source / n).exists()]
    if missing:
        raise FileNotFoundError(f"{source} lacks {missing}: run `snakemake --cores 2 claims` first")
    destination.mkdir(parents=True, exist_ok=True)
    for name in names:
        (destination / name).write_bytes((source / name).read_bytes())
    written = [str(destination / n) for n in names]
    for name in ("fig5_summary.md", "fig5_slopes.tsv", "fig7.md", "fig7.tsv", "claims_powered.tsv",
                 "claims_per_policy.tsv", "claims_confirmatory.tsv", "claims_comparisons.tsv",
                 "claims_readings.tsv", "claims_readings.md", "calibration.tsv", "calibration.png",
                 "tuning.tsv", "tuning_stage2.tsv", "fig8.md", "fig8.tsv", "fig8_marks.tsv", "fig8.png",
                 "claims_design.tsv", "claims_replication.tsv"):
        if (source / name).exists():
            (destination / name).write_bytes((source / name).read_bytes())
            written.append(str(destination / name))
    for summary, record_name in OWN_RUN.items():
        if (source / summary).exists():  # this run made them: their provenance is this run's
            (destination / record_name).write_bytes((source / "provenance.json").read_bytes())
            written.append(str(destination / record_name))
    record = json.loads((source / "provenance.json").read_text())
    text = splice(readme.read_text(), "summary",
                  provenance_line(record) + "\n\n" + readme_summary(source, marks_folder=destination))
    timings = destination / "timings.tsv"
    if timings.exists():
        if BEGIN.format(name="lastrun") in text:
            text = splice(text, "lastrun", last_run_markdown(timings))
        written += _splice_page(readme.parent / "docs" / "benchmarks.md", "timings", timings_markdown(timings))
    readme.write_text(text)
    for (name, block), page in DOCS_BLOCKS.items():
        if (source / name).exists():
            written += _splice_page(readme.parent / page, block,
                                    provenance_line(summary_record(name, destination)) + "\n\n"
                                    + block_text(name, (source / name).read_text()))
    if (source / "report.html").exists():
        written += publish_report(source, destination)
    written += publish_candidates(source, destination)
    written += sync_citation_version(readme.parent / "CITATION.cff", __version__)
    return written


def sync_citation_version(citation: Path, version: str) -> list[str]:
    """CITATION.cff's `version` set to the package's; [its path] if it changed."""
    if not citation.exists():
        return []
    text = citation.read_text()
    updated = re.sub(r'(?m)^version: .*$', f'version: "{version}"', text, count=1)
    if updated == text:
        return []
    atomic_write_text(citation, updated)
    return [str(citation)]


def readme_summary(folder: Path, marks_folder: Path | None = None) -> str:
    """The README's claims summary from the tables in ``folder`` (the
    figures folder, or docs/results/ once published): the claims, their
    powered reading, the per-policy readings and the confirmatory study,
    Figure 8's marks, the calibration's power, the claims' design (for the
    size against δ) and the replication study's results where the folder has
    them. Figure 8's marks and the replication come from ``marks_folder``
    where ``folder`` has none (their own targets, published from other runs)."""
    from ..analysis.claim_lines import read_design, read_replication
    from .report import claims_summary_markdown, read_claims, read_multiverse_marks

    def found(name):
        path = folder / name
        if not path.exists() and marks_folder is not None and name in OWN_TARGETS:
            path = marks_folder / name
        return path if path.exists() else None

    tables = {name: found(name) for name in ("claims_powered.tsv", "claims_per_policy.tsv", "fig8_marks.tsv",
                                             "calibration.tsv", "claims_design.tsv", "claims_replication.tsv",
                                             "claims_confirmatory.tsv")}

    def claims_table(name):
        return read_claims(tables[name]) if tables[name] else None

    return claims_summary_markdown(
        read_claims(folder / "claims.tsv"), claims_table("claims_powered.tsv"), claims_table("claims_per_policy.tsv"),
        read_multiverse_marks(tables["fig8_marks.tsv"]) if tables["fig8_marks.tsv"] else None,
        pd.read_csv(tables["calibration.tsv"], sep="\t") if tables["calibration.tsv"] else None,
        design=read_design(tables["claims_design.tsv"]) if tables["claims_design.tsv"] else None,
        replication=read_replication(tables["claims_replication.tsv"]),
        confirmatory=claims_table("claims_confirmatory.tsv"))


# Tables made by targets of their own, published from their own runs: a
# publish without them reads the published ones
OWN_TARGETS = ("fig8_marks.tsv", "claims_replication.tsv")


def _splice_page(page: Path, block: str, text: str) -> list[str]:
    if not page.exists() or BEGIN.format(name=block) not in page.read_text():
        return []
    atomic_write_text(page, splice(page.read_text(), block, text))
    return [str(page)]


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


def publish_candidates(source: Path, destination: Path) -> list[str]:
    """Copy the benchmark's files (when the pipeline made them) into
    ``destination`` (docs/extending.md links to its candidates.md)."""
    from .candidates import PUBLISHED

    if not (source / "candidates.md").exists():
        return []
    destination.mkdir(parents=True, exist_ok=True)
    written = []
    for name in PUBLISHED:
        if (source / name).exists():
            (destination / name).write_bytes((source / name).read_bytes())
            written.append(str(destination / name))
    return written
