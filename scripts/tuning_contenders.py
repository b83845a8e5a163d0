"""Snakemake script of checkpoint `tuning_contenders`: the grid values of each
tuned policy that go on to the powered tuning's second stage (cqb.analysis.tuning)."""

import pandas as pd

from cqb.analysis.aggregate import write_table
from cqb.analysis.summaries import read_runs_table
from cqb.analysis.tuning import contenders, tuning_table


def main(smk):
    with open(smk.log[0], "w") as log:
        runs = pd.concat([read_runs_table(path) for path in smk.input.runs], ignore_index=True)
        table = contenders(tuning_table(runs), runs, smk.params.contenders, smk.params.stall_bound)
        write_table(table, smk.output.contenders, smk.params.float_format)
        print(table.to_string(index=False), file=log)


main(snakemake)  # noqa: F821 (injected by Snakemake)
