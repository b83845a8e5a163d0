# Helpers shared by the rules: read the config, expand it into the set of
# run files (instance × horizon × policy label × seed) and map each
# experiment, figure and panel onto them. No rules here; the Snakefile calls
# these once the config is validated.

import hashlib
import json
import re
import sys
from collections.abc import Mapping
from pathlib import Path

import jsonschema
import yaml
from snakemake.utils import update_config


class ConfigError(Exception):
    """A config value the schema cannot catch (cross-references, sweeps)."""


def config_error(key, value, why):
    raise ConfigError(f"invalid config value {key} = {value!r}: {why}")


def deep_merge(base, override):
    """``base`` updated key by key with ``override`` (nested dicts merged)."""
    merged = dict(base)
    for key, value in (override or {}).items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def yaml_scalars(value):
    """Nested values given with --config arrive as text ('0.1', 'null'): read
    such text as the YAML number, boolean or null it spells."""
    if isinstance(value, Mapping):
        return {key: yaml_scalars(item) for key, item in value.items()}
    if isinstance(value, list):
        return [yaml_scalars(item) for item in value]
    if isinstance(value, str):
        try:
            parsed = yaml.safe_load(value)
        except yaml.YAMLError:
            return value
        if parsed is None or isinstance(parsed, (bool, int, float)):
            return parsed
    return value


def load_datasets_config(path):
    """The real-data settings (config/datasets.yaml, top-level key `data`),
    with values from the command line (--config/--configfile) on top."""
    if not path.exists():
        return
    datasets_config = yaml.safe_load(path.read_text()) or {}
    update_config(datasets_config, {k: config[k] for k in datasets_config if k in config})
    config.update(datasets_config)  # validated by workflow/rules/data.smk


# ---------------------------------------------------------------- the package

try:
    from cqb.code_hash import simulation_code_hash
    from cqb.policies import DISPLAY_NAMES, POLICIES, policy_parameters
except ImportError as error:  # the package must be installed: pip install -e .
    raise ImportError(f"the workflow needs the cqb package ({error}); run `pip install -e .`")


CODE_HASH = simulation_code_hash()  # editing the simulation code reruns simulations

# ---------------------------------------------------------------- naming

SCHEMA = yaml.safe_load(Path(workflow.basedir, "workflow/schemas/config.schema.yaml").read_text())
INSTANCE_KEY_ORDER = ("n_servers", "dim", "arrival_rate", "slack", "min_accept_rate")
INSTANCE_KEY_TAGS = {"n_servers": "K", "dim": "d", "arrival_rate": "lam", "slack": "eps",
                     "min_accept_rate": "acc"}
SWEEP_SYMBOLS = {"slack": "ϵ", "n_servers": "K", "dim": "d", "arrival_rate": "λ",
                 "bonus_scale": "c_β", "horizon": "T"}
INSTANCE_KEYS = set(SCHEMA["$defs"]["instance"]["properties"])


def format_value(value):
    """A number as it appears in file names and tables: 0.7 → '0.7', 5 → '5'."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    text = repr(value)
    return text[:-2] if text.endswith(".0") else text


def instance_id(spec):
    """Readable canonical key of an instance spec, e.g. synth_K5_d5_lam0.7_eps0.1_acc0.005."""
    if spec["kind"] == "synthetic":
        parts = ["synth"] + [f"{INSTANCE_KEY_TAGS[k]}{format_value(spec[k])}"
                             for k in INSTANCE_KEY_ORDER if k in spec]
    else:
        pool = Path(spec["pool"])
        dataset = pool.parent.name if pool.stem == "instance" else pool.stem
        parts = ["pool", dataset, f"lam{format_value(spec['arrival_rate'])}"]
    return "_".join(parts)


def check_against_schema(value, definition, key):
    """Validate ``value`` against ``$defs/definition`` of the config schema."""
    schema = {"$ref": f"#/$defs/{definition}", "$defs": SCHEMA["$defs"]}
    try:
        jsonschema.Draft202012Validator(schema).validate(value)
    except jsonschema.ValidationError as error:
        where = "".join(f"[{p!r}]" for p in error.absolute_path)
        raise ConfigError(f"invalid config value {key}{where}: {error.message}") from None


# ---------------------------------------------------------------- expansion


def accepted_parameters(policy):
    return set(policy_parameters(policy))


def resolve_policy(label, experiment_name, experiment):
    """(policy name, parameters, display name) of a label within an experiment."""
    variants = config["policy_variants"]
    if label in variants:
        policy = variants[label]["policy"]
        display = variants[label].get("display", label)
        variant_params = variants[label].get("params", {})
    else:
        policy, display, variant_params = label, DISPLAY_NAMES.get(label, label), {}
    if policy not in POLICIES:
        config_error(f"experiments.{experiment_name}.policies", label,
                     f"unknown policy; known: {', '.join(sorted(POLICIES))}")
    accepted = accepted_parameters(policy)
    shared = {k: v for k, v in config["defaults"]["policy_params"].items() if k in accepted}
    params = deep_merge(shared, config["defaults"]["per_policy"].get(policy, {}))
    params = deep_merge(params, variant_params)
    params = deep_merge(params, experiment["policy_params"].get(label, {}))
    unknown = sorted(set(params) - accepted)
    if unknown:
        config_error(f"parameters of policy {label!r} (experiment {experiment_name})", unknown,
                     f"{policy} accepts only {sorted(accepted) or 'no parameters'}")
    return policy, params, display


def expand_experiment(name, experiment):
    """Curves of an experiment: one entry per (label, sweep value), in config order."""
    labels = list(experiment["policies"]) + list(experiment["variants"])
    for label in experiment["variants"]:
        if label not in config["policy_variants"]:
            config_error(f"experiments.{name}.variants", label, "not a key of policy_variants")
    for label in experiment["policy_params"]:
        if label not in labels:
            config_error(f"experiments.{name}.policy_params", label,
                         f"not a policy of this experiment ({labels})")
    # A policy that does not take a swept policy parameter (the oracle under a
    # bonus_scale sweep) does not depend on it: one set of runs for every value.
    sweep = experiment["sweep"] or {}
    sweep_param, sweep_values = next(iter(sweep.items())) if sweep else ("", [None])
    if sweep_param == "horizon":
        # a horizon sweep: one set of runs per T (the run path has T{horizon});
        # ε = T^(−1/2), τ and δ = 1/T are resolved per run from its own T
        for value in sweep_values:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                config_error(f"experiments.{name}.sweep.horizon", value, "a horizon must be an integer ≥ 1")
    elif sweep_param and sweep_param not in INSTANCE_KEYS and not any(
        sweep_param in accepted_parameters(resolve_policy(label, name, experiment)[0]) for label in labels
    ):
        config_error(f"experiments.{name}.sweep", sweep_param, f"no policy of the experiment takes it ({labels})")
    seeds_by_horizon = {}
    for key, n in (experiment.get("seeds_by_horizon") or {}).items():
        if sweep_param != "horizon":
            config_error(f"experiments.{name}.seeds_by_horizon", key, "needs a horizon sweep")
        try:
            horizon = int(key)  # YAML gives an int key, --config a string
        except ValueError:
            config_error(f"experiments.{name}.seeds_by_horizon", key, "not an integer horizon")
        # a horizon not swept is ignored: a layered config file (smoke.yaml)
        # may sweep other horizons while this mapping is merged key by key
        seeds_by_horizon[horizon] = n
    curves = []
    for label in labels:
        policy, params, display = resolve_policy(label, name, experiment)
        for value in sweep_values:
            spec, run_label, run_params = dict(experiment["instance"]), label, dict(params)
            horizon, n_seeds = experiment["horizon"], experiment["seeds"]
            if sweep_param == "horizon":
                horizon, n_seeds = value, seeds_by_horizon.get(value, n_seeds)
            elif sweep_param in INSTANCE_KEYS:
                spec[sweep_param] = value
            elif sweep_param in accepted_parameters(policy):
                run_params[sweep_param] = value
                if run_params != params:  # the default value keeps the plain label (one set of runs)
                    run_label = f"{label}.{sweep_param}{format_value(value)}"
            check_against_schema(spec, "instance", f"experiments.{name}.instance")
            check_against_schema(run_params, "policy_params",
                                 f"experiments.{name} parameters of {run_label}")
            if spec["kind"] == "synthetic" and spec["arrival_rate"] + spec["slack"] >= 1:
                config_error(f"experiments.{name}.instance.arrival_rate + slack",
                             spec["arrival_rate"] + spec["slack"],
                             "must be < 1 (no service probability reaches it)")
            curves.append({
                "label": run_label,
                "base_label": label,
                "policy": policy,
                "display": display,
                "params": run_params,
                "spec": spec,
                "instance_id": instance_id(spec),
                "horizon": horizon,
                "sweep_param": sweep_param,
                "sweep_value": value,
                "seeds": list(range(experiment["first_seed"], experiment["first_seed"] + n_seeds)),
            })
    return curves


def check_shared_parameters():
    """Every key of defaults.policy_params must be a parameter of some policy:
    the schema lets unknown keys through (plugin policies bring their own), so
    a misspelt key would otherwise be dropped silently."""
    known = set().union(*(accepted_parameters(policy) for policy in POLICIES))
    for key, value in config["defaults"]["policy_params"].items():
        if key not in known:
            config_error(f"defaults.policy_params.{key}", value,
                         f"no policy has a parameter {key!r}; known: {', '.join(sorted(known))}")


def build_runs():
    check_shared_parameters()
    """RUNS: (instance_id, horizon, label) → what to simulate; each distinct
    combination is simulated once, whichever experiments share it."""
    runs, experiments = {}, {}
    for name, experiment in config["experiments"].items():
        experiments[name] = expand_experiment(name, experiment)
        for curve in experiments[name]:
            key = (curve["instance_id"], str(curve["horizon"]), curve["label"])
            run = {"spec": curve["spec"], "policy": curve["policy"], "params": curve["params"]}
            if key in runs and {k: runs[key][k] for k in run} != run:
                raise ConfigError(
                    f"experiments {runs[key]['experiments'][0]} and {name} both run "
                    f"{curve['label']!r} on {curve['instance_id']} (T = {curve['horizon']}) with "
                    f"different parameters ({runs[key]['params']} vs {curve['params']}); "
                    "give one of them a policy_variants label")
            runs.setdefault(key, dict(run, experiments=[]))["experiments"].append(name)
    return runs, experiments




def run_files(curve):
    return [RUN_FILE.format(instance_id=curve["instance_id"], horizon=curve["horizon"],
                            policy=curve["label"], seed=seed) for seed in curve["seeds"]]


# ---------------------------------------------------------------- rule inputs and params

def run_entry(wildcards):
    key = (wildcards.instance_id, wildcards.horizon, wildcards.policy)
    if key not in RUNS:
        raise ValueError(f"no experiment in the config runs {key}")
    return RUNS[key]


def simulate_inputs(wildcards):
    spec = run_entry(wildcards)["spec"]
    # a pool instance needs its processed data file (built by workflow/rules/data.smk)
    return {"pool": spec["pool"]} if spec["kind"] == "pool" else {}


def python_for_jobs():
    """`python` of the job's conda env, else the interpreter running Snakemake."""
    uses_conda = any(str(m).lower() == "conda" for m in workflow.deployment_settings.deployment_method)
    return "python" if uses_conda else sys.executable


JOB_PYTHON = python_for_jobs()


def experiment_curves(experiment):
    """The curves of an experiment with their run files, in config order."""
    return [
        {
            "policy": curve["label"],
            "sweep_param": curve["sweep_param"],
            "sweep_value": "" if curve["sweep_value"] is None else format_value(curve["sweep_value"]),
            "files": run_files(curve),
        }
        for curve in EXPERIMENT_CURVES[experiment]
    ]


def experiment_run_files(wildcards):
    return [path for curve in experiment_curves(wildcards.experiment) for path in curve["files"]]


# ---------------------------------------------------------------- figures


def rates_runs():
    """[label, horizon, seed, run file] of every run of the rates experiment, in config order."""
    for reserved in ("regret_rates", "regret_slopes"):
        if reserved in config["experiments"]:  # its tidy table would be Figure 5's table
            config_error("experiments", reserved, "reserved for Figure 5's tables; rename the experiment")
    name = config["rates"]["experiment"]
    if name not in EXPERIMENT_CURVES:
        config_error("rates.experiment", name, f"not an experiment ({', '.join(config['experiments'])})")
    curves = EXPERIMENT_CURVES[name]
    if curves[0]["sweep_param"] != "horizon":
        config_error("rates.experiment", name, "needs a horizon sweep (sweep: {horizon: [...]})")
    return [[curve["label"], curve["horizon"], seed, path]
            for curve in curves for seed, path in zip(curve["seeds"], run_files(curve))]



def resolve_panels(figure_name):
    """Panels of a figure with their curves (labels, display names, sweep values)."""
    panels = []
    for index, panel in enumerate(config["figures"][figure_name]["panels"]):
        key = f"figures.{figure_name}.panels[{index}]"
        experiment = panel["experiment"]
        if experiment not in EXPERIMENT_CURVES:
            config_error(f"{key}.experiment", experiment,
                         f"not an experiment ({', '.join(config['experiments'])})")
        curves = EXPERIMENT_CURVES[experiment]
        base_labels = list(dict.fromkeys(c["base_label"] for c in curves))
        labels = panel.get("policies", base_labels)
        for label in labels:
            if label not in base_labels:
                config_error(f"{key}.policies", label, f"not run in experiment {experiment} ({base_labels})")
        values = list(dict.fromkeys(c["sweep_value"] for c in curves))
        wanted_values = panel.get("sweep_values", values)
        for value in wanted_values:
            if value not in values:
                config_error(f"{key}.sweep_values", value, f"not a sweep value of {experiment} ({values})")
        sweep_param = curves[0]["sweep_param"]
        symbol = SWEEP_SYMBOLS.get(sweep_param, sweep_param)
        # a label that does not take a swept policy parameter (the oracle under a
        # bonus_scale sweep) has one run set for every value: draw it once
        fixed = {label for label in labels
                 if sweep_param and sweep_param not in INSTANCE_KEYS and sweep_param != "horizon"
                 and sweep_param not in accepted_parameters(
                     next(c["policy"] for c in curves if c["base_label"] == label))}
        n_swept = len(set(labels) - fixed)
        selected = []
        for label in labels:
            for value in wanted_values[:1] if label in fixed else wanted_values:
                curve = next(c for c in curves if c["base_label"] == label and c["sweep_value"] == value)
                if not sweep_param or label in fixed:
                    legend = curve["display"]
                elif n_swept == 1:
                    legend = f"{symbol} = {format_value(value)}"
                else:
                    legend = f"{curve['display']}, {symbol} = {format_value(value)}"
                selected.append({"policy": curve["label"], "display": curve["display"],
                                 "sweep_value": "" if value is None else format_value(value),
                                 "legend": legend, "swept": label not in fixed})
        panels.append({"title": panel.get("title", experiment), "experiment": experiment,
                       "sweep_param": sweep_param, "curves": selected,
                       "yscale": panel["yscale"], "ylim": panel.get("ylim")})
    return panels


def figure_experiments(figure_name):
    return sorted({panel["experiment"] for panel in config["figures"][figure_name]["panels"]})


def figure_outputs(figure_name):
    return [f"{FIGURES}/{figure_name}.{ext}" for ext in ("pdf", "png", "tsv")]


def figure_spec(figure_name):
    figure = config["figures"][figure_name]
    return {"name": figure_name, "title": figure.get("title", figure_name),
            "band": figure["band"], "panel_width": figure["panel_width"],
            "panel_height": figure["panel_height"], "dpi": figure["dpi"],
            "panels": resolve_panels(figure_name)}


