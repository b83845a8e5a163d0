"""Snakemake script of rule `powered_claims`: one row per powered claim from
its last look (cqb.analysis.powered_reading.powered_row), and every registered reading of it
on the runs of that look."""

import json

import pandas as pd

from cqb.analysis.aggregate import write_table
from cqb.analysis.claims.tables import READING_COLUMNS
from cqb.analysis.powered_reading import POWERED_COLUMNS, powered_row


def main(smk):
    with open(smk.log[0], "w") as log:
        rows, readings = [], []
        for name, path in zip(smk.params.claims, smk.input):
            state = json.loads(open(path).read())
            rows.append(powered_row(smk.params.specs[name], state))
            readings += state.get("readings", [])
        table = pd.DataFrame(rows, columns=list(POWERED_COLUMNS))
        write_table(table, smk.output.table, smk.params.float_format)
        write_table(pd.DataFrame(readings, columns=list(READING_COLUMNS)), smk.output.readings,
                    smk.params.float_format)
        print(table[["claim", "verdict", "n_seeds", "n_runs", "looks"]].to_string(index=False), file=log)


main(snakemake)  # noqa: F821 (injected by Snakemake)
