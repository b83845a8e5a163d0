# One job per (instance, horizon, policy label, seed): the policy and the
# oracle on the seed's common random numbers, saved as one run file.


wildcard_constraints:
    instance_id="[A-Za-z0-9_.-]+",
    horizon=r"\d+",
    policy="[A-Za-z0-9_.]+",
    seed=r"\d+",
    experiment="[A-Za-z0-9_]+",


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
        # the interpreter running Snakemake (or the conda env's `python`)
        python=JOB_PYTHON,
    log:
        f"{LOGS}/simulate/{{instance_id}}/T{{horizon}}/{{policy}}/seed{{seed}}.log",
    benchmark:
        f"{BENCHMARKS}/simulate/{{instance_id}}/T{{horizon}}/{{policy}}/seed{{seed}}.tsv"
    threads: 1
    resources:
        runtime=10,
        mem_mb=1000,
    conda:
        "../envs/simulate.yaml"
    shell:
        # relative script path: moving the repository must not change params
        "{params.python} scripts/simulate.py --instance {params.instance:q} --policy {params.policy}"
        " --params {params.policy_params:q} --horizon {wildcards.horizon} --seed {wildcards.seed}"
        " --code-hash {params.code_hash} --out {output:q} --log {log:q}"
