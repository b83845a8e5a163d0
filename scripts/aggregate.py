"""Snakemake script of rule `aggregate`: the tidy table of one experiment."""

import sys
from pathlib import Path

try:
    import cqb  # noqa: F401
except ImportError:  # run from a conda env without the package installed
    sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))
from cqb.aggregate import Curve, aggregate_curves, write_table


def main(smk):
    with open(smk.log[0], "w") as log:
        curves = [Curve(c["policy"], c["files"], c["sweep_param"], c["sweep_value"])
                  for c in smk.params.curves]
        table = aggregate_curves(curves, ddof=smk.params.ddof)
        write_table(table, smk.output[0], smk.params.float_format)
        print(f"{len(curves)} curves, {len(table)} rows -> {smk.output[0]}", file=log)


main(snakemake)  # noqa: F821 (injected by Snakemake)
