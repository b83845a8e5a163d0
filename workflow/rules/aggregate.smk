# One tidy table per experiment: mean/sd/se over seeds of Q(t), Q*(t) and
# Q(t) − Q*(t) for every policy label and sweep value.


rule aggregate:
    localrule: True
    wildcard_constraints:
        # only experiments (not regret_rates.tsv and regret_slopes.tsv beside them)
        experiment="|".join(re.escape(name) for name in config["experiments"]),
    input:
        experiment_run_files,
    output:
        AGGREGATE_FILE,
    params:
        curves=lambda wildcards: aggregate_curves(wildcards.experiment),
        ddof=config["aggregate"]["ddof"],
        float_format=config["aggregate"]["float_format"],
    log:
        f"{LOGS}/aggregate/{{experiment}}.log",
    conda:
        "../envs/analysis.yaml"
    script:
        "../../scripts/aggregate.py"
