# Per experiment: the tidy per-round table (mean/sd/se/quartiles over seeds of
# Q(t), Q*(t) and Q(t) − Q*(t) per policy label and sweep value), one summary
# row per run (final, tail and early regret, stalled or not) and one per curve
# (stalled runs with an exact interval, means and medians).


rule aggregate:
    localrule: True
    # the serial tail: as soon as its runs exist, ahead of the simulations still queued
    priority: 10
    wildcard_constraints:
        # only experiments (not regret_rates.tsv and regret_slopes.tsv beside them)
        experiment="|".join(re.escape(name) for name in config["experiments"]),
    input:
        experiment_run_files,
    output:
        table=AGGREGATE_FILE,
        runs=RUNS_TABLE,
        curves=CURVES_TABLE,
    params:
        curves=lambda wildcards: curves_with_files(PLAN.curves[wildcards.experiment]),
        ddof=config["aggregate"]["ddof"],
        float_format=config["aggregate"]["float_format"],
        summaries=config["summaries"],
    log:
        f"{LOGS}/aggregate/{{experiment}}.log",
    benchmark:
        f"{BENCHMARKS}/aggregate/{{experiment}}.tsv"
    conda:
        "../envs/analysis.yaml"
    script:
        "../../scripts/aggregate.py"
