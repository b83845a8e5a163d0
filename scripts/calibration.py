"""Snakemake script of rule `calibration`: the powered reading's sequential
procedure simulated on resampled run tables (cqb.analysis.calibration)."""

from cqb.analysis.aggregate import write_table
from cqb.analysis.calibration import calibration_table, plot_calibration
from cqb.analysis.summaries import read_runs_table


def main(smk):
    with open(smk.log[0], "w") as log:
        runs = {name: read_runs_table(path) for name, path in zip(smk.params.experiments, smk.input.runs)}
        table = calibration_table(smk.params.claims, runs, smk.params.shape_experiment,
                                  smk.params.replications, smk.params.seed, smk.params.replication)
        write_table(table, smk.output.tsv, smk.params.float_format)
        plot_calibration(table, smk.params.alpha, smk.output.pdf, smk.output.png)
        print(table[["claim", "scenario", "type1_error", "type1_se", "type1_ok", "power"]].to_string(index=False),
              file=log)


main(snakemake)  # noqa: F821 (injected by Snakemake)
