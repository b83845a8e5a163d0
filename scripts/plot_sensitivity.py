"""Snakemake script: Figure 7 (cqb.analysis.sensitivity) — the verdict grid, its table and
the rendered summary (figures/fig7.md, copied into docs/figures.md).

input.runs: the {experiment}.runs.tsv of every cell, in the order of params.cells;
input.reports: the pools' report.json. params: cells, datasets, columns,
slack_margin, title, float_format.
"""

import logging

from cqb.io.files import atomic_write_text
from cqb.analysis.sensitivity import load_report, render_summary, sensitivity_table
from cqb.analysis.summaries import read_runs_table
from cqb.figures.sensitivity_plot import plot_grid
from cqb.sim.runfile import atomic_write

smk = snakemake  # noqa: F821 (injected by Snakemake)
logging.basicConfig(filename=smk.log[0], level=logging.INFO, format="%(asctime)s %(message)s")
cells = smk.params.cells
runs = {cell.experiment: read_runs_table(path) for cell, path in zip(cells, smk.input.runs)}
reports = {path: load_report(path) for path in smk.input.reports}
table = sensitivity_table(cells, runs, reports, float(smk.params.slack_margin))
with atomic_write(smk.output.tsv) as temporary:
    table.to_csv(temporary, sep="\t", index=False, float_format=smk.params.float_format)
plot_grid(table, smk.params.datasets, smk.params.columns, smk.params.title, smk.output.pdf, smk.output.png)
atomic_write_text(smk.output.md, render_summary(table, smk.params.datasets, smk.params.columns,
                                                source=smk.output.tsv))
logging.info("%d cells, %d rows", len(cells), len(table))
