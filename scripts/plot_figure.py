"""Snakemake script of a figure rule: the figure (pdf, png) and its data table."""

import sys
from pathlib import Path

try:
    import cqb  # noqa: F401
except ImportError:  # run from a conda env without the package installed
    sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))
from cqb.aggregate import read_table
from cqb.plotting import make_figure


def main(smk):
    with open(smk.log[0], "w") as log:
        tables = {name: read_table(path) for name, path in zip(smk.params.experiments, smk.input.tables)}
        table = make_figure(smk.params.spec, tables, pdf=smk.output.pdf, png=smk.output.png,
                            tsv=smk.output.tsv, float_format=smk.params.float_format)
        print(f"{len(table)} rows -> {smk.output.tsv}, {smk.output.pdf}, {smk.output.png}", file=log)


main(snakemake)  # noqa: F821 (injected by Snakemake)
