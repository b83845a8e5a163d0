"""cqb.sim.policies.parameters: every rule that resolves or refuses a policy's
parameters, with the exact one-line message (mutation testing found these
unchecked: a wrong name in a message, a bound moved by one, a branch swapped),
and the per-server norm bound (norm_bound_kind) end to end."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cqb.sim import policies
from cqb.sim.estimation import LogisticEstimator, check_estimator_params, filippi_projection
from cqb.sim.instances import pool_instance
from cqb.sim.policies import EpsilonParams, PolicyEnv, resolve_params
from cqb.sim.policies import optimistic
from cqb.sim.simulate import draw_trace, play, simulate
from reference_math import confidence_width, estimator_params

SLACK = PolicyEnv(n_servers=2, dim=2, horizon=10_000, arrival_rate=0.5, slack=0.1)
NO_SLACK = PolicyEnv(n_servers=2, dim=2, horizon=10_000, arrival_rate=0.5, slack=None)
ROUNDS = "must be a non-negative integer number of rounds, got"
ETA2_NEEDS = "cqb_eta2 needs eta and cutoff when the instance has no nominal slack"


@pytest.mark.parametrize("policy, params, env, message", [
    ("cqb_eta2", {"eta": 0.1, "tau": 5}, NO_SLACK, ETA2_NEEDS),
    ("cqb_eta2", {"cutoff": 50, "tau": 5}, NO_SLACK, ETA2_NEEDS),
    ("cqb_eta2", {"eta": 1.5}, SLACK, "eta must lie in [0, 1], got 1.5"),
    ("cqb_eta2", {"tau": -1}, SLACK, f"tau {ROUNDS} -1"),
    ("cqb_eta2", {"cutoff": -1}, SLACK, f"cutoff {ROUNDS} -1"),
    ("cqb_eta2", {"phase1_server": "first"}, SLACK,
     "phase1_server must be one of ('round_robin', 'uniform'), got 'first'"),
    ("cqb_eps", {"explore_prob": 2}, SLACK, "explore_prob must lie in [0, 1], got 2"),
    ("cqb_eps", {"tau": -3}, SLACK, f"tau {ROUNDS} -3"),
    ("cqb_eps", {"phase1_server": "first"}, SLACK,
     "phase1_server must be one of ('round_robin', 'uniform'), got 'first'"),
    ("cqb_eps", {}, NO_SLACK, "tau is null but the instance has no nominal slack to compute it from; "
                              "give tau explicitly (the real-data experiments use tau = T/10)"),
    # slack = 2·explore_prob exactly: the margin is 0, not a division by zero
    ("cqb_eps", {"explore_prob": 0.05}, SLACK,
     "tau formula needs slack > 2·explore_prob, got slack=0.1 and explore_prob=0.05"),
    ("cqb_eps_opt", {"explore_prob": -0.5}, SLACK, "explore_prob must lie in [0, 1], got -0.5"),
    ("cqb_ts", {"ts_mode": "sample"}, SLACK, "ts_mode must be one of ('score', 'parameter'), got 'sample'"),
    ("q_ucb", {"explore_constant": -1}, SLACK, "explore_constant must be ≥ 0, got -1"),
])
def test_bad_parameter_is_refused_with_its_name_and_value(policy, params, env, message):
    with pytest.raises(ValueError) as error:
        policies.resolve_params(policy, params, env)
    assert str(error.value) == message


@pytest.mark.parametrize("policy, params, env, expected", [
    ("cqb_eta2", {"eta": 0.1, "cutoff": 50, "tau": 5}, NO_SLACK, {"eta": 0.1, "cutoff": 50, "tau": 5}),
    ("cqb_eta2", {"tau": 0, "cutoff": 0, "eta": 1, "phase1_server": "uniform"}, SLACK,
     {"tau": 0, "cutoff": 0, "eta": 1, "phase1_server": "uniform"}),
    ("cqb_eps", {"tau": 0, "explore_prob": 1}, SLACK, {"tau": 0, "explore_prob": 1}),
    ("cqb_eps_opt", {"explore_prob": 0.2}, SLACK, {"explore_prob": 0.2}),
    ("cqb_eps_opt", {}, SLACK, {"explore_prob": 0.01}),  # T^(-1/2)
    ("q_ucb", {"explore_constant": 0}, SLACK, {"explore_constant": 0}),
])
def test_boundary_values_are_accepted_as_given(policy, params, env, expected):
    resolved = policies.resolve_params(policy, params, env)
    assert {key: getattr(resolved, key) for key in expected} == expected


def test_a_non_integer_tau_given_to_the_dataclass_directly_is_refused():
    # resolve_params checks types first; the dataclass's own check is the last line
    with pytest.raises(ValueError, match=rf"^tau {ROUNDS} 12.5$"):
        EpsilonParams(tau=12.5).resolve(SLACK)


def test_the_estimator_reads_every_field_by_name():
    """The core takes the resolved dataclass itself: each field lands where
    docs/model.md#the-per-server-logistic-estimator puts it (a field read
    under another name would show here)."""
    from cqb.policies import EstimatorParams

    values = dict(reg=0.5, kappa=3.0, delta=0.02, norm_bound=2.0, projection="euclidean", design_reg="plain",
                  newton_tol=1e-5, newton_max_iter=7, refit_growth=0.4, refit_min_samples=3)
    params = EstimatorParams(**values)
    est = LogisticEstimator(2, 3, 10, params)
    assert est.params is params
    assert est.ridge == 0.5 and est.norm_bounds.tolist() == [2.0, 2.0]  # plain: λ₀, not κλ₀
    np.testing.assert_array_equal(est.design_inv[0], np.eye(3) / 0.5)
    assert est.widths[0] == pytest.approx(confidence_width(params, 3, 2, 0), rel=1e-14)
    assert LogisticEstimator(2, 3, 10, estimator_params(reg=0.5, kappa=3.0)).ridge == 1.5  # κλ₀
    # refit schedule: every sample below 3, then n + ⌈0.4 n⌉
    rng = np.random.default_rng(0)
    refitted_at = []
    for n in range(1, 11):
        before = est.refits
        est.update(0, rng.normal(size=3), float(n % 2))
        if est.refits > before:
            refitted_at.append(n)
    assert refitted_at == [1, 2, 3, 5, 7, 10]


def test_estimator_defaults_resolve_from_the_instance():
    from cqb.policies import EstimatorParams

    resolved = EstimatorParams().resolve(SLACK)
    assert resolved.delta == 1 / 10_000 and resolved.norm_bound == 2 ** 0.5  # 1/T and √d
    stated = PolicyEnv(n_servers=2, dim=2, horizon=10_000, arrival_rate=0.5, slack=0.1, norm_bound=2.5)
    assert EstimatorParams().resolve(stated).norm_bound == 2.5
    assert EstimatorParams(bonus_scale=0).resolve(SLACK).bonus_scale == 0


@pytest.mark.parametrize("bonus_scale", [-1.0, float("inf")])
def test_bonus_scale_must_be_finite_and_non_negative(bonus_scale):
    from cqb.policies import EstimatorParams

    with pytest.raises(ValueError, match=rf"^bonus_scale must be a non-negative number, got {bonus_scale!r}$"):
        EstimatorParams(bonus_scale=bonus_scale).resolve(SLACK)


# ================================================================ the per-server norm bound
# The per-server norm bound (policy parameter norm_bound_kind = "per_server"):
# server k's β_k and projection radius use S_k = ‖θ*_k‖; the default "shared"
# keeps one S for every server. Expected values are computed here anew.

CQB_POLICIES = tuple(name for name in policies.builtin_policies()
                     if issubclass(policies.get_spec(name).params, policies.EstimatorParams))
# Parameters a pool instance (no nominal slack) needs to resolve.
POOL_PARAMS = {"cqb_eps": {"tau": 50}, "cqb_eta2": {"tau": 50, "eta": 0.05, "cutoff": 400}}


def beta(kappa, reg, dim, n_servers, delta, bound, n_samples):
    """β = (κ/2)√(2d log(1 + N/(κλ₀d)) + log(K/δ)) + κS√λ₀/2 (the paper's §5)."""
    return (kappa / 2) * math.sqrt(2 * dim * math.log(1 + n_samples / (kappa * reg * dim))
                                   + math.log(n_servers / delta)) + kappa * bound * math.sqrt(reg) / 2


def _instance(scales=(0.5, 3.0, 1.5), dim=4, seed=0, n_pool=300):
    """K = 3 servers (≠ d, so norms along the wrong axis cannot pass) of distinct norms."""
    rng = np.random.default_rng(seed)
    directions = rng.normal(size=(len(scales), dim))
    theta = directions / np.linalg.norm(directions, axis=1, keepdims=True) * np.array(scales)[:, None]
    contexts = rng.normal(size=(n_pool, dim))
    contexts /= np.linalg.norm(contexts, axis=1, keepdims=True)
    return pool_instance(theta, contexts, 0.3)


def _played_estimator(monkeypatch, policy, params, instance, horizon=500, seed=3):
    """Play the policy and return (its estimator, its resolved parameters)."""
    captured = {}
    original = optimistic.OptimisticScorer

    def keep(env, contexts, resolved):
        scorer = original(env, contexts, resolved)
        captured["estimator"] = scorer.estimator
        return scorer

    monkeypatch.setattr(optimistic, "OptimisticScorer", keep)
    _, resolved = play(instance, draw_trace(instance, horizon, seed), policy, params, seed)
    return captured["estimator"], resolved


@pytest.mark.parametrize("policy", CQB_POLICIES)
def test_each_servers_beta_uses_its_own_theta_norm(monkeypatch, policy):
    instance = _instance()
    params = {**POOL_PARAMS.get(policy, {}), "norm_bound_kind": "per_server"}
    est, resolved = _played_estimator(monkeypatch, policy, params, instance)
    norms = [float(np.sqrt(row @ row)) for row in instance.theta]  # ‖θ*_k‖, computed here
    assert resolved["norm_bound"] == pytest.approx(norms, rel=1e-12)
    assert est.counts.min() > 0  # every server was updated: the per-update width is checked
    for k in range(instance.n_servers):
        expected = beta(resolved["kappa"], resolved["reg"], instance.dim, instance.n_servers,
                        resolved["delta"], norms[k], int(est.counts[k]))
        assert est.widths[k] == pytest.approx(expected, rel=1e-12), f"server {k}"


def test_initial_widths_are_per_server():
    bounds = (0.5, 3.0, 1.5)
    config = estimator_params(kappa=4.0, reg=0.5, delta=0.01, norm_bound=bounds)
    est = LogisticEstimator(3, 2, 5, config)
    expected = [beta(4.0, 0.5, 2, 3, 0.01, bound, 0) for bound in bounds]
    np.testing.assert_allclose(est.widths, expected, rtol=1e-12)
    np.testing.assert_allclose(confidence_width(config, 2, 3, [7, 0, 30]),
                               [beta(4.0, 0.5, 2, 3, 0.01, b, n) for b, n in zip(bounds, [7, 0, 30])],
                               rtol=1e-12)


@pytest.mark.parametrize("projection", ["filippi", "euclidean"])
def test_projection_radius_is_the_servers_own_bound(projection):
    """The same data at every server: the MLE leaves the balls of radius 0.5
    and 2, whose servers' estimates must land on their own sphere ‖θ‖ = S_k,
    and stays inside the loose ball of the last server (no projection)."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(60, 3))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = (X @ np.array([6.0, 0, 0]) > 0).astype(float)
    bounds = (0.5, 2.0, 1e6)
    est = LogisticEstimator(3, 3, 60, estimator_params(norm_bound=bounds, projection=projection, reg=0.01))
    for i in range(60):
        for k in range(3):
            est.update(k, X[i], y[i])
    np.testing.assert_array_equal(est.theta[2], est.mle[2])
    for k, bound in enumerate(bounds[:2]):
        mle = est.mle[k]
        assert np.linalg.norm(mle) > bound  # the projection is active at every server
        assert np.linalg.norm(est.theta[k]) == pytest.approx(bound, rel=1e-9), f"server {k}"
        radial = mle * bound / np.linalg.norm(mle)
        if projection == "euclidean":
            expected = radial
        else:
            expected = filippi_projection(X, mle, est.design_inv[k], 0.01, bound, radial).theta
        # both KKT points to the solver's tolerance, from different starts (the estimator warm-starts)
        np.testing.assert_allclose(est.theta[k], expected, rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("policy", CQB_POLICIES)
def test_shared_is_the_scalar_path(policy):
    """Default == "shared" == the instance's S given explicitly; a per-server
    tuple of equal values == that value as a scalar (bit for bit)."""
    instance = _instance()
    params = POOL_PARAMS.get(policy, {})
    runs = [simulate(instance, policy, {**params, **extra}, 400, 1)
            for extra in ({}, {"norm_bound_kind": "shared"}, {"norm_bound": instance.norm_bound})]
    for run in runs[1:]:
        np.testing.assert_array_equal(run.queue, runs[0].queue)
        np.testing.assert_array_equal(run.gap, runs[0].gap)
    assert runs[0].metadata["policy_params"]["norm_bound"] == instance.norm_bound
    equal = _instance(scales=(2.0, 2.0, 2.0))
    shared = simulate(equal, policy, params, 400, 1)
    per_server = simulate(equal, policy, {**params, "norm_bound_kind": "per_server"}, 400, 1)
    np.testing.assert_array_equal(per_server.queue, shared.queue)
    np.testing.assert_array_equal(per_server.gap, shared.gap)


def test_per_server_changes_the_run_when_the_norms_differ():
    instance = _instance()
    shared = simulate(instance, "cqb_opt", None, 600, 1)
    per_server = simulate(instance, "cqb_opt", {"norm_bound_kind": "per_server"}, 600, 1)
    assert not np.array_equal(shared.gap, per_server.gap, equal_nan=True)


def test_synthetic_instances_give_their_theta_norms():
    spec = {"kind": "synthetic", "n_servers": 3, "dim": 4, "arrival_rate": 0.5, "slack": 0.1}
    run = simulate(spec, "cqb_opt", {"norm_bound_kind": "per_server"}, 50, 0)
    theta_norms = run.metadata["policy_params"]["norm_bound"]
    assert len(theta_norms) == 3 and max(theta_norms) == pytest.approx(run.metadata["instance"]["theta_max_norm"])


ENV = PolicyEnv(n_servers=3, dim=2, horizon=100, arrival_rate=0.5, slack=0.2, server_norm_bounds=(1.0, 2.0, 3.0))


@pytest.mark.parametrize("params,message", [
    ({"norm_bound_kind": "per-server"}, "norm_bound_kind must be one of ('shared', 'per_server'), got 'per-server'"),
    ({"norm_bound_kind": "per_server", "norm_bound": 2.0}, "norm_bound must be null with norm_bound_kind 'per_server'"),
])
def test_bad_values_are_one_clear_line(params, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")) as error:
        resolve_params("cqb_opt", params, ENV)
    assert "\n" not in str(error.value)


def test_per_server_needs_the_norms_and_one_per_server():
    env = PolicyEnv(n_servers=3, dim=2, horizon=100, arrival_rate=0.5, slack=0.2)
    with pytest.raises(ValueError, match="needs the instance's θ"):
        resolve_params("cqb_opt", {"norm_bound_kind": "per_server"}, env)
    with pytest.raises(ValueError, match="needs 3 values"):
        LogisticEstimator(3, 2, 5, estimator_params(norm_bound=(1.0, 2.0)))
    with pytest.raises(ValueError, match="must be positive numbers"):
        check_estimator_params(estimator_params(norm_bound=(1.0, -2.0)))
