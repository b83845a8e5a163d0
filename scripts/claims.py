"""Snakemake script of rule `claims`: the claims table (TSV and Markdown), the
results summary and the provenance record of both."""

import json
from pathlib import Path

import pandas as pd

from cqb import __version__
from cqb.analysis.aggregate import write_table
from cqb.analysis.claims.lines import claims_design
from cqb.analysis.verdict_rules import HOLDS, FAILS
from cqb.analysis.claims.tables import (claims_readings, comparisons_table, evaluate_claims, per_policy_table,
                                        with_marks, with_powered)
from cqb.sim.code_hash import simulation_code_hash
from cqb.io.files import atomic_write_text
from cqb.publishing.markdown_tables import markdown_table, results_summary
from cqb.publishing.provenance import pool_checksums, provenance, provenance_line
from cqb.publishing.republish import render_claims_pages
from cqb.analysis.summaries import instance_statistics, read_curves_table, read_runs_table
from cqb.analysis.tuning import mismatches


def tuning_row(choices_path, configured):
    chosen = pd.read_csv(choices_path, sep="\t", dtype={"value": str})
    problems = mismatches(chosen, configured)
    listing = "; ".join(f"{r.policy}: {r.parameter} = {r.value} ({r.n_stalled}/{r.n_runs} stalled)"
                        for r in chosen.itertuples())
    return {"claim": "tuned_values_used", "figure": "tuning", "experiment": "tuning",
            "statement": "(ours) The evaluation runs use the values chosen on the held-out tuning seeds",
            "statistic": "configured value equals the tuned choice, per policy", "value": float(not problems),
            "ci_low": float("nan"), "ci_high": float("nan"), "verdict": FAILS if problems else HOLDS,
            "n_seeds": int(chosen["n_runs"].min()), "detail": "; ".join(problems) or listing}


TUNED_VALUES_USED = ("the workflow stops before the claims when a configured value differs from the tuned "
                     "choice (rule tuning), so this check cannot fail here")


def main(smk):
    with open(smk.log[0], "w") as log:
        runs = {name: read_runs_table(path) for name, path in zip(smk.params.run_experiments, smk.input.runs)}
        record = provenance(smk.config, simulation_code_hash(),
                            {h for table in runs.values() for h in table["code_hash"] if h}, __version__)
        record["claims_registry_hash"] = smk.params.registry_hash
        record["pool_files"] = pool_checksums(smk.input.get("pools", []))
        table = evaluate_claims(smk.params.specs, runs, smk.params.margins)
        powered_readings = None
        if smk.input.get("powered_readings"):
            powered_readings = pd.read_csv(smk.input.powered_readings, sep="\t", keep_default_na=False,
                                           na_values={c: ["nan", ""] for c in ("value", "ci_low", "ci_high")})
        readings = claims_readings(smk.params.specs, runs, smk.params.margins, powered_readings)
        by_construction = {spec.name: spec.by_construction for spec in smk.params.specs if spec.by_construction}
        if smk.input.get("tuning"):
            table = pd.concat([table, pd.DataFrame([tuning_row(smk.input.tuning, smk.params.configured)])],
                              ignore_index=True)
        if smk.input.get("powered"):
            powered = pd.read_csv(smk.input.powered, sep="\t", keep_default_na=False,
                                  na_values={c: ["nan", ""] for c in ("value", "ci_low", "ci_high")})
            table = with_powered(table, powered)
        if smk.input.get("tuning"):
            by_construction["tuned_values_used"] = TUNED_VALUES_USED
        table = with_marks(table, readings, by_construction)
        write_table(table, smk.output.tsv, smk.params.float_format)
        powered_states = {name: json.loads(open(path).read())
                          for name, path in zip(smk.params.powered_state_claims, smk.input.powered_states)}
        confirmatory_states = {name: json.loads(open(path).read())
                               for name, path in zip(smk.params.confirmatory_claims, smk.input.confirmatory_states)}
        write_table(per_policy_table(smk.params.specs, runs, smk.params.margins, powered_states, confirmatory_states),
                    smk.output.per_policy, smk.params.float_format)
        write_table(comparisons_table(smk.params.specs, runs, smk.params.margins, powered_states, confirmatory_states),
                    smk.output.comparisons, smk.params.float_format)
        write_table(readings, smk.output.readings_tsv, smk.params.float_format)
        design = claims_design(smk.params.specs, smk.params.margins, smk.params.sweeps)
        write_table(design, smk.output.design, smk.params.float_format)
        # the Markdown from the TSVs just written, as `cqb publish` renders it
        folder = Path(smk.output.tsv).parent
        if {Path(smk.output.md), Path(smk.output.readings_md)} != {folder / "claims.md", folder / "claims_readings.md"}:
            raise ValueError("the claims rule writes claims.md and claims_readings.md beside claims.tsv")
        render_claims_pages(folder, record)
        curves = {name: read_curves_table(path) for name, path in zip(smk.params.curve_experiments, smk.input.curves)}
        text = [provenance_line(record), "",
                results_summary(curves, smk.params.display_names, smk.params.descriptions)]
        for name, table_runs in runs.items():
            sweep = table_runs["sweep_param"].iloc[0]
            if sweep in smk.params.instance_keys:
                stats = instance_statistics(table_runs)
                text += [f"Instances of **{name}** per {sweep} (θ* is redrawn per value until enough "
                         "contexts meet the slack, so the sweep changes the instances too):", "",
                         markdown_table(stats), ""]
        atomic_write_text(smk.output.results, "\n".join(text))
        atomic_write_text(smk.output.provenance, json.dumps(record, indent=1, sort_keys=True) + "\n")
        print(table[["claim", "value", "ci_low", "ci_high", "verdict", "n_seeds"]].to_string(index=False),
              file=log)


main(snakemake)  # noqa: F821 (injected by Snakemake)
