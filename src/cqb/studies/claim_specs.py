"""The config side of the verdicts: claim specs, tuning set-up and checks.

Pure functions of the validated config and the plan (:mod:`cqb.config.experiments`),
so the workflow's rules stay thin and the checks are tested without Snakemake.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..analysis.claims.registry import READING_FIELDS, ClaimSpec, Reading
from ..analysis.curves import format_value
from ..config.experiments import resolve_label
from ..config.schema import instance_sweep_keys
from ..errors import ConfigError, config_error


def claim_specs(config: Mapping, plan) -> list[ClaimSpec]:
    """The ``claims`` of the config as ClaimSpecs, each checked against the
    plan: its experiment exists, runs its policies and has its sweep values."""
    specs = []
    for index, entry in enumerate(config.get("claims", [])):
        key = f"claims[{index}] ({entry['name']})"
        experiment = entry["experiment"]
        if experiment not in plan.curves:
            config_error(f"{key}.experiment", experiment, f"not an experiment ({', '.join(plan.curves)})")
        curves = plan.curves[experiment]
        labels = {curve.label for curve in curves}
        for policy in entry["policies"]:
            if policy not in labels:
                config_error(f"{key}.policies", policy, f"not run in experiment {experiment} ({sorted(labels)})")
        values = {curve.sweep_text for curve in curves}
        sweep_values = tuple(format_value(v) if not isinstance(v, str) else v
                             for v in entry.get("sweep_values", ()))
        for value in sweep_values:
            if value not in values:
                config_error(f"{key}.sweep_values", value, f"not a sweep value of {experiment} ({sorted(values)})")
        readings = tuple(Reading(r["name"], r["why"],
                                 tuple((f, float(r[f]) if f == "threshold" else r[f])
                                       for f in READING_FIELDS if f in r))
                         for r in entry.get("readings", ()))
        try:
            specs.append(ClaimSpec(name=entry["name"], statement=entry["statement"], kind=entry["kind"],
                                   experiment=experiment, policies=tuple(entry["policies"]),
                                   figure=entry.get("figure", ""),
                                   metric=entry.get("metric", "tail_regret"),
                                   direction=entry.get("direction", "increasing"),
                                   sweep_values=sweep_values, threshold=float(entry.get("threshold", 0.0)),
                                   source=entry.get("source", "paper"),
                                   **{f: entry[f] for f in ("quote", "section", "quantity", "reading", "why",
                                                            "testable", "by_construction") if f in entry},
                                   readings=readings, per_policy=bool(entry.get("per_policy", False)),
                                   per_policy_by_construction=tuple(
                                       (entry.get("per_policy_by_construction") or {}).items())))
        except ValueError as error:
            raise ConfigError(f"invalid config value {key}: {error}") from None
    from ..analysis.sensitivity import grid_claims

    specs += grid_claims(plan, specs)
    names = [spec.name for spec in specs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        config_error("claims", duplicates, "claim names must be unique")
    return specs


def claim_experiments(specs) -> list[str]:
    return list(dict.fromkeys(spec.experiment for spec in specs))


def tuning_setup(config: Mapping, plan) -> tuple[list[str], dict]:
    """(tuning experiments, configured values) where configured values are
    {policy: {tuned parameter: value}} as the reference experiment's config
    resolves them. Refuses tuning seeds that any other experiment uses."""
    tuning = config.get("tuning", {})
    experiments = list(tuning.get("experiments", []))
    for name in experiments:
        if name not in plan.curves:
            config_error("tuning.experiments", name, f"not an experiment ({', '.join(plan.curves)})")
        curves = plan.curves[name]
        tuned_param = curves[0].sweep_param
        if not tuned_param or tuned_param == "horizon" or tuned_param in instance_sweep_keys():
            config_error("tuning.experiments", name, "needs a sweep over a policy parameter (the grid)")
    tuning_seeds = {seed for name in experiments for curve in plan.curves[name] for seed in curve.seeds}
    for other, curves in plan.curves.items():
        if other in experiments:
            continue
        shared = tuning_seeds & {seed for curve in curves for seed in curve.seeds}
        if shared:
            config_error(f"experiments.{other}", f"seeds {sorted(shared)[:5]}…",
                         "shared with the tuning experiments; tuning seeds must be disjoint from every "
                         "reported seed (move first_seed)")
    reference = tuning.get("reference")
    configured: dict[str, dict] = {}
    if reference is not None:
        if reference not in config["experiments"]:
            config_error("tuning.reference", reference, f"not an experiment ({', '.join(plan.curves)})")
        for name in experiments:
            param = plan.curves[name][0].sweep_param
            for label in dict.fromkeys(curve.base_label for curve in plan.curves[name]):
                _, params, _ = resolve_label(config, label, reference)
                configured.setdefault(label, {})[param] = params.get(param)
    return experiments, configured


def check_seed_uses(uses: Mapping[str, set]) -> None:
    """Refuse a config in which two uses of seeds overlap: ``uses`` maps a
    use (evaluation, tuning, the powered claims, the powered tuning, the
    confirmatory and replication studies, the multiverse) to its
    seeds; one line names the two uses and the first shared seeds."""
    names = list(uses)
    for i, first in enumerate(names):
        for second in names[i + 1:]:
            shared = set(uses[first]) & set(uses[second])
            if shared:
                config_error(f"seeds of {second}", f"{sorted(shared)[:5]}…",
                             f"shared with {first}; every use of seeds (evaluation, a second stage, tuning, "
                             "powered claims, powered tuning) must have its own (move its first_seed)")


def evaluation_seeds(plan, tuning_experiments) -> set:
    """Every first-stage seed an experiment other than the tuning experiments runs."""
    return {seed for name, curves in plan.curves.items() if name not in tuning_experiments
            for curve in curves for seed in set(curve.seeds) - set(curve.second_stage_seeds)}


def second_stage_seeds(plan) -> set:
    """Every seed of an experiment's second stage (``second_stage``, Figure 5)."""
    return {seed for curves in plan.curves.values() for curve in curves for seed in curve.second_stage_seeds}


def seed_uses(config: Mapping, plan, tuning_experiments, powered, confirmatory, multiverse=None) -> dict:
    """Every use of seeds of a config, each with its seeds, for :func:`check_seed_uses`:
    ``powered`` and ``confirmatory`` are their designs' claims, ``multiverse`` its design or None."""
    from ..analysis.powered_reading import powered_seeds
    from .confirmatory import confirmatory_seeds
    from .replication import replication_seeds

    stage2 = config["tuning"]["stage2"]
    uses = {
        "evaluation": evaluation_seeds(plan, tuning_experiments),
        "Figure 5's second stage": second_stage_seeds(plan),
        "tuning (stage 1)": {s for e in tuning_experiments for c in plan.curves[e] for s in c.seeds},
        "tuning (stage 2)": set(range(stage2["first_seed"], stage2["first_seed"] + stage2["seeds"])),
        "the powered claims": powered_seeds(powered),
        "the confirmatory study": confirmatory_seeds(confirmatory),
        "the replication study": replication_seeds(config),
        "retired powered seeds (seen)": retired_seeds(config),
    }
    if multiverse:
        uses["the multiverse"] = set(multiverse.seeds)
    return uses


def retired_seeds(config: Mapping) -> set:
    """The seeds of earlier powered designs whose results were seen
    (``powered.retired_seeds``, inclusive ranges): no use may reach them."""
    seeds = set()
    for index, (first, last) in enumerate((config.get("powered") or {}).get("retired_seeds", [])):
        if last < first:
            config_error(f"powered.retired_seeds[{index}]", [first, last], "must be [first, last] with first ≤ last")
        seeds.update(range(int(first), int(last) + 1))
    return seeds


REGISTRY_SECTIONS = ("claims", "claim_margins", "powered", "confirmatory", "summaries", "calibration")


def registry_hash(config: Mapping) -> str:
    """The hash of the claims registry and the pre-registered design (the
    claims, margins, powered design, run-summary settings and calibration of
    the config), recorded in the claims tables' provenance."""
    from ..config.schema import config_hash

    return config_hash({key: config.get(key) for key in REGISTRY_SECTIONS})
