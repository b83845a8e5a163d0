"""Snakemake script of rule `report_html`: the replication report (cqb.publishing.report)."""

import json
from pathlib import Path

import pandas as pd

from cqb.io.files import atomic_write_text
from cqb.publishing.report import read_claims, read_multiverse_marks, report_html
from cqb.publishing.provenance import provenance_line
from cqb.publishing.published_results import claims_in_full, readme_summary


def main(smk):
    claims = read_claims(Path(smk.input.claims))
    powered = read_claims(Path(smk.input.powered)) if smk.input.get("powered") else None
    provenance = provenance_line(json.loads(Path(smk.input.provenance).read_text()))
    calibration = (pd.read_csv(smk.input.calibration, sep="\t", keep_default_na=False)
                   if smk.input.get("calibration") else None)
    multiverse = read_multiverse_marks(Path(smk.input.multiverse)) if smk.input.get("multiverse") else None
    per_policy = read_claims(Path(smk.input.per_policy)) if smk.input.get("per_policy") else None
    captions = Path(smk.input.captions[0]).parent if smk.input.captions else Path(smk.output[0]).parent
    folder = Path(smk.output[0]).parent
    page = report_html(folder, claims, powered, provenance, captions, calibration, multiverse=multiverse,
                       per_policy=per_policy, summary=readme_summary(Path(smk.input.claims).parent),
                       in_full=claims_in_full(Path(smk.input.claims).parent))
    atomic_write_text(smk.output[0], page)
    with open(smk.log[0], "w") as log:
        print(f"{len(claims)} claims, {len(smk.input.figures)} figures -> {smk.output[0]}", file=log)


main(snakemake)  # noqa: F821 (injected by Snakemake)
