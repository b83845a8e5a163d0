"""Figure 8's design in the pipeline's plan: the ``multiverse`` config block
read as a cqb.analysis.multiverse.Multiverse, and its runs joined to the plan's."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from ..analysis.multiverse import NO_CHANGE, Alternative, Multiverse, alternative_curves
from ..errors import ConfigError, config_error
from ..config.experiments import Run, check_values, instance_id


def multiverse_design(config: Mapping, plan, specs) -> Multiverse | None:
    """The ``multiverse`` block of a validated config as a design, checked
    against the plan and the claims (None when it lists no claim)."""
    from ..analysis.powered_reading import claim_units

    block = config.get("multiverse") or {}
    if not block.get("claims"):
        return None
    by_name = {spec.name: spec for spec in specs}
    chosen = []
    for index, name in enumerate(block["claims"]):
        if name not in by_name:
            config_error(f"multiverse.claims[{index}]", name, f"not a claim ({', '.join(by_name)})")
        chosen.append(by_name[name])
    alternatives = [NO_CHANGE]
    known_policies = {curve.policy for curves in plan.curves.values() for curve in curves}
    for index, entry in enumerate(block.get("alternatives", [])):
        key = f"multiverse.alternatives[{index}]"
        if entry["name"] in {a.name for a in alternatives}:
            config_error(f"{key}.name", entry["name"], "listed twice (or 'default', the reserved column)")
        for policy in entry.get("policies", []):
            if policy not in known_policies:
                config_error(f"{key}.policies", policy, f"not a policy any experiment runs ({sorted(known_policies)})")
        for experiment in list(entry.get("experiments", [])) + list(entry.get("experiment_params", {})):
            if experiment not in plan.curves:
                config_error(f"{key}.experiments", experiment, "not an experiment")
        alternatives.append(Alternative(entry["name"], entry["choice"], entry["label"],
                                        tuple(entry.get("policies", [])), dict(entry.get("params", {})),
                                        {k: dict(v) for k, v in entry.get("experiment_params", {}).items()},
                                        dict(entry.get("instance", {})), tuple(entry.get("experiments", [])),
                                        entry.get("note", "")))
    units = {spec.name: claim_units(spec, plan.curves[spec.experiment]) for spec in chosen}
    first, n_seeds = int(block["first_seed"]), int(block["seeds"])
    excluded = {}
    for key, why in (block.get("excluded_seeds") or {}).items():
        try:
            seed = int(key)  # YAML gives an int key, --config a string
        except ValueError:
            config_error("multiverse.excluded_seeds", key, "not an integer seed")
        if first <= seed < first + n_seeds:  # a layered config (smoke.yaml) may draw other seeds
            excluded[seed] = why
    return Multiverse(first, n_seeds, float(block["alpha"]), tuple(chosen), tuple(alternatives),
                      dict(config.get("claim_margins") or {}), units, plan.curves, instance_id, excluded)


def multiverse_runs(multiverse: Multiverse) -> dict:
    """The plan's Runs of the multiverse (run key → cqb.config.experiments.Run),
    their parameters checked by the policies' dataclasses."""
    runs = {}
    for curve in multiverse.run_curves():
        check_values(curve.policy, curve.params, curve.instance, curve.horizon,
                     f"multiverse: parameters of {curve.label} in {curve.experiment}")
        runs[curve.run_key] = Run(curve.instance_id, curve.horizon, curve.label, curve.policy, curve.params,
                                  curve.instance, curve.seeds, (f"multiverse ({curve.experiment})",))
    return runs


def merge_runs(plan_runs: dict, runs: Mapping) -> None:
    """Add the multiverse's runs to the plan's (in place): a run key the plan
    already has must play the same policy, parameters and instance (its
    seeds are joined)."""
    for key, run in runs.items():
        if key in plan_runs:
            known = plan_runs[key]
            if (known.policy, known.params, known.instance) != (run.policy, run.params, run.instance):
                raise ConfigError(f"the multiverse's run {key} differs from {known.experiments[0]}'s "
                                  f"({known.params} vs {run.params}); rename the alternative")
            plan_runs[key] = replace(known, seeds=tuple(sorted(set(known.seeds) | set(run.seeds))),
                                     experiments=tuple(dict.fromkeys(known.experiments + run.experiments)))
        else:
            plan_runs[key] = run


def alternative_files(multiverse: Multiverse, name: str, run_file: str) -> list[str]:
    """The run files one column of Figure 8 reads (the inputs of its runs table)."""
    curves = alternative_curves(multiverse, multiverse.alternative(name), run_file)
    return [path for experiment in curves.values() for curve in experiment for path in curve.files]
