"""Snakemake script of rule `regret_rates`: per-run summaries (cqb.analysis.summaries),
per (experiment, policy, T) the converged mean tail regret with its interval
and stall count, and per (experiment, policy) the log–log slope."""

import pandas as pd

from cqb.analysis.aggregate import write_table
from cqb.analysis.rates import rate_run_rows, rate_tables, read_rate_runs
from cqb.analysis.slope_precision import resolution_costs
from cqb.analysis.summaries import SummarySettings


def main(smk):
    with open(smk.log[0], "w") as log:
        settings = SummarySettings(**smk.params.summaries)
        runs = pd.DataFrame(rate_run_rows(read_rate_runs(smk.params.runs, smk.input), settings))
        runs["stage"] = smk.params.stages  # 2: a second stage's fresh seeds (config second_stage)
        summary, slopes = rate_tables(runs, bootstrap=smk.params.bootstrap)
        slopes = resolution_costs(runs, slopes, **smk.params.resolve)
        write_table(runs, smk.output.runs, smk.params.float_format)
        write_table(summary, smk.output.summary, smk.params.float_format)
        write_table(slopes, smk.output.slopes, smk.params.float_format)
        print(f"{len(runs)} runs -> {smk.output.summary} ({len(summary)} rows), "
              f"{smk.output.slopes} ({len(slopes)} rows)", file=log)
        print(slopes.to_string(index=False), file=log)


main(snakemake)  # noqa: F821 (injected by Snakemake)
