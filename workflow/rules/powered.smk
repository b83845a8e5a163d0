# The powered reading of the claims (cqb.powered, docs/verdicts.md "Two
# readings of every claim") and the powered tuning's second stage
# (cqb.tuning). Every run is still one `simulate` job writing one run file
# keyed by instance/horizon/policy/seed; checkpoints decide which runs the
# next look (or stage) requests at all.

from cqb.analysis.powered_reading import look_counts, powered_claims, run_files as powered_run_files
from cqb.studies.confirmatory import confirmatory_claims
from cqb.studies.claim_specs import check_seed_uses, seed_uses

POWERED = powered_claims(config, PLAN, REGISTERED_CLAIMS)
POWERED_LOOK = f"{RESULTS}/powered/{{claim}}/look{{look}}.json"
POWERED_TABLE = f"{FIGURES}/claims_powered.tsv"
POWERED_READINGS = f"{FIGURES}/claims_powered_readings.tsv"
STAGE2 = config["tuning"]["stage2"]
STAGE2_SEEDS = tuple(range(STAGE2["first_seed"], STAGE2["first_seed"] + STAGE2["seeds"]))
CONTENDERS = f"{RESULTS}/tuning/contenders.tsv"
# the confirmatory study (cqb.studies.confirmatory): one look per claim, as a powered look
CONFIRMATORY = confirmatory_claims(config, PLAN, REGISTERED_CLAIMS)
CONFIRMATORY_STATE = f"{RESULTS}/confirmatory/{{claim}}/look{{look}}.json"
CONFIRMATORY_STATES = [CONFIRMATORY_STATE.format(claim=name, look=0) for name in CONFIRMATORY]
CONFIRMATORY_TABLE = f"{FIGURES}/claims_confirmatory.tsv"


include: "powered_common.smk"


# every use of seeds has its own
or_config_error(check_seed_uses, seed_uses(config, PLAN, TUNING_EXPERIMENTS, POWERED, CONFIRMATORY))


wildcard_constraints:
    claim="[A-Za-z0-9_]+",
    look=r"\d+",


checkpoint powered_look:
    input:
        unpack(powered_look_inputs),
    output:
        state=POWERED_LOOK,
    log:
        f"{LOGS}/powered/{{claim}}/look{{look}}.log",
    priority: 20
    localrule: True
    conda:
        "../envs/analysis.yaml"
    params:
        claim=lambda wildcards: POWERED[wildcards.claim],
        curves=lambda wildcards: PLAN.curves[POWERED[wildcards.claim].spec.experiment],
        run_file=lambda wildcards: RUN_FILE,
        summaries=config["summaries"],
    script:
        "../../scripts/powered_look.py"


rule powered_final:
    input:
        powered_last_look,
    output:
        f"{RESULTS}/powered/{{claim}}/final.json",
    log:
        f"{LOGS}/powered/{{claim}}/final.log",
    priority: 10
    localrule: True
    conda:
        "../envs/analysis.yaml"
    shell:
        # a shell copy, not a run: block (which would start a whole Snakemake process)
        "cp {input:q} {output:q} 2> {log:q}"


rule powered_claims:
    input:
        [f"{RESULTS}/powered/{name}/final.json" for name in POWERED],
    output:
        table=POWERED_TABLE,
        readings=POWERED_READINGS,
    log:
        f"{LOGS}/powered/claims.log",
    priority: 10
    localrule: True
    conda:
        "../envs/analysis.yaml"
    params:
        claims=list(POWERED),
        specs=POWERED,
        float_format=config["aggregate"]["float_format"],
    script:
        "../../scripts/powered_claims.py"


# The confirmatory study: its one look per claim on its fresh seeds (the
# powered look's script), and its table.
rule confirmatory_look:
    input:
        runs=confirmatory_look_inputs,
    output:
        state=CONFIRMATORY_STATE,
    log:
        f"{LOGS}/confirmatory/{{claim}}/look{{look}}.log",
    priority: 20
    localrule: True
    conda:
        "../envs/analysis.yaml"
    params:
        claim=lambda wildcards: CONFIRMATORY[wildcards.claim],
        curves=lambda wildcards: PLAN.curves[CONFIRMATORY[wildcards.claim].spec.experiment],
        run_file=lambda wildcards: RUN_FILE,
        summaries=config["summaries"],
    script:
        "../../scripts/powered_look.py"


rule confirmatory_claims:
    input:
        CONFIRMATORY_STATES,
    output:
        table=CONFIRMATORY_TABLE,
        readings=f"{FIGURES}/claims_confirmatory_readings.tsv",
    log:
        f"{LOGS}/confirmatory/claims.log",
    priority: 10
    localrule: True
    conda:
        "../envs/analysis.yaml"
    params:
        claims=list(CONFIRMATORY),
        specs=CONFIRMATORY,
        float_format=config["aggregate"]["float_format"],
    script:
        "../../scripts/powered_claims.py"
