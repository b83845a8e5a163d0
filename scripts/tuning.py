"""Snakemake script of rule `tuning`: the tuning table and figure, the chosen
values (from the powered second stage when there is one), and the check that
the config runs them."""

import sys

import pandas as pd

from cqb.analysis.aggregate import write_table
from cqb.analysis.summaries import SummarySettings, read_runs_table
from cqb.analysis.tuning import choices, mismatches, stage2_table, tuning_table
from cqb.figures.plotting import save_figure
from cqb.figures.tuning_plot import plot_tuning


def main(smk):
    with open(smk.log[0], "w") as log:
        runs = pd.concat([read_runs_table(path) for path in smk.input.runs], ignore_index=True)
        table = tuning_table(runs)
        write_table(table, smk.output.table, smk.params.float_format)
        contenders = (pd.read_csv(smk.input.contenders, sep="\t", dtype=str)["label"].tolist()
                      if smk.input.get("contenders") else None)
        second = stage2_table(contenders, runs, list(smk.input.stage2), SummarySettings(**smk.params.summaries),
                              smk.params.stall_bound)
        write_table(second, smk.output.stage2, smk.params.float_format)
        if len(second):
            # the stage-1 star marks the powered choice too
            table["chosen"] = [bool(((second["policy"] == p) & (second["value"] == v) & second["chosen"]).any())
                               for p, v in zip(table["policy"], table["value"])]
            write_table(table, smk.output.table, smk.params.float_format)
            chosen = choices(second)
            print(second.to_string(index=False), file=log)
        else:
            chosen = choices(table)
        write_table(chosen, smk.output.choices, smk.params.float_format)
        figure = plot_tuning(table, smk.params.display_names, smk.params.title)
        save_figure(figure, pdf=smk.output.pdf, png=smk.output.png)
        print(chosen.to_string(index=False), file=log)
        problems = mismatches(chosen, smk.params.configured)
        for problem in problems:
            print(f"tuning: {problem}", file=log)
        if problems and smk.params.enforce:
            # one line on the console; the outputs stay for inspection
            sys.exit(f"tuning: the config does not run the tuned values: {'; '.join(problems)} "
                     "(set the package default or defaults.per_policy, or tuning.enforce: false)")


main(snakemake)  # noqa: F821 (injected by Snakemake)
