"""cqb.sim.policies.parameters: every rule that resolves or refuses a policy's
parameters, with the exact one-line message (mutation testing found these
unchecked: a wrong name in a message, a bound moved by one, a branch swapped)."""

from __future__ import annotations

import pytest

from cqb import policies
from cqb.policies import EpsilonParams, PolicyEnv

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


def test_estimator_config_carries_every_field():
    from cqb.sim.estimation import EstimatorConfig
    from cqb.policies import EstimatorParams

    values = dict(reg=0.5, kappa=3.0, delta=0.02, norm_bound=2.0, projection="euclidean", design_reg="plain",
                  newton_tol=1e-5, newton_max_iter=7, refit_growth=0.4, refit_min_samples=3)
    assert EstimatorParams(**values).estimator_config() == EstimatorConfig(**values)


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
