"""``cqb publish``: the pipeline's generated results copied into ``docs/results/``
and spliced into the README and the docs pages between markers, so no number
there is typed by hand. The claims summary the README shows is built here from
the claims tables; each block opens with where it came from
(:mod:`cqb.publishing.provenance`), and a test fails when the committed code
hash is not the current code's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from .. import __version__
from .citation import sync_citation_version
from .provenance import provenance_line
from .published_figures import publish_report
from .splicing import BEGIN, splice, splice_page
from .timing import last_run_markdown, timings_markdown


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
    for name in ("fig5_summary.md", "fig5_slopes.tsv", "fig9_rates_summary.md", "fig9_rates_slopes.tsv", "fig7.md",
                 "fig7.tsv", "claims_powered.tsv", "claims_per_policy.tsv", "claims_confirmatory.tsv", "claims_comparisons.tsv",
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
        written += splice_page(readme.parent / "docs" / "benchmarks.md", "timings", timings_markdown(timings))
    readme.write_text(text)
    for (name, block), page in DOCS_BLOCKS.items():
        if (source / name).exists():
            written += splice_page(readme.parent / page, block,
                                    provenance_line(summary_record(name, destination)) + "\n\n"
                                    + block_text(name, (source / name).read_text()))
    if (source / "report.html").exists():
        written += publish_report(source, destination)
    written += publish_candidates(source, destination)
    written += sync_citation_version(readme.parent / "CITATION.cff", __version__)
    return written


def readme_summary(folder: Path, marks_folder: Path | None = None) -> str:
    """The README's claims table (claim, verdict, replicated, robust: the
    short table, claims_summary.claims_short_markdown) from the tables in
    ``folder`` (the figures folder, or docs/results/ once published)."""
    from .claims_summary import claims_short_markdown

    tables = summary_tables(folder, marks_folder)
    return claims_short_markdown(tables["claims"], tables["claims_powered"], tables["claims_per_policy"],
                                 tables["fig8_marks"], tables["calibration"], tables["claims_replication"])


def claims_in_full(folder: Path, marks_folder: Path | None = None) -> str:
    """Every claim of the paper in full (claims_summary.claims_summary_markdown:
    the interval each verdict used, its size against δ, the replication, both
    marks and the per-policy rows) from the same tables as :func:`readme_summary`."""
    from .claims_summary import claims_summary_markdown

    tables = summary_tables(folder, marks_folder)
    return claims_summary_markdown(
        tables["claims"], tables["claims_powered"], tables["claims_per_policy"], tables["fig8_marks"],
        tables["calibration"], design=tables["claims_design"], replication=tables["claims_replication"],
        confirmatory=tables["claims_confirmatory"])


def summary_tables(folder: Path, marks_folder: Path | None = None) -> dict:
    """The claims' tables in ``folder`` (None for one it lacks): the claims,
    their powered reading, the per-policy readings and the confirmatory study,
    Figure 8's marks, the calibration's power, the claims' design (for the size
    against δ) and the replication study's results. Figure 8's marks and the
    replication come from ``marks_folder`` where ``folder`` has none (their
    own targets, published from other runs)."""
    from ..analysis.claims.lines import read_design, read_replication
    from .report import read_claims, read_multiverse_marks

    def found(name):
        path = folder / name
        if not path.exists() and marks_folder is not None and name in OWN_TARGETS:
            path = marks_folder / name
        return path if path.exists() else None

    readers = {"claims_powered.tsv": read_claims, "claims_per_policy.tsv": read_claims,
               "claims_confirmatory.tsv": read_claims, "fig8_marks.tsv": read_multiverse_marks,
               "calibration.tsv": lambda path: pd.read_csv(path, sep="\t"), "claims_design.tsv": read_design,
               "claims_replication.tsv": read_replication}
    tables = {name.removesuffix(".tsv"): (reader(found(name)) if found(name) else None)
              for name, reader in readers.items()}
    tables["claims"] = read_claims(folder / "claims.tsv")
    return tables


# Tables made by targets of their own, published from their own runs: a
# publish without them reads the published ones
OWN_TARGETS = ("fig8_marks.tsv", "claims_replication.tsv")


def publish_candidates(source: Path, destination: Path) -> list[str]:
    """Copy the benchmark's files (when the pipeline made them) into
    ``destination`` (docs/extending.md links to its candidates.md)."""
    from ..studies.candidates import PUBLISHED

    if not (source / "candidates.md").exists():
        return []
    destination.mkdir(parents=True, exist_ok=True)
    written = []
    for name in PUBLISHED:
        if (source / name).exists():
            (destination / name).write_bytes((source / name).read_bytes())
            written.append(str(destination / name))
    return written
