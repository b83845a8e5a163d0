# Per experiment: the tidy per-round table (mean/sd/se/quartiles over seeds of
# Q(t), Q*(t) and Q(t) − Q*(t) per policy label and sweep value), one summary
# row per run (final, tail and early regret, stalled or not) and one per curve
# (stalled runs with an exact interval, means and medians).


rule aggregate:
    input:
        experiment_run_files,
    output:
        table=AGGREGATE_FILE,
        runs=RUNS_TABLE,
        curves=CURVES_TABLE,
    log:
        f"{LOGS}/aggregate/{{experiment}}.log",
    benchmark:
        f"{BENCHMARKS}/aggregate/{{experiment}}.tsv"
    wildcard_constraints:
        # only experiments (not regret_rates.tsv and regret_slopes.tsv beside them)
        experiment="|".join(re.escape(name) for name in config["experiments"]),
    # the serial tail: as soon as its runs exist, ahead of the simulations still queued
    priority: 10
    localrule: True
    conda:
        "../envs/analysis.yaml"
    params:
        curves=lambda wildcards: curves_with_files(PLAN.curves[wildcards.experiment]),
        ddof=config["aggregate"]["ddof"],
        float_format=config["aggregate"]["float_format"],
        summaries=config["summaries"],
    script:
        "../../scripts/aggregate.py"
