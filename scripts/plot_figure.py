"""Snakemake script of a figure rule: the figure (pdf, png) and its data table."""

from cqb.analysis.aggregate import read_table
from cqb.analysis.summaries import read_curves_table, read_runs_table
from cqb.figures.plotting import make_figure


def main(smk):
    with open(smk.log[0], "w") as log:
        experiments = smk.params.spec.experiments
        tables = {name: read_table(path) for name, path in zip(experiments, smk.input.tables)}
        summaries = {name: read_curves_table(path) for name, path in zip(experiments, smk.input.curves)}
        # the sweep panels' experiments (and references): one row per run
        runs = {name: read_runs_table(path) for name, path in zip(smk.params.spec.runs_experiments, smk.input.runs)}
        table = make_figure(smk.params.spec, tables, pdf=smk.output.pdf, png=smk.output.png,
                            tsv=smk.output.tsv, float_format=smk.params.float_format,
                            curve_summaries=summaries, runs=runs)
        print(f"{len(table)} rows -> {smk.output.tsv}, {smk.output.pdf}, {smk.output.png}", file=log)


main(snakemake)  # noqa: F821 (injected by Snakemake)
