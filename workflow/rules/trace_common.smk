# The trace cache: one file per (instance, horizon, seed), drawn by the first
# simulate job of that seed that finds none and read by the others
# (workflow/rules/simulate.smk). A param of the simulate rule, not an output.

TRACE_FILE = f"{RESULTS}/traces/{{instance_id}}/T{{horizon}}/seed{{seed}}.npz"


def trace_file(wildcards):
    return TRACE_FILE.format(instance_id=wildcards.instance_id, horizon=wildcards.horizon, seed=wildcards.seed)
