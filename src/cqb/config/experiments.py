"""The experiment model: from the validated config to runs, curves and figures.

The workflow (``workflow/rules/common.smk``) calls
:func:`cqb.config.schema.validate_config` and :func:`build_plan` once at parse time; everything here is a pure function of
the config dict, so it is tested without Snakemake (tests/test_config_experiments.py).

* A :class:`Run` is one (instance, horizon, policy label) with its seeds: one
  run file per seed. Runs shared by several experiments are one Run.
* A :class:`Curve` is one line of an experiment's table: a policy label at one
  sweep value, over its seeds.
* A :class:`~cqb.config.panels.FigureSpec` says which curves each panel of a figure draws, with
  their legends; :mod:`cqb.figures.plotting` draws it from the aggregate tables.

Policy parameters have one source of truth, the registry's parameter
dataclasses: :mod:`cqb.config.schema` derives their part of the config schema
(types from the annotations), and their values are checked by the dataclass
itself (``resolve_params``) when the runs are built.

This module imports no numpy, pandas or jsonschema at import time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path

from ..analysis.curves import Curve, format_value
from ..errors import ConfigError, config_error
from ..presentation import display_name
from ..sim.streams import family_of, stream_kind, stream_params
from .panels import figure_spec
from .schema import (SWEPT_INSTANCE_KEYS, _registry, accepted_parameters, at_horizon, instance_sweep_keys,
                     parameter_fields)


# ---------------------------------------------------------------- names

# The paper's base instance (Figure 2; config experiments.synthetic_base): K = 5,
# d = 5, λ = 0.7, ϵ = 0.1. The benchmarks and tests that need "the base instance" use this.
BASE_INSTANCE = {"kind": "synthetic", "n_servers": 5, "dim": 5, "arrival_rate": 0.7, "slack": 0.1}

INSTANCE_KEY_TAGS = dict(zip(SWEPT_INSTANCE_KEYS, ("K", "d", "lam", "eps", "acc")))  # in instance-id order
# the rate figures' tables beside the experiments' (workflow/rules/rates.smk)
RESERVED_TABLES = ("regret_rates", "regret_slopes", "adversarial_regret_rates", "adversarial_regret_slopes")


def instance_id(spec: Mapping) -> str:
    """Readable canonical key of an instance spec, e.g. synth_K5_d5_lam0.7_eps0.1_acc0.005:
    its stream's tag, its family's keys, then every parameter of its stream
    (defaults included), so instances differing in any of them never share a
    run path (cqb.sim.streams declares the streams and their tags)."""
    kind = stream_kind(spec["kind"])
    if kind.family == "synthetic":
        words = [kind.tag] + [f"{tag}{format_value(spec[key])}" for key, tag in INSTANCE_KEY_TAGS.items() if key in spec]
    else:
        pool = Path(spec["pool"])
        dataset = pool.parent.name if pool.stem == "instance" else pool.stem
        words = [kind.tag, dataset, f"lam{format_value(spec['arrival_rate'])}"]
    params = stream_params(kind, dict(spec))
    words += [f"{item.name}{format_value(getattr(params, item.name))}" for item in fields(params)]
    return "_".join(words)


# ---------------------------------------------------------------- the experiment model


@dataclass(frozen=True)
class Run:
    """One (instance, horizon, policy label): one run file per seed."""

    instance_id: str
    horizon: int
    label: str
    policy: str
    params: dict  # every parameter of the policy, defaults included (null = derived per run)
    instance: dict
    seeds: tuple[int, ...]
    experiments: tuple[str, ...]


@dataclass(frozen=True)
class GridCell:
    """One (dataset, construction column) of Figure 7's grid that has its experiment."""

    dataset: str
    column: str  # data.sensitivity.columns[].name
    label: str
    choice: str  # which open choice the column varies
    experiment: str  # <dataset> for the column `default`, else <dataset>_<column>


@dataclass(frozen=True)
class Plan:
    """Everything the workflow runs and draws, from one config."""

    runs: dict  # Curve.run_key → Run
    curves: dict  # experiment → [Curve] in config order
    figures: dict  # figure name → FigureSpec
    rate_experiments: tuple[str, ...]  # Figure 5's panels: rates.experiment, then extra_experiments
    grid: tuple[GridCell, ...]  # Figure 7's cells, column by column
    adversarial_experiments: tuple[str, ...] = ()  # Figure 9's rate panels (adversarial.rate_experiments)

    @property
    def rates_experiment(self) -> str | None:
        """The experiment of Figure 5's first panel (None: no Figure 5)."""
        return self.rate_experiments[0] if self.rate_experiments else None

    def run_files(self, curve: Curve, run_file: str) -> list[str]:
        return list(curve.with_files(run_file).files)

    def rates_runs(self, run_file: str) -> list[tuple[str, int, int, str]]:
        """(label, T, seed, run file) of every run of the rates experiment, in config order."""
        return [(curve.label, curve.horizon, seed, path) for curve in self.curves[self.rates_experiment]
                for seed, path in zip(curve.seeds, self.run_files(curve, run_file))]


def _defaults(policy: str) -> dict:
    return {key: default for key, (_, default) in parameter_fields(_registry()[policy].params).items()}


def resolve_label(config: Mapping, label: str, experiment_name: str) -> tuple[str, dict, str]:
    """(policy name, every parameter, display name) of a label within an experiment:
    the dataclass defaults, then defaults.policy_params (the keys the policy
    takes), defaults.per_policy, the variant's params, the experiment's."""
    variants = config["policy_variants"]
    if label in variants:
        policy, variant_params = variants[label]["policy"], variants[label].get("params", {})
    else:
        policy, variant_params = label, {}
    registry = _registry()
    if policy not in registry:
        config_error(f"experiments.{experiment_name}.policies", label,
                     f"unknown policy; known: {', '.join(sorted(registry))}")
    display = variants[label].get("display", label) if label in variants else display_name(policy)
    accepted = accepted_parameters(policy)
    defaults = config["defaults"]
    params = _defaults(policy)
    params.update({k: v for k, v in defaults["policy_params"].items() if k in accepted})
    params.update(defaults["per_policy"].get(policy, {}))
    params.update(variant_params)
    params.update(config["experiments"][experiment_name]["policy_params"].get(label, {}))
    unknown = sorted(set(params) - accepted)
    if unknown:
        config_error(f"parameters of policy {label!r} (experiment {experiment_name})", unknown,
                     f"{policy} accepts only {sorted(accepted) or 'no parameters'}")
    return policy, params, display


def check_values(policy: str, params: dict, instance: Mapping, horizon: int, key: str) -> None:
    """The policy's dataclass checks the values, with the run's K, d, T, λ and ϵ
    (a pool instance's K and d are known only once its file is built: 1 here,
    which no parameter check depends on; its slack is unknown, as in a run)."""
    from ..sim.policies import PolicyEnv, resolve_params

    synthetic = family_of(instance) == "synthetic"
    n_servers = instance.get("n_servers", 1)
    # Both kinds know θ*, hence ‖θ*_k‖ (norm_bound_kind "per_server"); its values do not matter here.
    env = PolicyEnv(n_servers=n_servers, dim=instance.get("dim", 1), horizon=horizon,
                    arrival_rate=instance["arrival_rate"], slack=instance.get("slack") if synthetic else None,
                    norm_bound=None if synthetic else 1.0, server_norm_bounds=(1.0,) * n_servers)
    try:
        resolve_params(policy, params, env)
    except (ValueError, TypeError) as error:
        raise ConfigError(f"invalid config value {key}: {error}") from None


def expand_experiment(config: Mapping, name: str) -> list[Curve]:
    """The curves of an experiment: one per (label, sweep value), in config order."""
    experiment = config["experiments"][name]
    labels = list(experiment["policies"]) + list(experiment["variants"])
    for label in experiment["variants"]:
        if label not in config["policy_variants"]:
            config_error(f"experiments.{name}.variants", label, "not a key of policy_variants")
    for label in experiment["policy_params"]:
        if label not in labels:
            config_error(f"experiments.{name}.policy_params", label, f"not a policy of this experiment ({labels})")
    resolved = {label: resolve_label(config, label, name) for label in labels}
    sweep = experiment["sweep"] or {}
    sweep_param, sweep_values = next(iter(sweep.items())) if sweep else ("", [None])
    policy_sweep = bool(sweep_param) and sweep_param != "horizon" and sweep_param not in instance_sweep_keys()
    if policy_sweep and not any(sweep_param in accepted_parameters(policy) for policy, _, _ in resolved.values()):
        config_error(f"experiments.{name}.sweep", sweep_param, f"no policy of the experiment takes it ({labels})")
    seeds_by_horizon = {}
    for key, n_seeds in experiment["seeds_by_horizon"].items():
        if sweep_param != "horizon":
            config_error(f"experiments.{name}.seeds_by_horizon", key, "needs a horizon sweep")
        try:
            seeds_by_horizon[int(key)] = n_seeds  # YAML gives an int key, --config a string
        except ValueError:
            config_error(f"experiments.{name}.seeds_by_horizon", key, "not an integer horizon")
        # a horizon not swept is ignored: a layered config (smoke.yaml) may sweep other horizons
    second_first, second_totals = second_stage_totals(experiment, name, sweep_param, labels,
                                                      set(_registry()) | set(config["policy_variants"]))
    curves = []
    for label, (policy, params, display) in resolved.items():
        for value in sweep_values:
            instance, run_label, run_params = dict(experiment["instance"]), label, dict(params)
            horizon, n_seeds = experiment["horizon"], experiment["seeds"]
            if sweep_param == "horizon":
                # one set of runs per T: ε = T^(−1/2), τ and δ = 1/T are resolved from each run's T
                horizon, n_seeds = value, seeds_by_horizon.get(value, n_seeds)
            elif sweep_param in instance_sweep_keys():
                instance[sweep_param] = value
                if sweep_param == "kind":
                    if family_of(instance) != family_of(experiment["instance"]):
                        config_error(f"experiments.{name}.sweep.kind", value,
                                     f"not a {family_of(experiment['instance'])} stream like the experiment's instance")
                    # the stream's own parameters at their defaults, as the schema fills them in
                    own = stream_params(stream_kind(value), {})
                    instance.update({item.name: getattr(own, item.name) for item in fields(own)
                                     if item.name not in instance})
            elif sweep_param in run_params:
                run_params[sweep_param] = value
                if run_params != params:  # the label's own value keeps the plain label (one set of runs)
                    run_label = f"{label}.{sweep_param}{format_value(value)}"
            # (a policy that does not take a swept parameter, e.g. the oracle under a
            # bonus_scale sweep, gets the same runs at every value)
            if family_of(instance) == "synthetic" and instance["arrival_rate"] + instance["slack"] >= 1:
                config_error(f"experiments.{name}.instance.arrival_rate + slack",
                             instance["arrival_rate"] + instance["slack"],
                             "must be < 1 (no service probability reaches it)")
            first = experiment["first_seed"]
            second = ()
            if sweep_param == "horizon" and value in second_totals.get(label, {}):
                # Stein's second stage: fresh seeds up to the total the first stage's spread asks for
                total = second_totals[label][value]
                if total < n_seeds:
                    config_error(f"experiments.{name}.second_stage.total_seeds.{label}.{value}", total,
                                 f"fewer than the first stage's {n_seeds} seeds at T = {value}")
                second = tuple(range(second_first, second_first + total - n_seeds))  # fresh: check_second_stages
            curves.append(Curve(label=run_label, sweep_param=sweep_param, sweep_value=value,
                                seeds=tuple(range(first, first + n_seeds)) + second, experiment=name,
                                base_label=label, policy=policy, display=display,
                                params=at_horizon(run_params, horizon),
                                instance=instance, instance_id=instance_id(instance), horizon=horizon,
                                second_stage_seeds=second))
    return curves


def second_stage_totals(experiment: Mapping, name: str, sweep_param: str, labels: list[str],
                        known: set = frozenset()) -> tuple[int, dict[str, dict[int, int]]]:
    """(first seed, label → T → seeds of both stages) of an experiment's
    ``second_stage`` ((0, {}) without one); a ``known`` label (a policy or
    variant) the experiment does not run is left out, as a layered config may
    drop policies; one config error line for any other label, a key that is not
    a horizon, or no horizon sweep."""
    stage = experiment.get("second_stage")
    if not stage:
        return 0, {}
    key = f"experiments.{name}.second_stage"
    if sweep_param != "horizon":
        config_error(key, stage, "needs a horizon sweep (the seeds are given per T)")
    totals = {}
    for label, by_horizon in stage["total_seeds"].items():
        if label not in labels:
            # a layered config may run fewer policies (as it may sweep other horizons): a known
            # policy it dropped has no second stage there; an unknown name is a slip
            if label in known:
                continue
            config_error(f"{key}.total_seeds", label, f"not a policy of this experiment ({labels})")
        totals[label] = {}
        for horizon, total in by_horizon.items():
            try:
                totals[label][int(horizon)] = total  # YAML gives an int key, --config a string
            except ValueError:
                config_error(f"{key}.total_seeds.{label}", horizon, "not an integer horizon")
    return int(stage["first_seed"]), totals


def check_second_stages(curves: dict) -> None:
    """A second stage's seeds are fresh: no experiment's first stage runs any of them."""
    first_stage = {}
    for name, experiment_curves in curves.items():
        for curve in experiment_curves:
            second = set(curve.second_stage_seeds)
            for seed in curve.seeds:
                if seed not in second:
                    first_stage.setdefault(seed, name)
    for name, experiment_curves in curves.items():
        for curve in experiment_curves:
            shared = sorted(seed for seed in curve.second_stage_seeds if seed in first_stage)
            if shared:
                config_error(f"experiments.{name}.second_stage.first_seed", curve.second_stage_seeds[0],
                             f"its seeds {shared[:5]}… are first-stage seeds of experiment "
                             f"{first_stage[shared[0]]}; a second stage needs fresh seeds (move first_seed)")


def collect_runs(curves: dict) -> dict:
    """Each distinct (instance, horizon, label) once, whichever experiments
    share it; the same label with other parameters is an error."""
    runs = {}
    for name, experiment_curves in curves.items():
        for curve in experiment_curves:
            key = curve.run_key
            if key in runs:
                run = runs[key]
                if (run.policy, run.params, run.instance) != (curve.policy, curve.params, curve.instance):
                    raise ConfigError(
                        f"experiments {run.experiments[0]} and {name} both run {curve.label!r} on "
                        f"{curve.instance_id} (T = {curve.horizon}) with different parameters "
                        f"({run.params} vs {curve.params}); give one of them a policy_variants label")
                runs[key] = Run(run.instance_id, run.horizon, run.label, run.policy, run.params, run.instance,
                                tuple(sorted(set(run.seeds) | set(curve.seeds))),
                                tuple(dict.fromkeys(run.experiments + (name,))))
            else:
                runs[key] = Run(curve.instance_id, curve.horizon, curve.label, curve.policy, curve.params,
                                curve.instance, curve.seeds, (name,))
    for run in runs.values():
        check_values(run.policy, run.params, run.instance, run.horizon,
                     f"experiments.{run.experiments[0]} parameters of {run.label} (T = {run.horizon})")
    return runs


def check_rates(config: Mapping, curves: dict) -> tuple[str, ...]:
    """The experiments Figure 5 summarises, one panel each (none: no Figure 5):
    ``rates.experiment`` then ``rates.extra_experiments``, each horizon-swept."""
    for reserved in RESERVED_TABLES:
        if reserved in config["experiments"]:  # its tidy table would be Figure 5's table
            config_error("experiments", reserved, "reserved for Figure 5's tables; rename the experiment")
    rates = config["rates"]
    if rates["experiment"] is None:
        return ()
    return check_horizon_swept(curves, "rates.extra_experiments",
                               [rates["experiment"]] + list(rates["extra_experiments"]), "rates.experiment")


def check_horizon_swept(curves: dict, key: str, experiments, first_key: str = "") -> tuple[str, ...]:
    """``experiments`` (a rate figure's panels), each an experiment with a horizon sweep, none twice."""
    names = []
    for index, name in enumerate(experiments):
        where = first_key if index == 0 and first_key else key
        if name not in curves:
            config_error(where, name, f"not an experiment ({', '.join(curves)})")
        if curves[name][0].sweep_param != "horizon":
            config_error(where, name, "needs a horizon sweep (sweep: {horizon: [...]})")
        if name in names:
            config_error(where, name, "listed twice")
        names.append(name)
    return tuple(names)


def cell_experiment(dataset: str, column: str) -> str:
    return dataset if column == "default" else f"{dataset}_{column}"


def grid_cells(config: Mapping, curves: dict) -> tuple[GridCell, ...]:
    """Figure 7's cells: every (column of ``data.sensitivity``, dataset) whose
    experiment the config has, column by column (none without real-data settings)."""
    if "data" not in config:
        return ()
    data = config["data"]
    return tuple(GridCell(dataset, column["name"], column["label"], column["choice"],
                          cell_experiment(dataset, column["name"]))
                 for column in data["sensitivity"]["columns"] for dataset in data["datasets"]
                 if cell_experiment(dataset, column["name"]) in curves)


def build_plan(config: Mapping) -> Plan:
    """Runs, curves, figure specs, Figure 5's experiments and Figure 7's cells
    of a validated config (see validate_config: every default is the schema's)."""
    curves = {name: expand_experiment(config, name) for name in config["experiments"]}
    check_second_stages(curves)
    runs = collect_runs(curves)
    figures = {name: figure_spec(config, curves, name) for name in config["figures"]}
    return Plan(runs, curves, figures, check_rates(config, curves), grid_cells(config, curves),
                check_horizon_swept(curves, "adversarial.rate_experiments",
                                    config["adversarial"]["rate_experiments"]))
