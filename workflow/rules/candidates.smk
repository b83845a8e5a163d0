# The candidate-policy benchmark (cqb.studies.candidates, docs/extending.md):
#   snakemake --cores 2 candidates --config candidates='[my_policy]'
# runs each candidate on every experiment of candidate_benchmark.experiments, on
# those experiments' instances, horizons and seeds: a run file is keyed by
# (instance, horizon, label, seed), so the paper policies' run files are reused
# and only the candidates' runs are new. With `candidates: []` (the default) this
# file adds no run and no job to any other target.

from cqb.studies.candidates import add_runs, benchmark_setup

CANDIDATE_BENCHMARK = or_config_error(benchmark_setup, config, PLAN)


if CANDIDATE_BENCHMARK is not None:
    # rule simulate finds the candidates' runs in the plan's run table
    add_runs(PLAN.runs, CANDIDATE_BENCHMARK.runs)

    rule candidates:
        input:
            # the paper policies' per-run summaries (rule aggregate, from their existing run files)
            runs=[RUNS_TABLE.format(experiment=e) for e in CANDIDATE_BENCHMARK.experiments],
            candidate_runs=list(
                dict.fromkeys(
                    path
                    for e in CANDIDATE_BENCHMARK.experiments
                    for path in CANDIDATE_BENCHMARK.run_files(e, RUN_FILE)
                )
            ),
        output:
            tsv=f"{FIGURES}/candidates.tsv",
            claims=f"{FIGURES}/candidates_claims.tsv",
            md=f"{FIGURES}/candidates.md",
            pdf=f"{FIGURES}/candidates.pdf",
            png=f"{FIGURES}/candidates.png",
        log:
            f"{LOGS}/verdicts/candidates.log",
        localrule: True
        conda:
            "../envs/analysis.yaml"
        params:
            benchmark=CANDIDATE_BENCHMARK,
            curves={e: curves_with_files(CANDIDATE_BENCHMARK.curves[e]) for e in CANDIDATE_BENCHMARK.experiments},
            summaries=config["summaries"],
            display_names=display_names(),
            float_format=config["aggregate"]["float_format"],
        script:
            "../../scripts/candidates.py"

else:

    rule candidates:
        log:
            f"{LOGS}/verdicts/candidates.log",
        localrule: True
        conda:
            "../envs/analysis.yaml"
        shell:
            'echo "cqb: no candidates to benchmark: name them, e.g.'
            " --config candidates='[my_policy]' (docs/extending.md)\" | tee {log:q} >&2; exit 1"
