"""Snakemake script of rule `aggregate`: the tidy table of one experiment."""

from cqb.aggregate import aggregate_curves, write_table


def main(smk):
    with open(smk.log[0], "w") as log:
        curves = smk.params.curves  # cqb.aggregate.Curve, in config order
        table = aggregate_curves(curves, ddof=smk.params.ddof)
        write_table(table, smk.output[0], smk.params.float_format)
        print(f"{len(curves)} curves, {len(table)} rows -> {smk.output[0]}", file=log)


main(snakemake)  # noqa: F821 (injected by Snakemake)
