"""cqb.config.experiments: config → runs, curves and figure specs, without Snakemake."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass

import pytest

from cqb.presentation import policy_styles
import yaml

from conftest import REPO
from cqb.datasets.registry import datasets_schema
from cqb.errors import ConfigError
from cqb.config.schema import policy_params_schema, validate_config
from cqb.config.experiments import build_plan, instance_id
from cqb.analysis.curves import format_value
from cqb.policies import get_spec, register_policy, registered_policies

SCHEMA = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
CONFIG = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
RUN_FILE = "runs/{instance_id}/T{horizon}/{policy}/seed{seed}.npz"


@dataclass(frozen=True)
class GainParams:
    gain: float = 2.0
    rounds: int | None = None


@pytest.fixture(autouse=True, scope="module")
def plugin_policy():
    """A policy of a plugin package: the schema and the sweeps must know its
    parameters. Unregistered after this module, so other tests see only theirs."""
    from cqb.sim.policies import registry

    register_policy("test_plugin", "Plugin", GainParams)(lambda env, contexts, rng, params: None)
    yield "test_plugin"
    registry._specs.pop("test_plugin", None)
    policy_styles._styles.pop("test_plugin", None)


def merged(base, override):
    """``base`` updated key by key (as Snakemake layers --configfile/--config)."""
    result = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = merged(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def plan_of(override=None, base=CONFIG):
    config = merged(base, override or {})
    validate_config(config, SCHEMA)
    return build_plan(config), config


def one_experiment(**experiment):
    """A config with a single experiment (and no figures, no Figure 5)."""
    spec = {"instance": {"kind": "synthetic", "arrival_rate": 0.7}, "horizon": 100, "seeds": 2,
            "policies": ["cqb_opt"]}
    return {"experiments": {"x": {**spec, **experiment}}, "rates": {"experiment": None}}


def test_full_config_expands_to_the_documented_number_of_runs():
    plan, _ = plan_of()
    n_files = sum(len(run.seeds) for run in plan.runs.values())
    # fig2 + fig3: 240; fig6: 80; fig5: 3 × (5 × 30 + 20) − 20 shared with the base; fig4: 240;
    # tuning: 7 policies × 5 values × 30 seeds; stall check: 5 × 200
    # Figure 5: 3 × 486 base runs (247 + 92 + 30 + 57 + 60) − the 2×10 shared with fig2, 3 × 80 at K = 9
    # fig7 (7 policies × 10 seeds per cell): C = 0.01 on 2 datasets, S = √d (4 CQB labels) on 3,
    # S_k = ‖θ*_k‖ (4 CQB labels) on 3, λ on 2, 5 servers, Coupon drop, assumptions (with the oracle) on 3;
    # C = 0.1 on 2 (no Coupon), C = 10, intercept, standardised and T = 16000 on 3
    fig7 = 2 * 70 + 3 * 40 + 3 * 40 + 2 * 70 + 70 + 70 + 3 * 80 + 2 * 70 + 4 * 3 * 70
    # Figure 5's registered second stage: CQB-η-2 on the base instance, CQB-ε at K = 9
    second_stage = 4519 + 289
    # Figure 9: 3 streams × 5 policies × 3 horizons × 10 seeds (the streams side by side and
    # the pair at T = 8000 are those runs), σ > 0 (3 values × 10 seeds × CQB-Opt and CQB-ε), the
    # sorted pools (3 datasets × 2 policies × 10; the shuffled ones are Figure 4's runs)
    adversarial = 3 * 5 * 3 * 10 + 3 * 10 * 2 + 3 * 2 * 10
    assert n_files == (240 + 80 + (3 * 486 - 20) + 3 * 80 + 240 + 7 * 5 * 30 + 5 * 200 + fig7 + second_stage
                       + adversarial)
    assert plan.rates_experiment == "rates_horizons"
    assert set(plan.figures) == set(CONFIG["figures"])


def test_runs_carry_every_parameter_with_dataclass_defaults():
    plan, _ = plan_of()
    run = plan.runs[("synth_K5_d5_lam0.7_eps0.1_acc0.005", "5000", "cqb_eps")]
    # 10 seeds in fig2, 20 in the T = 5000 runs of Figure 5, 200 of the stall check:
    # one run, the union of the seeds
    assert run.policy == "cqb_eps" and set(range(20)) | set(range(100, 300)) <= set(run.seeds)
    assert list(run.seeds) == sorted(set(run.seeds))
    assert set(run.params) == {f for f in get_spec("cqb_eps").params.__dataclass_fields__}
    assert run.params["bonus_scale"] == get_spec("cqb_eps").params().bonus_scale and run.params["tau"] is None
    assert run.instance == {"kind": "synthetic", "n_servers": 5, "dim": 5, "arrival_rate": 0.7,
                            "slack": 0.1, "min_accept_rate": 0.005}
    # the experiment's own override reaches only its runs
    mnist = plan.runs[("pool_mnist_lam0.15", "4000", "cqb_eps")]
    assert mnist.params["tau"] == 400


def test_config_overrides_reach_the_runs_in_order():
    override = {"defaults": {"policy_params": {"bonus_scale": 0.05, "explore_constant": 4.0},
                             "per_policy": {"cqb_eps": {"bonus_scale": 0.07}}}}
    plan, _ = plan_of(override)
    key = ("synth_K5_d5_lam0.7_eps0.1_acc0.005", "5000")
    assert plan.runs[key + ("cqb_opt",)].params["bonus_scale"] == 0.05
    assert plan.runs[key + ("cqb_eps",)].params["bonus_scale"] == 0.07  # per policy beats shared
    assert plan.runs[key + ("q_ucb",)].params == {"explore_constant": 4.0}  # only the keys it takes
    assert plan.runs[key + ("random",)].params == {}


def test_instance_sweep_keeps_labels_and_changes_instance_ids():
    plan, _ = plan_of()
    curves = plan.curves["synthetic_servers"]
    assert [(c.label, c.sweep_value, c.instance_id) for c in curves if c.label == "cqb_opt"] == [
        ("cqb_opt", k, f"synth_K{k}_d5_lam0.7_eps0.1_acc0.005") for k in (3, 5, 7, 9)]


def test_policy_parameter_sweep_labels_and_fixed_curves():
    plan, _ = plan_of()
    curves = plan.curves["bonus_sensitivity"]
    opt = [c.label for c in curves if c.base_label == "cqb_opt"]
    # the label's own value (the default 0.1) keeps the plain label: shared with the base runs
    assert opt == ["cqb_opt.bonus_scale0.01", "cqb_opt.bonus_scale0.03", "cqb_opt",
                   "cqb_opt.bonus_scale0.3", "cqb_opt.bonus_scale1"]
    assert [c.params["bonus_scale"] for c in curves if c.base_label == "cqb_opt"] == [0.01, 0.03, 0.1, 0.3, 1.0]
    # the oracle does not take bonus_scale: one run set for every value
    assert {c.label for c in curves if c.base_label == "oracle"} == {"oracle"}
    shared = plan.runs[("synth_K5_d5_lam0.7_eps0.1_acc0.005", "5000", "cqb_opt")]
    assert {"synthetic_base", "synthetic_slack", "bonus_sensitivity"} <= set(shared.experiments)


def test_horizon_sweep_with_seeds_by_horizon():
    plan, _ = plan_of(one_experiment(seeds=4, seeds_by_horizon={"500": 2, 9999: 7},
                                     sweep={"horizon": [250, 500, 750]}, policies=["cqb_opt", "cqb_eps"],
                                     policy_params={"cqb_eps": {"tau": 30}}),
                      base={})
    curves = plan.curves["x"]
    assert [(c.label, c.horizon, len(c.seeds)) for c in curves] == [
        ("cqb_opt", 250, 4), ("cqb_opt", 500, 2), ("cqb_opt", 750, 4),
        ("cqb_eps", 250, 4), ("cqb_eps", 500, 2), ("cqb_eps", 750, 4)]
    assert sorted(int(h) for _, h, _ in plan.runs) == [250, 250, 500, 500, 750, 750]


def test_rates_runs_list_every_seed_of_the_horizon_sweep():
    config = one_experiment(seeds=3, seeds_by_horizon={600: 2}, sweep={"horizon": [300, 600]})
    config["rates"] = {"experiment": "x"}
    plan, _ = plan_of(config, base={})
    runs = plan.rates_runs(RUN_FILE)
    assert [run[:3] for run in runs] == [("cqb_opt", 300, 0), ("cqb_opt", 300, 1), ("cqb_opt", 300, 2),
                                         ("cqb_opt", 600, 0), ("cqb_opt", 600, 1)]
    assert runs[-1][3] == "runs/synth_K5_d5_lam0.7_eps0.1_acc0.005/T600/cqb_opt/seed1.npz"


def test_variant_label_display_and_parameters():
    plan, _ = plan_of({"experiments": {"synthetic_base": {"variants": ["cqb_opt_c1"]}}})
    curve = plan.curves["synthetic_base"][-1]
    assert (curve.label, curve.policy, curve.display) == ("cqb_opt_c1", "cqb_opt", "CQB-Opt (c_β = 1)")
    assert curve.params["bonus_scale"] == 1.0


def test_shared_run_with_other_parameters_is_a_conflict():
    override = {"experiments": {"other": {"instance": {"kind": "synthetic", "arrival_rate": 0.7},
                                          "horizon": 5000, "seeds": 1, "policies": ["cqb_opt"],
                                          "policy_params": {"cqb_opt": {"bonus_scale": 0.5}}}}}
    with pytest.raises(ConfigError, match=r"synthetic_base and other both run 'cqb_opt'.*policy_variants"):
        plan_of(override)


def test_panels_select_curves_and_name_legends():
    plan, _ = plan_of()
    left, middle, _ = plan.figures["fig2"].panels
    assert [c.legend for c in left.curves][:2] == ["CQB-ε", "CQB-Opt"] and left.yscale == "symlog"
    assert [(c.policy, c.sweep_value, c.legend) for c in middle.curves] == [
        ("cqb_eps", "0.05", "ϵ = 0.05"), ("cqb_eps", "0.1", "ϵ = 0.1"), ("cqb_eps", "0.15", "ϵ = 0.15")]
    zoom = plan.figures["fig6"].panels[2]
    assert [(c.policy, c.legend, c.swept) for c in zoom.curves] == [
        ("cqb_opt.bonus_scale0.01", "c_β = 0.01", True), ("cqb_opt.bonus_scale0.03", "c_β = 0.03", True),
        ("cqb_opt", "c_β = 0.1", True), ("oracle", "Optimal", False)]
    assert plan.figures["fig6"].experiments == ["bonus_sensitivity"]


def test_a_sweep_panel_reads_the_runs_tables_of_its_experiment_and_reference():
    plan, _ = plan_of()
    smoothing = plan.figures["fig9_smoothing"]
    (panel,) = smoothing.panels
    assert (panel.x, panel.metric, panel.sweep_param) == ("sweep", "tail_regret", "noise_scale")
    assert {c.policy for c in panel.curves} == {"cqb_opt", "cqb_eps"}
    assert (panel.reference.experiment, panel.reference.sweep_value) == ("adversarial_streams", "synthetic")
    assert dict(panel.reference.runs) == {"cqb_opt": "cqb_opt", "cqb_eps": "cqb_eps"}
    assert smoothing.experiments == [] and smoothing.runs_experiments == ["adversarial_smoothing", "adversarial_streams"]
    # the round panel of the same experiment draws CQB-Opt only, as before CQB-ε joined it
    rounds = [p for p in plan.figures["fig9_rounds"].panels if p.experiment == "adversarial_smoothing"]
    assert {c.policy for p in rounds for c in p.curves} == {"cqb_opt"}
    assert plan.figures["fig9_rounds"].runs_experiments == []


def test_two_swept_policies_in_one_panel_name_both():
    config = one_experiment(policies=["cqb_opt", "cqb_ts"], sweep={"slack": [0.1, 0.2]})
    config["figures"] = {"f": {"panels": [{"experiment": "x"}]}}
    plan, _ = plan_of(config, base={})
    assert [c.legend for c in plan.figures["f"].panels[0].curves] == [
        "CQB-Opt, ϵ = 0.1", "CQB-Opt, ϵ = 0.2", "CQB-TS, ϵ = 0.1", "CQB-TS, ϵ = 0.2"]


def test_plugin_policy_parameters_are_in_the_schema_and_sweepable():
    schema = policy_params_schema()
    assert schema["per_policy"]["properties"]["test_plugin"]["properties"]["gain"]["type"] == "number"
    assert schema["policy_params"]["properties"]["rounds"]["anyOf"][0] == {"type": ["integer", "null"]}
    plan, _ = plan_of(one_experiment(policies=["test_plugin", "oracle"], sweep={"gain": [2.0, 3.5]}), base={})
    assert [c.label for c in plan.curves["x"]] == ["test_plugin", "test_plugin.gain3.5", "oracle", "oracle"]
    with pytest.raises(ConfigError, match=r"gain.*'abc'.*number"):
        plan_of(one_experiment(policies=["test_plugin"], policy_params={"test_plugin": {"gain": "abc"}}), base={})


def test_generated_schema_follows_the_dataclasses():
    schema = policy_params_schema()
    for name, spec in registered_policies().items():
        own = schema["per_policy"]["properties"][name]["properties"]
        assert set(own) == set(spec.params.__dataclass_fields__), name
    estimator = schema["per_policy"]["properties"]["cqb_eps"]["properties"]
    # an integer, or a share of the horizon ("T/10")
    assert estimator["tau"]["anyOf"] == [{"type": ["integer", "null"]},
                                         {"type": "string", "pattern": "^T/([1-9][0-9]*)$"}]
    assert estimator["projection"]["type"] == "string"
    assert "0.01" in estimator["bonus_scale"]["description"]  # CQB-ε's default, from its dataclass


def stage2(experiment, totals, first_seed=130000):
    """An override giving ``experiment`` a second stage (experiments.<name>.second_stage)."""
    return {"experiments": {experiment: {"second_stage": {"first_seed": first_seed, "total_seeds": totals}}}}


@pytest.mark.parametrize("override, needles", [
    ({"experimentz": {}}, ["unknown config key experimentz"]),
    # a misspelt name in --config experiments='{synthetic_server: {seeds: 3}}'
    ({"experiments": {"synthetic_server": {"seeds": 3}}},
     ["unknown experiment synthetic_server: known: ", "synthetic_base, synthetic_dim, synthetic_servers,",
      "needs instance, horizon, seeds, policies"]),
    ({"defaults": {"policy_params": {"colour": 1}}}, ["defaults.policy_params.colour"]),
    ({"defaults": {"policy_params": {"bonus_scale": "abc"}}}, ["bonus_scale", "'abc'", "number"]),
    ({"defaults": {"policy_params": {"projection": "nearest"}}}, ["projection", "nearest"]),
    ({"defaults": {"policy_params": {"bonus_scale": -1}}}, ["bonus_scale", "-1"]),
    ({"defaults": {"per_policy": {"cqb_opt": {"tau": 4}}}}, ["defaults.per_policy.cqb_opt.tau"]),
    ({"experiments": {"synthetic_base": {"policies": ["cqb_magic"]}}}, ["cqb_magic", "unknown policy"]),
    ({"experiments": {"synthetic_base": {"instance": {"arrival_rate": 1.5}}}}, ["arrival_rate", "1.5"]),
    ({"experiments": {"synthetic_base": {"seeds": 0}}}, ["synthetic_base.seeds", "0"]),
    ({"experiments": {"synthetic_slack": {"sweep": {"slack": [0.1, 1.5]}}}}, ["slack", "1.5"]),
    ({"experiments": {"synthetic_slack": {"sweep": {"slack": [0.1, 0.35]}}}}, ["arrival_rate + slack", "must be < 1"]),
    ({"experiments": {"rates_horizons": {"sweep": {"horizon": [300, 2.5]}}}}, ["horizon", "2.5"]),
    ({"experiments": {"synthetic_base": {"sweep": {"eta": [0.1]}}}}, ["sweep", "eta", "no policy"]),
    ({"experiments": {"synthetic_base": {"seeds_by_horizon": {5000: 2}}}}, ["seeds_by_horizon", "horizon sweep"]),
    ({"experiments": {"synthetic_slack": {"policy_params": {"q_ucb": {}}}}}, ["policy_params", "q_ucb"]),
    ({"figures": {"fig2": {"panels": [{"experiment": "nope"}]}}}, ["figures.fig2.panels[0].experiment", "nope"]),
    ({"figures": {"fig2": {"panels": [{"experiment": "synthetic_slack", "sweep_values": [0.3]}]}}},
     ["sweep_values", "0.3"]),
    # a panel against the sweep value (x: sweep)
    ({"figures": {"fig2": {"panels": [{"experiment": "synthetic_slack", "x": "seed"}]}}},
     ["figures.fig2.panels.0.x = 'seed'", "'round', 'sweep'"]),
    ({"figures": {"fig2": {"panels": [{"experiment": "synthetic_slack", "x": "sweep", "metric": "regret"}]}}},
     ["figures.fig2.panels[0].metric = 'regret'", "not a column of the runs table", "tail_regret"]),
    ({"figures": {"fig2": {"panels": [{"experiment": "synthetic_base", "x": "sweep"}]}}},
     ["figures.fig2.panels[0].x = 'sweep'", "synthetic_base has no sweep"]),
    ({"figures": {"fig2": {"panels": [{"experiment": "synthetic_slack", "reference": {"experiment": "synthetic_base"}}]}}},
     ["figures.fig2.panels[0].reference", "only a sweep panel"]),
    ({"figures": {"fig2": {"panels": [{"experiment": "synthetic_slack", "x": "sweep",
                                       "reference": {"experiment": "synthetic_dim", "sweep_value": 7}}]}}},
     ["figures.fig2.panels[0].reference.sweep_value = 7", "not a sweep value of synthetic_dim"]),
    ({"figures": {"fig2": {"panels": [{"experiment": "synthetic_base", "policies": ["random"],
                                       "x": "sweep"}]}}}, ["has no sweep"]),
    ({"figures": {"fig2": {"panels": [{"experiment": "bonus_sensitivity", "x": "sweep", "policies": ["cqb_opt"],
                                       "reference": {"experiment": "tuning_explore"}}]}}},
     ["figures.fig2.panels[0].reference.experiment = 'tuning_explore'", "does not run cqb_opt"]),
    ({"rates": {"experiment": "synthetic_base"}}, ["rates.experiment", "horizon sweep"]),
    # Figure 5's second stage (experiments.<name>.second_stage)
    (stage2("rates_horizons", {"cqb_eta2": {2000: 100}}),
     ["experiments.rates_horizons.second_stage.total_seeds.cqb_eta2.2000 = 100", "first stage's 247 seeds"]),
    (stage2("rates_horizons", {"cqb_magic": {2000: 300}}), ["second_stage.total_seeds = 'cqb_magic'", "not a policy"]),
    (stage2("rates_horizons", {"cqb_eta2": {"T2000": 300}}),
     ["second_stage.total_seeds.cqb_eta2 = 'T2000'", "not an integer horizon"]),
    (stage2("rates_horizons", {"cqb_eta2": {2000: 0}}), ["second_stage.total_seeds.cqb_eta2.2000 = 0", "minimum"]),
    (stage2("rates_horizons", {"cqb_eta2": {2000: 300}}, first_seed=-1), ["second_stage.first_seed = -1"]),
    ({"experiments": {"stall_check": {"second_stage": {"total_seeds": {}}}}},
     ["experiments.stall_check.second_stage", "first_seed", "required"]),
    (stage2("stall_check", {"cqb_eps": {5000: 300}}), ["experiments.stall_check.second_stage", "horizon sweep"]),
    # fresh seeds: not its own first stage's, nor another experiment's (the stall check's 100–299)
    (stage2("rates_horizons", {"cqb_eta2": {2000: 300}}, first_seed=200),
     ["experiments.rates_horizons.second_stage.first_seed = 200", "first-stage seeds of experiment"]),
])
def test_bad_config_is_one_line_naming_key_and_value(override, needles):
    with pytest.raises(ConfigError) as error:
        plan_of(override)
    message = str(error.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message, message


def test_pool_experiment_checks_values_without_the_pool_file():
    # cqb_eta2 derives eta from the nominal slack, which a pool instance lacks
    override = {"experiments": {"mnist": {"policies": ["cqb_eps", "cqb_eta2"]}}}
    with pytest.raises(ConfigError, match="cqb_eta2 needs eta and cutoff"):
        plan_of(override)


def test_names_of_instances_and_values():
    assert format_value(5.0) == "5" and format_value(0.7) == "0.7" and format_value("a") == "a"
    assert instance_id({"kind": "pool", "pool": "data/processed/mnist/instance.npz", "arrival_rate": 0.15}) \
        == "pool_mnist_lam0.15"


def test_figure_centre_and_band_must_go_together():
    fig = {"panels": [{"experiment": "x"}]}
    plan, _ = plan_of({"figures": {"f": {**fig, "center": "median", "band": "iqr"}}}, base=one_experiment())
    assert (plan.figures["f"].center, plan.figures["f"].band) == ("median", "iqr")
    with pytest.raises(ConfigError, match=r"figures\.f\.band = 'sd'.*median"):
        plan_of({"figures": {"f": {**fig, "center": "median"}}}, base=one_experiment())
    with pytest.raises(ConfigError, match=r"figures\.f\.band = 'iqr'.*mean"):
        plan_of({"figures": {"f": {**fig, "band": "iqr"}}}, base=one_experiment())


# ---------------------------------------------------------------- Figure 5's experiments, Figure 7's cells


def test_figure_5_has_a_panel_per_rates_experiment_in_config_order():
    plan, _ = plan_of()
    assert plan.rate_experiments == ("rates_horizons", "rates_servers9")
    assert plan.rates_experiment == "rates_horizons"
    plan, _ = plan_of({"rates": {"experiment": None}})
    assert plan.rate_experiments == () and plan.rates_experiment is None


@pytest.mark.parametrize("extra, needle", [
    (["nope"], "rates.extra_experiments = 'nope': not an experiment"),
    (["synthetic_base"], "rates.extra_experiments = 'synthetic_base': needs a horizon sweep"),
    (["rates_servers9", "rates_servers9"], "rates.extra_experiments = 'rates_servers9': listed twice"),
    (["rates_horizons"], "rates.extra_experiments = 'rates_horizons': listed twice"),
])
def test_a_bad_extra_rates_experiment_is_refused_by_name(extra, needle):
    with pytest.raises(ConfigError, match=needle.replace(".", r"\.").replace("(", r"\(")):
        plan_of({"rates": {"extra_experiments": extra}})


DATASETS_SCHEMA = datasets_schema(yaml.safe_load((REPO / "workflow" / "schemas" / "datasets.schema.yaml").read_text()))
DATASETS = yaml.safe_load((REPO / "config" / "datasets.yaml").read_text())


def test_figure_7_cells_are_the_grid_columns_that_have_an_experiment():
    from cqb.config.schema import validate_with_defaults

    config = merged(CONFIG, DATASETS)
    validate_config(config, SCHEMA)
    validate_with_defaults(config, DATASETS_SCHEMA)
    grid = build_plan(config).grid
    columns = [c["name"] for c in DATASETS["data"]["sensitivity"]["columns"]]
    assert [cell.column for cell in grid] == sorted((cell.column for cell in grid), key=columns.index)
    assert grid[0].experiment == "mnist" and grid[0].column == "default"  # the column `default` is Figure 4's
    assert {cell.experiment for cell in grid} <= set(config["experiments"])
    assert all(cell.experiment == f"{cell.dataset}_{cell.column}" for cell in grid if cell.column != "default")
    # a column whose experiment the config lacks has no cell; without real-data settings, no grid
    del config["experiments"]["coupon_C10"]
    assert ("coupon", "C10") not in {(c.dataset, c.column) for c in build_plan(config).grid}
    assert plan_of()[0].grid == ()


def test_the_base_instance_is_the_configs():
    # the benchmarks and tests use BASE_INSTANCE; the figures run the config's: one and the same
    from cqb.config.experiments import BASE_INSTANCE

    assert CONFIG["experiments"]["synthetic_base"]["instance"] == BASE_INSTANCE


# ---------------------------------------------------------------- Figure 5's second stage


def test_second_stage_adds_fresh_seeds_to_its_labels_at_its_horizons():
    from cqb.analysis.rates import rate_runs

    config = one_experiment(seeds=4, seeds_by_horizon={500: 2}, sweep={"horizon": [250, 500, 750]},
                            policies=["cqb_opt", "cqb_eps"], policy_params={"cqb_eps": {"tau": 30}},
                            second_stage={"first_seed": 130000,
                                          "total_seeds": {"cqb_eps": {500: 5, "750": 4, 250: 6, 9999: 50}}})
    config["rates"] = {"experiment": "x"}
    plan, _ = plan_of(config, base={})
    seeds = {(c.label, c.horizon): (c.seeds, c.second_stage_seeds) for c in plan.curves["x"]}
    assert seeds == {
        # the other label keeps its first stage at every T
        ("cqb_opt", 250): ((0, 1, 2, 3), ()), ("cqb_opt", 500): ((0, 1), ()), ("cqb_opt", 750): ((0, 1, 2, 3), ()),
        # the listed label: its first stage, then total − first stage fresh seeds from first_seed on
        ("cqb_eps", 250): ((0, 1, 2, 3, 130000, 130001), (130000, 130001)),
        ("cqb_eps", 500): ((0, 1, 130000, 130001, 130002), (130000, 130001, 130002)),
        ("cqb_eps", 750): ((0, 1, 2, 3), ()),  # the total is the first stage's: nothing to add
    }  # T = 9999 is not swept: ignored
    run = plan.runs[("synth_K5_d5_lam0.7_eps0.1_acc0.005", "500", "cqb_eps")]
    assert run.seeds == (0, 1, 130000, 130001, 130002)
    stages = {(label, horizon, seed): stage for _, label, horizon, seed, _, stage in rate_runs(plan, ["x"], RUN_FILE)}
    assert stages[("cqb_eps", 500, 130002)] == 2 and stages[("cqb_eps", 500, 1)] == 1
    assert sum(stage == 2 for stage in stages.values()) == 5 and len(stages) == 4 + 2 + 4 + 6 + 5 + 4


def test_a_layered_config_that_drops_a_second_stage_policy_drops_its_second_stage():
    """Fewer policies (a user's --configfile): the second stage of a policy
    that no longer runs is moot, as a horizon no longer swept is."""
    plan, _ = plan_of({"experiments": {"rates_horizons": {"policies": ["cqb_opt"]}}})
    assert all(c.second_stage_seeds == () for c in plan.curves["rates_horizons"])


def test_second_stage_runs_are_keyed_and_shared_as_every_run():
    # CQB-η-2 at T = 5000 on the base instance is also the stall check's (seeds 100–299) and the
    # tuning's at its default c_β (1000–1029): one Run, one run file per seed
    without = merged(CONFIG, {"experiments": {"rates_horizons": {"second_stage": None}}})
    plan, _ = plan_of(stage2("rates_horizons", {"cqb_eta2": {5000: 100}}), base=without)
    key = ("synth_K5_d5_lam0.7_eps0.1_acc0.005", "5000", "cqb_eta2")
    run = plan.runs[key]
    assert set(run.seeds) == (set(range(92)) | set(range(100, 300)) | set(range(1000, 1030))
                              | set(range(130000, 130008)))
    assert {"rates_horizons", "stall_check"} <= set(run.experiments)
    stall = next(c for c in plan.curves["stall_check"] if c.label == "cqb_eta2")
    assert stall.seeds == tuple(range(100, 300)) and stall.second_stage_seeds == ()
    rates = {(c.label, c.horizon): c for c in plan.curves["rates_horizons"]}
    assert rates[("cqb_eta2", 5000)].seeds == tuple(range(92)) + tuple(range(130000, 130008))
    assert rates[("cqb_eps", 5000)].seeds == tuple(range(92))  # the other policies keep their seeds
    assert rates[("cqb_eta2", 2000)].seeds == tuple(range(247))  # and the other horizons
    plain, _ = plan_of(base=without)
    extra = {k: len(r.seeds) - len(plain.runs[k].seeds) for k, r in plan.runs.items() if k in plain.runs}
    assert set(plan.runs) == set(plain.runs) and {k: n for k, n in extra.items() if n} == {key: 8}


def seed_uses_of(config):
    from cqb.analysis.powered_reading import powered_claims
    from cqb.studies.confirmatory import confirmatory_claims
    from cqb.studies.multiverse_plan import multiverse_design
    from cqb.studies.claim_specs import claim_specs, seed_uses, tuning_setup

    config.update(yaml.safe_load((REPO / "config" / "datasets.yaml").read_text()))
    validate_config(config, SCHEMA)
    plan = build_plan(config)
    specs = claim_specs(config, plan)
    tuning, _ = tuning_setup(config, plan)
    return seed_uses(config, plan, tuning, powered_claims(config, plan, specs),
                     confirmatory_claims(config, plan, specs), multiverse_design(config, plan, specs))


def test_the_configs_second_stage_has_seeds_no_other_use_reaches():
    """The check the workflow makes (powered.smk, multiverse.smk) on config/config.yaml:
    a future seed range that overlaps Figure 5's second stage fails here."""
    from cqb.studies.claim_specs import check_seed_uses

    uses = seed_uses_of(copy.deepcopy(CONFIG))
    check_seed_uses(uses)
    for name, experiment in CONFIG["experiments"].items():
        if experiment.get("second_stage"):  # a use of its own, not the evaluation's
            assert experiment["second_stage"]["first_seed"] in uses["Figure 5's second stage"], name
    # the same check refuses a second stage on the confirmatory study's seeds, naming both
    uses = seed_uses_of(merged(CONFIG, stage2("rates_horizons", {"cqb_eta2": {2000: 300}}, first_seed=120100)))
    with pytest.raises(ConfigError, match="seeds of the confirmatory study .* shared with Figure 5's second stage"):
        check_seed_uses(uses)


def test_the_replication_study_has_seeds_no_other_use_reaches():
    """Its whole reserved range (first_seed … + max_seeds − 1) is a use of its own."""
    from cqb.studies.claim_specs import check_seed_uses

    uses = seed_uses_of(copy.deepcopy(CONFIG))
    first, cap = CONFIG["replication"]["first_seed"], CONFIG["replication"]["max_seeds"]
    assert uses["the replication study"] == set(range(first, first + cap))
    # moved onto the confirmatory study's seeds (its cap reaching them), it is refused, naming both
    uses = seed_uses_of(merged(CONFIG, {"replication": {"first_seed": 119500}}))
    with pytest.raises(ConfigError, match="seeds of the replication study .* shared with the confirmatory study"):
        check_seed_uses(uses)


def test_smoke_config_keeps_its_seeds_under_the_registered_second_stage():
    smoke = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    plan, config = plan_of(smoke)
    for name in ("rates_horizons", "rates_servers9"):
        experiment = config["experiments"][name]
        by_horizon = {int(k): v for k, v in experiment["seeds_by_horizon"].items()}
        for curve in plan.curves[name]:
            assert curve.seeds == tuple(range(by_horizon.get(curve.horizon, experiment["seeds"])))


def test_the_registered_second_stage_brings_each_T_to_the_published_seeds_needed():
    """The registration (config/config.yaml): the two cells docs/results/fig5_slopes.tsv left
    unresolved, each at the seeds per T its Stein estimate asked for, on fresh seeds from 130000."""
    plan, _ = plan_of()
    registered = {("rates_horizons", "cqb_eta2"): {2000: 2054, 5000: 1528, 10000: 30, 20000: 606, 50000: 787},
                  ("rates_servers9", "cqb_eps"): {3000: 208, 6000: 88, 12000: 10, 25000: 33, 50000: 30}}
    for name in ("rates_horizons", "rates_servers9"):
        for curve in plan.curves[name]:
            total = registered.get((name, curve.label), {}).get(curve.horizon, len(curve.seeds))
            first = len(curve.seeds) - len(curve.second_stage_seeds)
            assert len(curve.seeds) == total, (name, curve.label, curve.horizon)
            assert curve.second_stage_seeds == tuple(range(130000, 130000 + total - first))
            assert curve.seeds[:first] == tuple(range(first))
    extra = {key: sum(len(c.second_stage_seeds) for c in plan.curves[key[0]] if c.label == key[1]) for key in registered}
    assert extra == {("rates_horizons", "cqb_eta2"): 4519, ("rates_servers9", "cqb_eps"): 289}
    # CQB-η-2 on the harder instance has no second stage (no first-stage interval)
    assert not any(c.second_stage_seeds for c in plan.curves["rates_servers9"] if c.label != "cqb_eps")


def test_a_display_name_or_colour_change_reruns_no_simulation(monkeypatch):
    """Presentation is not simulation: a policy restyled (another display name,
    colour and rank) plans the same runs with the same simulate-job params, and
    the code hash the simulate jobs carry is unchanged."""
    from cqb.presentation import PolicyStyle
    from cqb.sim.code_hash import SIMULATION_ROOT, code_hash

    def simulated(plan):
        return {key: (run.instance_id, run.horizon, run.policy, json.dumps(run.params, sort_keys=True),
                      json.dumps(run.instance, sort_keys=True), run.seeds) for key, run in plan.runs.items()}

    before, hash_before = simulated(plan_of()[0]), code_hash(SIMULATION_ROOT)
    monkeypatch.setitem(policy_styles._styles, "cqb_opt", PolicyStyle("Renamed", colour="#000000", order=99))
    restyled = plan_of()[0]
    shown = [curve for curves in restyled.curves.values() for curve in curves if curve.policy == "cqb_opt"]
    assert shown and all(curve.display == "Renamed" for curve in shown if curve.label == "cqb_opt")
    assert simulated(restyled) == before and code_hash(SIMULATION_ROOT) == hash_before


def _real_data_taus(plan) -> dict:
    return {(run.instance_id, run.horizon, run.label): run.params["tau"] for run in plan.runs.values()
            if run.instance["kind"] == "pool" and "tau" in run.params and run.policy.startswith("cqb_eps")}


def test_real_data_tau_is_a_tenth_of_each_runs_horizon():
    """τ = T/10 on real data (the paper, Section 7): 400 at the full config's
    T = 4000 (its runs as when 400 was typed), 30 at the smoke config's T = 300."""
    full = _real_data_taus(plan_of()[0])
    smoke = _real_data_taus(plan_of(yaml.safe_load((REPO / "config" / "smoke.yaml").read_text()))[0])
    assert full and smoke
    assert all(tau == horizon // 10 for (_, horizon, _), tau in {**full, **smoke}.items()), (full, smoke)
    assert {horizon for _, horizon, _ in full} == {4000, 16000} and {300, 600} <= {horizon for _, horizon, _ in smoke}


def test_a_share_of_the_horizon_is_resolved_at_each_runs_horizon_and_refused_elsewhere():
    plan, _ = plan_of(one_experiment(policies=["cqb_eps"], sweep={"horizon": [95, 200]},
                                     policy_params={"cqb_eps": {"tau": "T/10"}}))
    assert sorted(run.params["tau"] for run in plan.runs.values() if run.experiments == ("x",)) == [10, 20]  # ⌈95/10⌉
    with pytest.raises(ConfigError, match="T/0"):
        plan_of(one_experiment(policies=["cqb_eps"], policy_params={"cqb_eps": {"tau": "T/0"}}))
    with pytest.raises(ConfigError, match="bonus_scale"):  # a float parameter takes no share of T
        plan_of(one_experiment(policies=["cqb_eps"], policy_params={"cqb_eps": {"bonus_scale": "T/10"}}))

