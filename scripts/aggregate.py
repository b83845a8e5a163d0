"""Snakemake script of rule `aggregate`: the per-round table of one experiment,
its per-run summaries and its per-curve summaries (stalled runs included)."""

import sys

from cqb.analysis.aggregate import aggregate_curves, write_table
from cqb.analysis.summaries import SummarySettings, curve_summaries, summarise_curves


def main(smk):
    with open(smk.log[0], "w") as log:
        curves = smk.params.curves  # cqb.analysis.aggregate.Curve, in config order
        try:
            table = aggregate_curves(curves, ddof=smk.params.ddof)
        except ValueError as error:  # a bad run file (cqb.analysis.aggregate.read_run_file): one line, no traceback
            print(f"aggregate: {error}", file=log)
            sys.exit(f"aggregate: {error}")
        write_table(table, smk.output.table, smk.params.float_format)
        settings = SummarySettings(**smk.params.summaries)
        runs = summarise_curves(curves, settings)
        write_table(runs, smk.output.runs, smk.params.float_format)
        summaries = curve_summaries(runs, settings.confidence)
        write_table(summaries, smk.output.curves, smk.params.float_format)
        print(f"{len(curves)} curves, {len(table)} rows -> {smk.output.table}; {len(runs)} runs "
              f"({int(runs['stalled'].sum())} stalled) -> {smk.output.runs}", file=log)


main(snakemake)  # noqa: F821 (injected by Snakemake)
