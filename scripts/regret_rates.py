"""Snakemake script of rule `regret_rates`: per-run summaries (cqb.analysis.summaries),
per (experiment, policy, T) the converged mean tail regret with its interval
and stall count, and per (experiment, policy) the log–log slope."""

import json

import numpy as np
import pandas as pd

from cqb.analysis.aggregate import write_table
from cqb.analysis.rates import rate_run_rows, rate_tables
from cqb.analysis.summaries import SummarySettings, final_phase_start


def queues(runs, files):
    """(experiment, label, T, seed, Q, Q*, final-phase start) with only the two
    queue arrays and the metadata read."""
    for (experiment, label, horizon, seed), path in zip(runs, files):
        with np.load(path) as run:
            metadata = json.loads(str(run["metadata"]))
            yield (experiment, label, horizon, seed, run["queue"], run["oracle_queue"],
                   final_phase_start(metadata))


def main(smk):
    with open(smk.log[0], "w") as log:
        settings = SummarySettings(**smk.params.summaries)
        runs = pd.DataFrame(rate_run_rows(queues(smk.params.runs, smk.input), settings))
        summary, slopes = rate_tables(runs, bootstrap=smk.params.bootstrap)
        write_table(runs, smk.output.runs, smk.params.float_format)
        write_table(summary, smk.output.summary, smk.params.float_format)
        write_table(slopes, smk.output.slopes, smk.params.float_format)
        print(f"{len(runs)} runs -> {smk.output.summary} ({len(summary)} rows), "
              f"{smk.output.slopes} ({len(slopes)} rows)", file=log)
        print(slopes.to_string(index=False), file=log)


main(snakemake)  # noqa: F821 (injected by Snakemake)
