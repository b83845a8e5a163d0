# The trace files: one per (instance, horizon, seed), shared by every policy's
# run of that seed (workflow/rules/simulate.smk).

TRACE_FILE = f"{RESULTS}/traces/{{instance_id}}/T{{horizon}}/seed{{seed}}.npz"
# (instance id, horizon) -> the instance spec its runs share
TRACE_INSTANCES = {(run.instance_id, str(run.horizon)): run.instance for run in PLAN.runs.values()}


def trace_instance(wildcards):
    key = (wildcards.instance_id, wildcards.horizon)
    if key not in TRACE_INSTANCES:
        raise ValueError(f"no experiment in the config runs instance {key[0]} at T = {key[1]}")
    return TRACE_INSTANCES[key]


def trace_inputs(wildcards):
    instance = trace_instance(wildcards)
    return {"pool": instance["pool"]} if instance["kind"] == "pool" else {}


def trace_instance_json(wildcards, input):
    instance = dict(trace_instance(wildcards))
    if "pool" in input.keys():
        instance["pool"] = input.pool
    return json.dumps(instance, sort_keys=True)
