# One job per (instance, horizon, policy label, seed): the policy and the
# oracle on the seed's common random numbers, saved as one run file by the
# installed `cqb run` command (no Snakemake import in the job: short start-up).
# The common random numbers (the contexts of the rejection sampler, θ*, Q*)
# are drawn once per (instance, horizon, seed) through a trace cache beside
# the results, `--trace-cache FILE` (cqb.sim.simulate.cached_trace): the
# first job of the seed that finds no valid file draws the trace, writes it
# atomically and plays on it; the others read it; a file of other simulation
# code, or of another spec, horizon or seed, or a corrupt or truncated one, is
# drawn again and replaced, with one warning line in the job's log. Drawn, read or given
# with --trace, the run file is the same (tests/test_sim_trace.py). The trace
# files are not Snakemake outputs: no DAG edge, so a rerun of one policy
# never reruns the other policies of its seed, and deleting the folder only
# costs redraws. Two jobs of a seed that race both draw the same content;
# each lands by its own rename, so a reader never sees a partial file.
# With the run server, the job is its compiled client instead, CQB_RUN_CLIENT
# (docs/jobs.md), where that names an executable file, else `cqb`: the same
# arguments, the same run file, a few milliseconds of CPU where a Python
# client takes some 35. Either replaces the job's shell (exec): no fork.
# The command runs in `sh`, not bash (execution.simulate_in_sh): a shorter
# start-up for each of the thousands of jobs.
# No `benchmark:` here: its psutil thread per job cost Snakemake more CPU than
# the sub-second jobs themselves (docs/pipeline.md); the log's last line gives
# the job's wall and CPU time instead.


import shutil


wildcard_constraints:
    instance_id="[A-Za-z0-9_.-]+",
    horizon=r"\d+",
    policy="[A-Za-z0-9_.]+",
    seed=r"\d+",
    experiment="[A-Za-z0-9_]+",


include: "trace_common.smk"


# Snakemake's shell_exec resource: the shell of this rule's jobs only, the
# `sh` on PATH, found once here rather than by Snakemake for every job.
SIMULATE_SHELL = (
    {"shell_exec": shutil.which("sh")} if config["execution"]["simulate_in_sh"] and shutil.which("sh") else {}
)


rule simulate:
    input:
        unpack(simulate_inputs),
    output:
        RUN_FILE,
    log:
        f"{LOGS}/simulate/{{instance_id}}/T{{horizon}}/{{policy}}/seed{{seed}}.log",
    conda:
        "../envs/simulate.yaml"
    threads: 1
    resources:
        **SIMULATE_SHELL,
        runtime=10,
        mem_mb=1000,
    params:
        instance=instance_json,
        policy=lambda wildcards: run_of(wildcards).policy,
        policy_params=lambda wildcards: json.dumps(run_of(wildcards).params, sort_keys=True),
        trace=trace_file,
        # editing the simulation code reruns the simulations
        code_hash=CODE_HASH,
    shell:
        'cqb_job() {{ if [ -x "${{CQB_RUN_CLIENT:-}}" ]; then exec "$CQB_RUN_CLIENT" "$@"; else exec cqb "$@"; fi; }}; '
        "cqb_job run --instance-spec {params.instance:q} --policy {params.policy}"
        " --params {params.policy_params:q} --horizon {wildcards.horizon} --seed {wildcards.seed}"
        " --trace-cache {params.trace:q} --code-hash {params.code_hash} --out {output:q} 2> {log:q}"
