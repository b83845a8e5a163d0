# One job per (instance, horizon, policy label, seed): the policy and the
# oracle on the seed's common random numbers, saved as one run file by the
# installed `cqb run` command (no Snakemake import in the job: short start-up).
# The common random numbers are drawn once per (instance, horizon, seed) by
# the trace rule (`cqb run --draw-trace`: the contexts of the rejection
# sampler, θ*, Q*) and read by every policy's job of that seed (`--trace`):
# the same run file as a job that draws them itself (tests/test_sim_trace.py).
# Traces are kept, not temp(): a rerun of one policy, or the candidate
# benchmark beside the paper's run files, would otherwise redraw the trace,
# and Snakemake reruns every run whose input another job of the DAG rewrites
# ("input files updated by another job"; ancient() does not prevent that),
# so every other policy of that seed in the same target would run again.
# With the run server, the job is its compiled client instead, CQB_RUN_CLIENT
# (docs/jobs.md), where that names an executable file, else `cqb`: the same
# arguments, the same run file, a few milliseconds of CPU where a Python
# client takes some 35.
# No `benchmark:` here: its psutil thread per job cost Snakemake more CPU than
# the sub-second jobs themselves (docs/pipeline.md); the log's last line gives
# the job's wall and CPU time instead.


wildcard_constraints:
    instance_id="[A-Za-z0-9_.-]+",
    horizon=r"\d+",
    policy="[A-Za-z0-9_.]+",
    seed=r"\d+",
    experiment="[A-Za-z0-9_]+",


include: "trace_common.smk"


rule trace:
    input:
        unpack(trace_inputs),
    output:
        TRACE_FILE,
    params:
        instance=trace_instance_json,
        code_hash=CODE_HASH,
    log:
        f"{LOGS}/trace/{{instance_id}}/T{{horizon}}/seed{{seed}}.log",
    threads: 1
    resources:
        runtime=10,
        mem_mb=1000,
    conda:
        "../envs/simulate.yaml"
    shell:
        '"${{CQB_RUN_CLIENT:-cqb}}" run --draw-trace --instance-spec {params.instance:q}'
        " --horizon {wildcards.horizon} --seed {wildcards.seed}"
        " --code-hash {params.code_hash} --out {output:q} 2> {log:q}"


rule simulate:
    input:
        unpack(simulate_inputs),
        trace=TRACE_FILE,
    output:
        RUN_FILE,
    params:
        instance=instance_json,
        policy=lambda wildcards: run_of(wildcards).policy,
        policy_params=lambda wildcards: json.dumps(run_of(wildcards).params, sort_keys=True),
        # editing the simulation code reruns the simulations
        code_hash=CODE_HASH,
    log:
        f"{LOGS}/simulate/{{instance_id}}/T{{horizon}}/{{policy}}/seed{{seed}}.log",
    threads: 1
    resources:
        runtime=10,
        mem_mb=1000,
    conda:
        "../envs/simulate.yaml"
    shell:
        'cqb_job() {{ if [ -x "${{CQB_RUN_CLIENT:-}}" ]; then "$CQB_RUN_CLIENT" "$@"; else cqb "$@"; fi; }}; '
        'cqb_job run --instance-spec {params.instance:q} --policy {params.policy}'
        " --params {params.policy_params:q} --horizon {wildcards.horizon} --seed {wildcards.seed}"
        " --trace {input.trace:q} --code-hash {params.code_hash} --out {output:q} 2> {log:q}"
