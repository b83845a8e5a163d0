"""Snakemake script of a figure rule: the figure (pdf, png) and its data table."""

from cqb.aggregate import read_table
from cqb.plotting import make_figure


def main(smk):
    with open(smk.log[0], "w") as log:
        tables = {name: read_table(path) for name, path in zip(smk.params.spec.experiments, smk.input.tables)}
        table = make_figure(smk.params.spec, tables, pdf=smk.output.pdf, png=smk.output.png,
                            tsv=smk.output.tsv, float_format=smk.params.float_format)
        print(f"{len(table)} rows -> {smk.output.tsv}, {smk.output.pdf}, {smk.output.png}", file=log)


main(snakemake)  # noqa: F821 (injected by Snakemake)
