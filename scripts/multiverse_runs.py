"""Snakemake script of rule `multiverse_runs`: the per-run summaries of one
column of Figure 8 (cqb.analysis.multiverse), with each row's experiment."""

from cqb.analysis.aggregate import write_table
from cqb.analysis.multiverse import alternative_runs
from cqb.analysis.summaries import SummarySettings


def main(smk):
    multiverse = smk.params.multiverse
    table = alternative_runs(multiverse, multiverse.alternative(smk.wildcards.alternative), smk.params.run_file,
                             SummarySettings(**smk.params.summaries))
    write_table(table, smk.output[0], smk.params.float_format)
    with open(smk.log[0], "w") as log:
        print(f"{len(table)} runs -> {smk.output[0]}", file=log)


main(snakemake)  # noqa: F821 (injected by Snakemake)
