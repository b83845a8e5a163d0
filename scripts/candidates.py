"""Snakemake script of rule `candidates`: the candidate benchmark's leaderboard,
claims and figure (cqb.studies.candidates), from the paper policies' per-run summaries
and the candidates' run files."""

import pandas as pd

from cqb import __version__
from cqb.analysis.aggregate import write_table
from cqb.io.files import atomic_write_text
from cqb.figures.candidates_plot import plot_leaderboard
from cqb.studies.candidates import candidate_claims, leaderboard, policy_source, summary_markdown
from cqb.sim.code_hash import simulation_code_hash
from cqb.publishing.provenance import provenance, provenance_line
from cqb.analysis.summaries import SummarySettings, read_runs_table, summarise_curves


def main(smk):
    benchmark = smk.params.benchmark
    labels = [c.label for c in benchmark.candidates]
    settings = SummarySettings(**smk.params.summaries)
    with open(smk.log[0], "w") as log:
        runs = {}
        for experiment, path in zip(benchmark.experiments, smk.input.runs):
            paper = read_runs_table(path)
            mine = summarise_curves(smk.params.curves[experiment], settings)
            # a candidate the experiment already runs: its rows come from its run files, once
            runs[experiment] = pd.concat([paper[~paper["policy"].isin(labels)], mine], ignore_index=True)
        hashes = {h for table in runs.values() for h in table["code_hash"] if h}
        record = provenance(smk.config, simulation_code_hash(), hashes, __version__)
        names = dict(smk.params.display_names)
        names.update({c.label: c.display for c in benchmark.candidates})
        board = leaderboard(runs, labels, benchmark.metric, names)
        claims = candidate_claims(runs, labels, benchmark.baselines, benchmark.metric, names,
                                  benchmark.cell_keys())
        write_table(board, smk.output.tsv, smk.params.float_format)
        write_table(claims, smk.output.claims, smk.params.float_format)
        sources = [policy_source(c.policy) for c in benchmark.candidates]
        atomic_write_text(smk.output.md, summary_markdown(board, claims, provenance_line(record),
                                                          benchmark.title, sources))
        plot_leaderboard(board, smk.output.pdf, smk.output.png, benchmark.title)
        print(claims[["claim", "value", "ci_low", "ci_high", "verdict", "n_seeds"]].to_string(index=False),
              file=log)


main(snakemake)  # noqa: F821 (injected by Snakemake)
