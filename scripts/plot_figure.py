"""Snakemake script of a figure rule: the figure (pdf, png) and its data table."""

from cqb.analysis.aggregate import read_table
from cqb.figures.plotting import make_figure
from cqb.analysis.summaries import read_curves_table


def main(smk):
    with open(smk.log[0], "w") as log:
        experiments = smk.params.spec.experiments
        tables = {name: read_table(path) for name, path in zip(experiments, smk.input.tables)}
        summaries = {name: read_curves_table(path) for name, path in zip(experiments, smk.input.curves)}
        table = make_figure(smk.params.spec, tables, pdf=smk.output.pdf, png=smk.output.png,
                            tsv=smk.output.tsv, float_format=smk.params.float_format,
                            curve_summaries=summaries)
        print(f"{len(table)} rows -> {smk.output.tsv}, {smk.output.pdf}, {smk.output.png}", file=log)


main(snakemake)  # noqa: F821 (injected by Snakemake)
