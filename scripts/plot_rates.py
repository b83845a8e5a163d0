"""Snakemake script of the regret-rate figures (rules `fig5`, `fig9_rates`): the figure (one panel per
experiment), its data table, the slope table and the rendered summary."""

from pathlib import Path

import pandas as pd

from cqb.analysis.aggregate import write_table
from cqb.io.files import atomic_write_text
from cqb.figures.plotting import save_figure
from cqb.policies import DISPLAY_NAMES, policy_colour
from cqb.analysis.rates import rates_figure_table
from cqb.figures.rates_plot import plot_rates, rates_summary_markdown


def read(path):
    return pd.read_csv(path, sep="\t", dtype={"policy": str, "experiment": str, "horizons_used": str,
                                              "horizons_dropped": str}, keep_default_na=False,
                       na_values=["nan"])


def main(smk):
    with open(smk.log[0], "w") as log:
        summary, slopes = read(smk.input.summary), read(smk.input.slopes)
        titles = dict(smk.params.panel_titles)
        table = rates_figure_table(summary, slopes)
        write_table(table, smk.output.tsv, smk.params.float_format)
        write_table(slopes, smk.output.slopes, smk.params.float_format)
        atomic_write_text(smk.output.text, rates_summary_markdown(summary, slopes, titles, DISPLAY_NAMES,
                                                                   figure=smk.params.title.partition(":")[0]))
        colours = {policy: policy_colour(policy) for policy in DISPLAY_NAMES}
        figure = plot_rates(summary, slopes, titles, DISPLAY_NAMES, colours, title=smk.params.title,
                            slopes_file=Path(smk.output.slopes).name)
        save_figure(figure, smk.output.pdf, smk.output.png, smk.params.dpi)
        print(f"{len(table)} rows -> {smk.output.tsv}, {smk.output.slopes}, {smk.output.text}", file=log)


main(snakemake)  # noqa: F821 (injected by Snakemake)
