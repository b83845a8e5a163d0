"""The comparisons table (figures/claims_comparisons.tsv) of a result tree made
before the pipeline wrote one, so that `cqb compare --old-comparisons` has an
old side: the claims of the tree's config, on its run tables, powered and
confirmatory states, by today's cqb.analysis.claims.tables.comparisons_table.

    python -m bench.claims_comparisons TREE --out old_comparisons.tsv [--configfile FILE]

TREE is the checkout the pipeline ran in (its config/config.yaml and
config/datasets.yaml; ``--configfile`` as given to Snakemake goes on top). As
a check, each claim's figures comparisons are combined and set against the
verdict in the tree's own claims.tsv, where it has one; a mismatch is printed
and makes the exit status 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd
import yaml


def tree_config(tree: Path, configfile: Path | None) -> dict:
    """The tree's config as its Snakefile reads it: config.yaml, a --configfile
    on top, the real-data settings, validated with the defaults filled in."""
    from cqb.config.schema import validate_config, validate_with_defaults
    from snakemake.utils import update_config

    config = yaml.safe_load((tree / "config/config.yaml").read_text())
    if configfile is not None:
        update_config(config, yaml.safe_load(configfile.read_text()) or {})
    datasets = tree / "config/datasets.yaml"
    if datasets.exists():
        settings = yaml.safe_load(datasets.read_text()) or {}
        update_config(settings, {k: config[k] for k in settings if k in config})
        config.update(settings)
    validate_config(config, yaml.safe_load((tree / "workflow/schemas/config.schema.yaml").read_text()))
    validate_with_defaults(config, yaml.safe_load((tree / "workflow/schemas/datasets.schema.yaml").read_text()))
    return config


def tree_comparisons(tree: Path, configfile: Path | None = None) -> tuple[pd.DataFrame, list[str]]:
    """(the comparisons table, claims whose figures comparisons do not combine
    to the verdict of the tree's claims.tsv)."""
    from cqb.analysis.claims.tables import comparisons_table
    from cqb.analysis.powered_reading import powered_claims
    from cqb.analysis.summaries import read_runs_table
    from cqb.analysis.verdict_rules import combine
    from cqb.studies.confirmatory import confirmatory_claims
    from cqb.config.experiments import build_plan
    from cqb.studies.claim_specs import claim_experiments, claim_specs

    config = tree_config(tree, configfile)
    plan = build_plan(config)
    specs = claim_specs(config, plan)
    results, figures = tree / config["results_dir"], tree / config["figures_dir"]
    runs = {e: read_runs_table(results / "aggregate" / f"{e}.runs.tsv") for e in claim_experiments(specs)}
    powered = {name: json.loads((results / "powered" / name / "final.json").read_text())
               for name in powered_claims(config, plan, specs)}
    confirmatory = {name: json.loads((results / "confirmatory" / name / "look0.json").read_text())
                    for name in confirmatory_claims(config, plan, specs)}
    table = comparisons_table(specs, runs, config["claim_margins"], powered, confirmatory)
    mismatches = []
    if (figures / "claims.tsv").exists():
        verdicts = pd.read_csv(figures / "claims.tsv", sep="\t").set_index("claim")["verdict"]
        for claim, rows in table[table["source"] == "figures"].groupby("claim", sort=False):
            if claim in verdicts and combine(rows["verdict"]) != verdicts[claim]:
                mismatches.append(f"{claim}: comparisons combine to {combine(rows['verdict'])}, "
                                  f"claims.tsv says {verdicts[claim]}")
    return table, mismatches


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree", type=Path, help="the checkout the pipeline ran in")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--configfile", type=Path, help="as given to Snakemake (on top of config/config.yaml)")
    args = parser.parse_args(argv)
    from cqb.analysis.aggregate import write_table

    try:
        table, mismatches = tree_comparisons(args.tree, args.configfile)
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    write_table(table, args.out)
    print(f"{len(table)} comparisons of {table['claim'].nunique()} claims -> {args.out}")
    for line in mismatches:
        print(f"mismatch: {line}", file=sys.stderr)
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
