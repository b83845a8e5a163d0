"""Snakemake script of rule `replication_table`: each registered verdict
against its replication (cqb.studies.replication.replication_table)."""

import json
from pathlib import Path

from cqb.analysis.aggregate import write_table
from cqb.studies.replication import replication_table


def main(smk):
    with open(smk.log[0], "w") as log:
        states = {name: json.loads(Path(path).read_text()) for name, path in zip(smk.params.claims, smk.input.states)}
        table = replication_table(smk.params.config, Path(smk.input.powered).parent, states)
        write_table(table, smk.output.table, smk.params.float_format)
        print(table.to_string(index=False), file=log)


main(snakemake)  # noqa: F821 (injected by Snakemake)
