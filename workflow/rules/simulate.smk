# One job per (instance, horizon, policy label, seed): the policy and the
# oracle on the seed's common random numbers, saved as one run file.


wildcard_constraints:
    instance_id="[A-Za-z0-9_.-]+",
    horizon=r"\d+",
    policy="[A-Za-z0-9_.]+",
    seed=r"\d+",
    experiment="[A-Za-z0-9_]+",


def run_entry(wildcards):
    key = (wildcards.instance_id, wildcards.horizon, wildcards.policy)
    if key not in RUNS:
        raise ValueError(f"no experiment in the config runs {key}")
    return RUNS[key]


def simulate_inputs(wildcards):
    spec = run_entry(wildcards)["spec"]
    # a pool instance needs its processed data file (built by workflow/rules/data.smk)
    return {"pool": spec["pool"]} if spec["kind"] == "pool" else {}


def python_for_jobs():
    """`python` of the job's conda env, else the interpreter running Snakemake."""
    uses_conda = "conda" in {str(m).lower() for m in workflow.deployment_settings.deployment_method}
    return "python" if uses_conda else sys.executable


rule simulate:
    input:
        unpack(simulate_inputs),
    output:
        RUN_FILE,
    params:
        instance=lambda wildcards, input: json.dumps(
            {**run_entry(wildcards)["spec"], **({"pool": input.pool} if "pool" in input.keys() else {})},
            sort_keys=True,
        ),
        policy=lambda wildcards: run_entry(wildcards)["policy"],
        policy_params=lambda wildcards: json.dumps(run_entry(wildcards)["params"], sort_keys=True),
        # editing the simulation code reruns the simulations
        code_hash=CODE_HASH,
        python=python_for_jobs(),
        command=workflow.source_path("../../scripts/simulate.py"),
    log:
        RESULTS + "/logs/simulate/{instance_id}/T{horizon}/{policy}/seed{seed}.log",
    benchmark:
        RESULTS + "/benchmarks/simulate/{instance_id}/T{horizon}/{policy}/seed{seed}.tsv"
    threads: 1
    resources:
        runtime=10,
        mem_mb=1000,
    conda:
        "../envs/simulate.yaml"
    shell:
        "{params.python} {params.command:q} --instance {params.instance:q} --policy {params.policy}"
        " --params {params.policy_params:q} --horizon {wildcards.horizon} --seed {wildcards.seed}"
        " --code-hash {params.code_hash} --out {output:q} --log {log:q}"
