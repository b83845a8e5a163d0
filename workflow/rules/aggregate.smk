# One tidy table per experiment: mean/sd/se over seeds of Q(t), Q*(t) and
# Q(t) − Q*(t) for every policy label and sweep value.


def experiment_curves(experiment):
    """The curves of an experiment with their run files, in config order."""
    return [
        {
            "policy": curve["label"],
            "sweep_param": curve["sweep_param"],
            "sweep_value": "" if curve["sweep_value"] is None else format_value(curve["sweep_value"]),
            "files": run_files(curve),
        }
        for curve in EXPERIMENT_CURVES[experiment]
    ]


def experiment_run_files(wildcards):
    return [path for curve in experiment_curves(wildcards.experiment) for path in curve["files"]]


rule aggregate:
    localrule: True
    input:
        experiment_run_files,
    output:
        AGGREGATE_FILE,
    params:
        curves=lambda wildcards: experiment_curves(wildcards.experiment),
        ddof=config["aggregate"]["ddof"],
        float_format=config["aggregate"]["float_format"],
    log:
        RESULTS + "/logs/aggregate/{experiment}.log",
    conda:
        "../envs/analysis.yaml"
    script:
        "../../scripts/aggregate.py"
