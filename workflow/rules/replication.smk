# The replication study (cqb.studies.replication, docs/verdicts.md "The
# replication study"): every decided verdict judged again on its own fresh
# seeds, one look per registered entry (the powered look's script), then the
# table of original against replicated verdicts. Its own target
# `replication` unless replication.in_all.

from cqb.studies.replication import replication_claims

REPLICATION = replication_claims(config, PLAN, REGISTERED_CLAIMS)
REPLICATION_STATE = f"{RESULTS}/replication/{{claim}}/look{{look}}.json"
REPLICATION_TABLE = f"{FIGURES}/claims_replication.tsv"


include: "replication_common.smk"


if REPLICATION:

    rule replication_look:
        input:
            runs=replication_look_inputs,
        output:
            state=REPLICATION_STATE,
        log:
            f"{LOGS}/replication/{{claim}}/look{{look}}.log",
        priority: 20
        localrule: True
        conda:
            "../envs/analysis.yaml"
        params:
            claim=lambda wildcards: REPLICATION[wildcards.claim],
            curves=lambda wildcards: PLAN.curves[REPLICATION[wildcards.claim].spec.experiment],
            run_file=lambda wildcards: RUN_FILE,
            summaries=config["summaries"],
        script:
            "../../scripts/powered_look.py"

    rule replication_table:
        input:
            states=[REPLICATION_STATE.format(claim=name, look=0) for name in REPLICATION],
            powered=POWERED_TABLE,
            per_policy=f"{FIGURES}/claims_per_policy.tsv",
        output:
            table=REPLICATION_TABLE,
        log:
            f"{LOGS}/replication/table.log",
        localrule: True
        conda:
            "../envs/analysis.yaml"
        params:
            claims=list(REPLICATION),
            config=config,
            float_format=config["aggregate"]["float_format"],
        script:
            "../../scripts/replication_table.py"

    rule replication:
        input:
            REPLICATION_TABLE,
        localrule: True
