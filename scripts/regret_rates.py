"""Snakemake script of rule `regret_rates`: per (policy, T) final regret over
seeds with a 95% interval, and per policy the log–log slope of R_T on T."""

import numpy as np

from cqb.aggregate import write_table
from cqb.rates import final_regret_rows, rate_tables


def final_rounds(runs, files):
    """(label, T, seed, run) with only the two queue arrays read from each file."""
    for (label, horizon, seed), path in zip(runs, files):
        with np.load(path) as run:
            queue, oracle = run["queue"], run["oracle_queue"]
        if queue.shape[0] != int(horizon):
            raise ValueError(f"{path}: {queue.shape[0]} rounds, expected T = {horizon}")
        yield label, horizon, seed, {"queue": queue[-1:], "oracle_queue": oracle[-1:]}


def main(smk):
    with open(smk.log[0], "w") as log:
        rows = final_regret_rows(final_rounds(smk.params.runs, smk.input))
        summary, slopes = rate_tables(rows, bootstrap=smk.params.bootstrap)
        write_table(summary, smk.output.summary, smk.params.float_format)
        write_table(slopes, smk.output.slopes, smk.params.float_format)
        print(f"{len(rows)} runs -> {smk.output.summary} ({len(summary)} rows), "
              f"{smk.output.slopes} ({len(slopes)} rows)", file=log)
        print(slopes.to_string(index=False), file=log)


main(snakemake)  # noqa: F821 (injected by Snakemake)
