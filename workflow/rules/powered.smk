# The powered reading of the claims (cqb.powered, docs/verdicts.md "Two
# readings of every claim") and the powered tuning's second stage
# (cqb.tuning). Every run is still one `simulate` job writing one run file
# keyed by instance/horizon/policy/seed; checkpoints decide which runs the
# next look (or stage) requests at all.

from cqb.powered import look_counts, powered_claims, powered_seeds, run_files as powered_run_files
from cqb.verdicts import check_seed_uses, evaluation_seeds

POWERED = powered_claims(config, PLAN, CLAIM_SPECS)
POWERED_LOOK = f"{RESULTS}/powered/{{claim}}/look{{look}}.json"
POWERED_TABLE = f"{FIGURES}/claims_powered.tsv"
STAGE2 = config["tuning"]["stage2"]
STAGE2_SEEDS = tuple(range(STAGE2["first_seed"], STAGE2["first_seed"] + STAGE2["seeds"]))
CONTENDERS = f"{RESULTS}/tuning/contenders.tsv"

try:  # every use of seeds has its own
    check_seed_uses({"evaluation": evaluation_seeds(PLAN, TUNING_EXPERIMENTS),
                     "tuning (stage 1)": {s for e in TUNING_EXPERIMENTS for c in PLAN.curves[e] for s in c.seeds},
                     "tuning (stage 2)": set(STAGE2_SEEDS),
                     "the powered claims": powered_seeds(POWERED)})
except ConfigError as error:
    sys.exit(f"config error: {error}")


def _state(path):
    return json.loads(Path(path).read_text())


def powered_look_inputs(wildcards):
    """The run files of look `look` of a claim: after the first look, only
    what the previous look left undecided (and the previous state)."""
    claim = POWERED[wildcards.claim]
    look = int(wildcards.look)
    previous = None
    inputs = {}
    if look > 0:
        path = checkpoints.powered_look.get(claim=wildcards.claim, look=look - 1).output.state
        previous = _state(path)
        inputs["previous"] = path
    files = powered_run_files(claim, PLAN.curves[claim.spec.experiment], RUN_FILE,
                              look_counts(claim, look, previous))
    inputs["runs"] = [path for unit_files in files.values() for path in unit_files]
    return inputs


wildcard_constraints:
    claim="[A-Za-z0-9_]+",
    look=r"\d+",


checkpoint powered_look:
    localrule: True
    input:
        unpack(powered_look_inputs),
    output:
        state=POWERED_LOOK,
    params:
        claim=lambda wildcards: POWERED[wildcards.claim],
        curves=lambda wildcards: PLAN.curves[POWERED[wildcards.claim].spec.experiment],
        run_file=lambda wildcards: RUN_FILE,
        summaries=config["summaries"],
    log:
        f"{LOGS}/powered/{{claim}}/look{{look}}.log",
    conda:
        "../envs/analysis.yaml"
    script:
        "../../scripts/powered_look.py"


def powered_last_look(wildcards):
    """The last look of a powered claim: look after look, as long as the
    previous one said continue (each get() waits for that checkpoint). One
    rule per claim, so the claims' looks run side by side."""
    look = 0
    while True:
        path = checkpoints.powered_look.get(claim=wildcards.claim, look=look).output.state
        if not _state(path)["continue"]:
            return path
        look += 1


rule powered_final:
    localrule: True
    input:
        powered_last_look,
    output:
        f"{RESULTS}/powered/{{claim}}/final.json",
    shell:
        "cp {input:q} {output:q}"


rule powered_claims:
    localrule: True
    input:
        [f"{RESULTS}/powered/{name}/final.json" for name in POWERED],
    output:
        table=POWERED_TABLE,
    params:
        claims=list(POWERED),
        specs=POWERED,
        float_format=config["aggregate"]["float_format"],
    log:
        f"{LOGS}/powered/claims.log",
    conda:
        "../envs/analysis.yaml"
    script:
        "../../scripts/powered_claims.py"


def tuning_stage2_files(wildcards):
    """The stage-2 run files: every contender on the stage-2 seeds."""
    import pandas as pd

    path = checkpoints.tuning_contenders.get().output.contenders
    chosen = pd.read_csv(path, sep="\t", dtype=str)
    curves = {c.label: c for e in TUNING_EXPERIMENTS for c in PLAN.curves[e]}
    return [RUN_FILE.format(instance_id=curves[label].instance_id, horizon=curves[label].horizon,
                            policy=label, seed=seed)
            for label in chosen["label"] for seed in STAGE2_SEEDS]
