# Input functions of workflow/rules/replication.smk: which run files each
# replication entry's one look reads.


def replication_look_inputs(wildcards):
    """The run files of a replication entry's one look: every unit on its N fresh seeds."""
    claim = REPLICATION[wildcards.claim]
    files = powered_run_files(claim, PLAN.curves[claim.spec.experiment], RUN_FILE, look_counts(claim, 0, None))
    return [path for unit_files in files.values() for path in unit_files]
