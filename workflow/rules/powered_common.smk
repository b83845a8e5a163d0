# Input functions of workflow/rules/powered.smk: which run files each look
# of a powered claim, and the powered tuning's second stage, read.


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
    files = powered_run_files(claim, PLAN.curves[claim.spec.experiment], RUN_FILE, look_counts(claim, look, previous))
    inputs["runs"] = [path for unit_files in files.values() for path in unit_files]
    return inputs


def confirmatory_look_inputs(wildcards):
    """The run files of a confirmatory claim's one look: every unit on its N fresh seeds."""
    claim = CONFIRMATORY[wildcards.claim]
    files = powered_run_files(claim, PLAN.curves[claim.spec.experiment], RUN_FILE, look_counts(claim, 0, None))
    return [path for unit_files in files.values() for path in unit_files]


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


def tuning_stage2_files(wildcards):
    """The stage-2 run files: every contender on the stage-2 seeds."""
    import pandas as pd

    path = checkpoints.tuning_contenders.get().output.contenders
    chosen = pd.read_csv(path, sep="\t", dtype=str)
    curves = {c.label: c for e in TUNING_EXPERIMENTS for c in PLAN.curves[e]}
    return [
        RUN_FILE.format(instance_id=curves[label].instance_id, horizon=curves[label].horizon, policy=label, seed=seed)
        for label in chosen["label"]
        for seed in STAGE2_SEEDS
    ]
