"""Snakemake script of rule `tuning`: the tuning table and figure, the chosen
values (from the powered second stage when there is one), and the check that
the config runs them."""

import sys

import pandas as pd

from cqb.analysis.aggregate import Curve, write_table
from cqb.figures.plotting import save_figure
from cqb.analysis.summaries import SummarySettings, read_runs_table, summarise_curves
from cqb.analysis.tuning import TABLE_COLUMNS, choices, mismatches, stage2_choices, tuning_table
from cqb.figures.tuning_plot import plot_tuning


def stage2_table(smk):
    """The stage-2 table (or an empty one without a second stage)."""
    if not smk.input.get("contenders"):
        return pd.DataFrame(columns=list(TABLE_COLUMNS) + ["safe"])
    chosen = pd.read_csv(smk.input.contenders, sep="\t", dtype=str)
    stage1 = pd.concat([read_runs_table(path) for path in smk.input.runs], ignore_index=True)
    sweep = dict(zip(stage1["policy"], zip(stage1["sweep_param"], stage1["sweep_value"])))
    files = list(smk.input.stage2)
    per_label = len(files) // len(chosen)
    curves = [Curve(label, files[i * per_label:(i + 1) * per_label], *sweep[label])
              for i, label in enumerate(chosen["label"])]
    runs = summarise_curves(curves, SummarySettings(**smk.params.summaries))
    return stage2_choices(tuning_table(runs), smk.params.stall_bound)


def main(smk):
    with open(smk.log[0], "w") as log:
        runs = pd.concat([read_runs_table(path) for path in smk.input.runs], ignore_index=True)
        table = tuning_table(runs)
        write_table(table, smk.output.table, smk.params.float_format)
        second = stage2_table(smk)
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
