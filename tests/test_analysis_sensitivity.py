"""Figure 7 without Snakemake: construction variants (cqb.data.variants) and the
verdict grid (cqb.analysis.sensitivity), plus the config's grid: every cell has its claim."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy.special import expit

from cqb.analysis.verdict_rules import FAILS, HOLDS
from cqb.analysis.claims.registry import ClaimSpec
from cqb.datasets.registry import datasets_schema
from cqb.data.semisynthetic import build_pool_instance
from cqb.data.variants import (ConstructionVariant, build_variant_instance, group_labels,
                               standardise_columns, variant_for_dataset)
from cqb.errors import ConfigError
from cqb.config.schema import validate_config, validate_with_defaults
from cqb.config.experiments import build_plan
from cqb.analysis.sensitivity import (Cell, cell_rows, grid_cells, render_summary, sensitivity_table)
from cqb.studies.claim_specs import claim_specs

REPO = Path(__file__).resolve().parent.parent


def labelled_pool(n=300, d=4, k=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * np.array([1.0, 5.0, 0.1, 2.0])[:d]
    y = rng.integers(0, k, size=n)
    X[np.arange(n), y % d] += 2.0  # some signal for the fit
    return X, y


# ---- construction variants -------------------------------------------------

def test_default_variant_reproduces_the_default_construction_exactly():
    X, y = labelled_pool()
    default = build_pool_instance(X, y)
    variant = build_variant_instance(X, y, ConstructionVariant("default"))
    assert np.array_equal(variant.contexts, default.contexts)
    assert np.array_equal(variant.theta, default.theta)
    assert np.array_equal(variant.labels, default.labels)


def test_ridge_weight_changes_the_fit_and_its_norms():
    X, y = labelled_pool()
    weak = build_variant_instance(X, y, ConstructionVariant("a", C=10.0)).report["instance"]
    strong = build_variant_instance(X, y, ConstructionVariant("b", C=0.01)).report["instance"]
    assert strong["theta_norm_max"] < weak["theta_norm_max"]
    assert strong["C"] == 0.01


def test_intercept_is_a_constant_feature_inside_the_unit_ball():
    X, y = labelled_pool()
    pool = build_variant_instance(X, y, ConstructionVariant("i", intercept=True))
    assert pool.contexts.shape[1] == X.shape[1] + 1
    constant = pool.contexts[:, -1]
    assert np.allclose(constant, constant[0]) and constant[0] > 0
    assert np.linalg.norm(pool.contexts, axis=1).max() == pytest.approx(1.0)


def test_standardised_scaling_standardises_columns_before_the_common_factor():
    X, y = labelled_pool()
    X[:, 2] = 3.0  # a constant column stays 0, not nan
    Z = standardise_columns(X)
    assert np.allclose(Z[:, [0, 1, 3]].std(axis=0), 1.0) and np.all(Z[:, 2] == 0)
    pool = build_variant_instance(X, y, ConstructionVariant("s", scaling="standardise"))
    ratio = pool.contexts[:, [0, 1, 3]] / Z[:, [0, 1, 3]]
    assert np.allclose(ratio, ratio[0, 0])  # one factor for every row and column


def test_server_groups_merge_labels_into_fewer_servers():
    labels = np.array([0, 1, 2, 3, 4, 5])
    assert group_labels(labels, ((0, 1), (2, 3), (4, 5))).tolist() == [0, 0, 1, 1, 2, 2]
    assert group_labels(labels, ((5, 0), (1, 2, 3, 4))).tolist() == [0, 1, 1, 1, 1, 0]
    X, y = labelled_pool(k=4)
    pool = build_variant_instance(X, y, ConstructionVariant("g", server_groups=((0, 1), (2, 3))))
    assert pool.theta.shape[0] == 2 and set(pool.labels.tolist()) == {0, 1}
    assert pool.report["instance"]["K"] == 2


def test_slack_filter_keeps_exactly_the_rows_that_meet_the_best_rate():
    X, y = labelled_pool(n=600)
    unfiltered = build_variant_instance(X, y, ConstructionVariant("u"))
    best = expit(unfiltered.contexts @ unfiltered.theta.T).max(axis=1)
    threshold = float(np.quantile(best, 0.3))
    pool = build_variant_instance(X, y, ConstructionVariant("f", min_best_rate=threshold))
    assert np.array_equal(pool.theta, unfiltered.theta)  # the fit uses the whole pool
    assert pool.contexts.shape[0] == int((best >= threshold).sum()) < unfiltered.contexts.shape[0]
    report = pool.report["instance"]
    assert report["best_rate_min"] >= threshold
    assert report["n_pool_before_filter"] == 600


@pytest.mark.parametrize("settings, message", [
    ({"C": 0}, "C must be a positive number"),
    ({"scaling": "unit"}, "scaling must be one of"),
    ({"min_best_rate": 1.5}, "min_best_rate must lie in"),
    ({"server_groups": ((0, 1), (1, 2))}, "each label once"),
    ({"server_groups": ((0,), (2,))}, "each label once"),
])
def test_bad_variant_settings_are_named(settings, message):
    with pytest.raises(ValueError, match=message):
        ConstructionVariant("bad", **settings)


def test_config_entry_is_read_at_its_dataset():
    entry = {"min_best_rate": {"mnist": 0.2, "coupon": 0.55}, "preprocess": {"coupon": {"missing": "drop"}},
             "server_groups": {"mnist": [[0, 1], [2]]}}
    coupon = variant_for_dataset("v", entry, "coupon")
    assert coupon.min_best_rate == 0.55 and coupon.preprocess == {"missing": "drop"} and not coupon.server_groups
    mnist = variant_for_dataset("v", entry, "mnist")
    assert mnist.min_best_rate == 0.2 and mnist.preprocess == {} and mnist.server_groups == ((0, 1), (2,))
    with pytest.raises(ValueError, match="does not apply to dataset 'mnist'"):
        variant_for_dataset("only_coupon", {"datasets": ["coupon"]}, "mnist")


def test_configured_variants_are_valid_for_their_datasets():
    data = yaml.safe_load((REPO / "config" / "datasets.yaml").read_text())["data"]
    for name, entry in data["variants"].items():
        for dataset in entry.get("datasets", data["datasets"]):
            variant = variant_for_dataset(name, entry, dataset)
            assert not variant.is_default, name  # a variant must move some choice


# ---- the grid ---------------------------------------------------------------

def runs_table(regrets: dict, stalled=()):
    """A per-run summary table: {label: per-seed mean regrets}."""
    rows = []
    for label, values in regrets.items():
        for seed, value in enumerate(values):
            rows.append({"policy": label, "sweep_param": "", "sweep_value": "", "seed": seed,
                         "mean_regret": value, "final_queue": 10 * value,
                         "stalled": (label, seed) in stalled})
    return pd.DataFrame(rows)


def cell(norm_bound=None, arrival_rate=0.2):
    spec = ClaimSpec(name="c", statement="s", kind="best", experiment="x_v", policies=("cqb_eps",),
                     metric="mean_regret")
    return Cell(dataset="x", column="v", column_label="V", choice="choice", experiment="x_v",
                report="r.json", arrival_rate=arrival_rate, horizon=100, norm_bound=norm_bound,
                policies=(("cqb_eps", "cqb_eps"), ("cqb_opt", "cqb_opt"), ("random", "random")), spec=spec)


REPORT = {"instance": {"K": 3, "d": 4, "n_pool": 50, "best_rate_min": 0.26, "kappa_measured": 12.5,
                       "theta_norm_max": 8.0}}


def test_cell_reports_verdict_rank_slack_and_the_norm_bound_used():
    runs = runs_table({"cqb_eps": [1.0, 1.1, 0.9, 1.0], "cqb_opt": [2.0, 2.2, 1.9, 2.1],
                       "random": [9.0, 8.0, 9.5, 8.5]}, stalled={("random", 1)})
    rows = cell_rows(cell(), runs, REPORT, slack_margin=0.05)
    assert [r["label"] for r in rows] == ["cqb_eps", "cqb_opt", "random"]
    first = rows[0]
    assert first["verdict"] == HOLDS and first["eps_rank"] == 1 and first["decisive"] == "cqb_opt"
    assert first["value"] == pytest.approx(1.05)
    assert first["slack"] == pytest.approx(0.06) and first["lambda_for_margin"] == pytest.approx(0.21)
    assert first["norm_bound"] == 8.0  # no configured S: max ‖θ*‖
    assert rows[2]["n_stalled"] == 1 and rows[0]["n_stalled"] == 0
    assert cell_rows(cell(norm_bound=2.0), runs, REPORT, 0.05)[0]["norm_bound"] == 2.0


def test_a_per_server_cell_reports_the_range_of_its_bounds():
    runs = runs_table({"cqb_eps": [1.0, 1.1, 0.9, 1.0], "cqb_opt": [2.0, 2.2, 1.9, 2.1],
                       "random": [9.0, 8.0, 9.5, 8.5]})
    report = {"instance": {**REPORT["instance"], "theta_norms": [5.0, 8.0, 2.5]}}
    per_server = Cell(**{**cell().__dict__, "norm_bound_kind": "per_server"})
    row = cell_rows(per_server, runs, report, 0.05)[0]
    assert (row["norm_bound"], row["norm_bound_min"]) == (8.0, 2.5)
    shared = cell_rows(cell(norm_bound=2.0), runs, report, 0.05)[0]
    assert (shared["norm_bound"], shared["norm_bound_min"]) == (2.0, 2.0)
    table = sensitivity_table([per_server], {"x_v": runs}, {"r.json": report}, 0.05)
    text = render_summary(table, ["x"], [{"name": "v", "label": "V", "choice": "c"}])
    assert "| 12.5 | 2.5–8 per server | 1/3 |" in text


def test_cell_where_another_policy_wins_does_not_hold_and_ranks_second():
    runs = runs_table({"cqb_eps": [3.0, 3.1, 2.9, 3.0], "cqb_opt": [1.0, 1.2, 0.9, 1.1],
                       "random": [9.0, 8.0, 9.5, 8.5]})
    row = cell_rows(cell(), runs, REPORT, 0.05)[0]
    assert row["verdict"] == FAILS and row["eps_rank"] == 2 and row["decisive"] == "cqb_opt"


def test_summary_numbers_come_from_the_table():
    runs = runs_table({"cqb_eps": [1.0, 1.1, 0.9, 1.0], "cqb_opt": [2.0, 2.2, 1.9, 2.1],
                       "random": [9.0, 8.0, 9.5, 8.5]})
    table = sensitivity_table([cell()], {"x_v": runs}, {"r.json": REPORT}, 0.05)
    text = render_summary(table, ["x"], [{"name": "v", "label": "V", "choice": "c"}])
    assert "holds in 1**" in text and "does not hold in 0**" in text
    assert "| x | V | 0.2 | 100 | 0.060 | 12.5 | 8 | 1/3 |" in text
    table.loc[:, "slack"] = 0.123  # a changed table changes the text
    assert "0.123" in render_summary(table, ["x"], [{"name": "v", "label": "V", "choice": "c"}])


def full_config():
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config.update(yaml.safe_load((REPO / "config" / "datasets.yaml").read_text()))
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    validate_config(config, schema)
    validate_with_defaults(config, datasets_schema(yaml.safe_load((REPO / "workflow" / "schemas" / "datasets.schema.yaml").read_text())))
    return config


def test_every_grid_cell_of_the_config_has_its_best_claim_and_uses_the_evaluation_seeds():
    config = full_config()
    plan = build_plan(config)
    cells = grid_cells(plan.grid, plan, claim_specs(config, plan))
    assert {(c.dataset, c.column) for c in cells} >= {("mnist", "default"), ("coupon", "assumptions")}
    for c in cells:
        assert c.spec.metric == "tail_regret" and c.spec.policies[0].startswith("cqb_eps")
        assert c.spec.quote.startswith("The results in Figure 4 show") and c.spec.readings
        assert {seed for curve in plan.curves[c.experiment] for seed in curve.seeds} == set(range(10))
        labels = {label for label, _ in c.policies}
        assert len(labels) == 7, c.experiment  # the seven policies of the brief, oracle excluded
        claimed = next(curve for curve in plan.curves[c.experiment] if curve.base_label == c.spec.policies[0])
        assert claimed.params["tau"] == c.horizon // 10, c.experiment  # τ = T/10 (the paper's rule)
    assert {c.column for c in cells} >= {"C0p1", "C10", "intercept", "standardised", "T16000"}
    assert {c.horizon for c in cells if c.column == "T16000"} == {16000}
    sqrt_d = next(c for c in cells if c.experiment == "mnist_sqrt_d")
    assert sqrt_d.norm_bound == pytest.approx(7.0)
    per_server = [c for c in cells if c.column == "per_server_S"]
    assert {c.dataset for c in per_server} == {"mnist", "heart_disease", "coupon"}
    assert all(c.norm_bound_kind == "per_server" and c.norm_bound is None for c in per_server)
    assert all(c.norm_bound_kind == "shared" for c in cells if c.column != "per_server_S")


def test_a_grid_cell_without_its_figure4_claim_is_refused_by_name():
    config = full_config()
    config = copy.deepcopy(config)
    config["claims"] = [c for c in config["claims"] if c["experiment"] != "coupon"]
    plan = build_plan(config)
    with pytest.raises(ConfigError, match="Figure 4 experiment coupon has no `best` claim"):
        claim_specs(config, plan)


def test_the_grid_claims_are_generated_one_per_cell_with_an_experiment():
    config = full_config()
    plan = build_plan(config)
    specs = claim_specs(config, plan)
    generated = [s for s in specs if s.figure == "fig7"]
    cells = grid_cells(plan.grid, plan, specs)
    assert {s.experiment for s in generated} == {c.experiment for c in cells if c.column != "default"}
    assert next(s for s in generated if s.experiment == "mnist_sqrt_d").policies == ("cqb_eps_sqrtd",)
    assert "Heart Disease" in next(s for s in generated if s.experiment == "heart_disease_C10").statement
