"""Snakemake script of rule `fig5`: the regret-rate figure and its data table
(the per-(policy, T) summary with each policy's fitted slope beside it)."""

import pandas as pd

from cqb.aggregate import write_table
from cqb.plotting import POLICY_COLOURS, save_figure
from cqb.policies import DISPLAY_NAMES
from cqb.rates import plot_rates, rates_figure_table


def main(smk):
    with open(smk.log[0], "w") as log:
        summary = pd.read_csv(smk.input.summary, sep="\t", dtype={"policy": str})
        slopes = pd.read_csv(smk.input.slopes, sep="\t", dtype={"policy": str},
                             keep_default_na=False, na_values={"slope": ["nan"], "ci_low": ["nan"],
                                                               "ci_high": ["nan"]})
        table = rates_figure_table(summary, slopes)
        write_table(table, smk.output.tsv, smk.params.float_format)
        figure = plot_rates(summary, slopes, DISPLAY_NAMES, POLICY_COLOURS, title=smk.params.title)
        save_figure(figure, smk.output.pdf, smk.output.png, smk.params.dpi)
        print(f"{len(table)} rows -> {smk.output.tsv}, {smk.output.pdf}, {smk.output.png}", file=log)


main(snakemake)  # noqa: F821 (injected by Snakemake)
