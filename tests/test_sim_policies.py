"""Direct tests of the learning core against formulas written anew here.

Each policy's decision is compared with the decision its formula in docs/model.md (the paper's §5–§6)
implies, computed in the test from the estimator's data (V_k rebuilt from the
served contexts and inverted by numpy, β_k from the formula below), or, for
the randomised rules, from an identically seeded generator or from the law of
many draws. A policy that drops its bonus, swaps Beta parameters or skips the
projection picks a different pair in some round and fails here.
"""

import math
import sys

import numpy as np
import pytest
from scipy.optimize import minimize, root
from scipy.stats import norm

from cqb.sim.estimation import filippi_projection
from cqb.sim.streams import instance_from_spec
from cqb.policies import EtaParams, PolicyEnv, make_policy, resolve_params
from cqb.sim.rng import stream
from cqb.sim.simulate import draw_trace, policy_env, run_policy
from reference_math import fit_logistic


def spec_beta(kappa, reg, dim, n_servers, delta, norm_bound, n_samples):
    """β_k = (κ/2)√(2d log(1 + N_k/(κλ₀d)) + log(K/δ)) + κS√λ₀/2 (the paper's §5)."""
    return (kappa / 2) * math.sqrt(2 * dim * math.log(1 + n_samples / (kappa * reg * dim))
                                   + math.log(n_servers / delta)) + kappa * norm_bound * math.sqrt(reg) / 2


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def spec_index(estimator, params, contexts):
    """(means, bonuses) of docs/model.md#the-confidence-widths-and-the-index for every row of ``contexts`` and server,
    from the estimator's data: V_k = ridge·I + Σ x xᵀ inverted here, β_k from
    spec_beta with the policy's resolved parameters."""
    ridge = params.kappa * params.reg if params.design_reg == "kappa" else params.reg
    n_servers, dim = estimator.n_servers, estimator.dim
    means = np.empty((contexts.shape[0], n_servers))
    bonuses = np.empty_like(means)
    for k in range(n_servers):
        n = int(estimator.counts[k])
        X = estimator.features[k, :n]
        design_inv = np.linalg.inv(ridge * np.eye(dim) + X.T @ X)
        beta = spec_beta(params.kappa, params.reg, dim, n_servers, params.delta, params.norm_bound, n)
        means[:, k] = sigmoid(contexts @ estimator.theta[k])
        bonuses[:, k] = params.bonus_scale * beta * np.sqrt(np.einsum("nd,de,ne->n", contexts, design_inv,
                                                                      contexts))
    return means, bonuses


class IndexChecker:
    """Wraps a CQB policy; at every UCB decision checks that the chosen pair
    maximises the index of docs/model.md (to rounding) and counts the rounds where the
    bonus changed the decision."""

    def __init__(self, inner, params, contexts):
        self.inner, self.params, self.contexts = inner, params, contexts
        self.checked = self.bonus_decisive = 0

    def choose(self, t, queue, new_arrival):
        position, server, explored = self.inner.choose(t, queue, new_arrival)
        if not explored:
            means, bonuses = spec_index(self.inner.scorer.estimator, self.params, self.contexts[queue])
            index = means + bonuses
            assert index[position, server] >= index.max() - 1e-9, f"round {t}: not the argmax of the index"
            self.checked += 1
            greedy = np.unravel_index(means.argmax(), means.shape)
            self.bonus_decisive += means[greedy] > means[position, server] + 1e-9
        return position, server, explored

    def observe(self, t, job, server, success):
        self.inner.observe(t, job, server, success)


INSTANCE_K4_D3 = {"kind": "synthetic", "n_servers": 4, "dim": 3, "arrival_rate": 0.7, "slack": 0.1}
OPTIMISTIC = {
    "cqb_opt": {"bonus_scale": 0.3},
    "cqb_eps": {"tau": 60, "explore_prob": 0.2, "bonus_scale": 0.3},
    "cqb_eps_opt": {"explore_prob": 0.2, "bonus_scale": 0.3},
    "cqb_eta2": {"tau": 60, "eta": 0.2, "cutoff": 400, "bonus_scale": 0.3},
}


@pytest.mark.parametrize("policy", sorted(OPTIMISTIC))
def test_optimistic_policies_choose_the_argmax_of_the_spec_index(policy):
    instance = instance_from_spec(INSTANCE_K4_D3, stream(1, "instance"))
    trace = draw_trace(instance, 600, 1)
    inner, params = make_policy(policy, policy_env(instance, 600), trace.contexts, stream(1, "policy"),
                                OPTIMISTIC[policy], trace.true_means)
    checker = IndexChecker(inner, params, trace.contexts)
    run_policy(checker, trace)
    assert checker.checked > 200
    assert checker.bonus_decisive > 10  # the bonus, not the mean alone, decided these rounds


def test_bonus_scale_enters_the_index_linearly():
    rng = np.random.default_rng(2)
    contexts = rng.normal(size=(80, 3))
    contexts /= np.linalg.norm(contexts, axis=1, keepdims=True)
    outcomes = rng.random(60) < 0.5
    env = PolicyEnv(4, 3, 500, 0.7, 0.1)
    queue = np.arange(60, 80)
    scorers = {}
    for scale in (0.05, 0.15):
        policy, _ = make_policy("cqb_opt", env, contexts, stream(0, "policy"), {"bonus_scale": scale})
        for i, success in enumerate(outcomes):
            policy.observe(i + 1, i, i % 4, bool(success))
        policy.scorer.refresh(queue, queue.shape[0])
        scorers[scale] = policy.scorer
    np.testing.assert_allclose(scorers[0.15].bonuses[queue], 3 * scorers[0.05].bonuses[queue], rtol=1e-12)
    np.testing.assert_array_equal(scorers[0.15].means[queue], scorers[0.05].means[queue])
    assert scorers[0.05].bonuses[queue].min() > 0


# -------------------------------------------------------------------- Q-UCB and Q-ThS


@pytest.mark.parametrize("name", ["q_ucb", "q_ths"])
def test_queue_bandits_follow_their_formulas_round_by_round(name):
    n_servers, constant, horizon = 3, 0.3, 2000
    env = PolicyEnv(n_servers, 2, horizon, 0.5, None)
    policy, _ = make_policy(name, env, np.zeros((1, 2)), np.random.default_rng(11),
                            {"explore_constant": constant})
    reference = np.random.default_rng(11)  # replays the policy's draws in the same order
    outcomes = np.random.default_rng(12)
    rates = np.array([0.3, 0.7, 0.5])
    successes, trials = np.zeros(n_servers), np.zeros(n_servers)
    explored = exploit_differs_from_greedy = 0
    for t in range(1, horizon + 1):
        log_t = math.log(t)
        if reference.random() < min(1.0, constant * n_servers * log_t ** 2 / t):
            expected = (0, int(reference.integers(n_servers)), True)
            explored += 1
        else:
            if name == "q_ucb":
                index = np.array([np.inf if n == 0 else s / n + math.sqrt(log_t ** 2 / (2 * n))
                                  for s, n in zip(successes, trials)])
            else:
                index = np.array([reference.beta(s + 1, n - s + 1) for s, n in zip(successes, trials)])
            expected = (0, int(index.argmax()), False)
            greedy = int(np.argmax(np.where(trials > 0, successes / np.maximum(trials, 1), np.inf)))
            exploit_differs_from_greedy += int(index.argmax()) != greedy
        assert policy.choose(t, np.array([0, 1]), False) == expected, f"round {t}"
        server = expected[1]
        success = bool(outcomes.random() < rates[server])
        policy.observe(t, 0, server, success)
        successes[server] += success
        trials[server] += 1
    assert 20 < explored < horizon - 500
    assert exploit_differs_from_greedy > 5


# -------------------------------------------------------------------- Thompson sampling


def _trained_thompson(mode, bonus_scale):
    rng = np.random.default_rng(21)
    contexts = rng.normal(size=(200, 3))
    contexts /= np.linalg.norm(contexts, axis=1, keepdims=True)
    contexts[197:] = np.eye(3)  # unit vectors (never served in training): their logits are θ itself
    env = PolicyEnv(2, 3, 1000, 0.7, 0.1)
    policy, params = make_policy("cqb_ts", env, contexts, np.random.default_rng(5),
                                 {"ts_mode": mode, "bonus_scale": bonus_scale})
    theta_true = np.array([[1.0, -1.0, 0.5], [-0.5, 1.0, 1.0]])
    for i in range(150):
        server = i % 2
        policy.observe(i + 1, i, server, bool(rng.random() < sigmoid(contexts[i] @ theta_true[server])))
    return policy, params, contexts


def test_thompson_parameter_mode_draws_from_the_spec_gaussian(monkeypatch):
    policy, params, _ = _trained_thompson("parameter", 0.05)
    est = policy.scorer.estimator
    dim = est.dim
    # With the unit vectors as the queue's contexts, the scores' logits are θ̃ itself.
    unit_rows = np.arange(197, 200)
    np.testing.assert_array_equal(policy.scorer.contexts[unit_rows], np.eye(dim))
    captured = []
    module = sys.modules[type(policy).__module__]
    monkeypatch.setattr(module, "logistic", lambda z: captured.append(np.array(z)) or sigmoid(np.asarray(z)))
    draws = 4000
    for t in range(draws):
        policy.choose(1000, unit_rows, False)
    sampled = np.stack(captured).transpose(2, 0, 1)  # (server, draw, d)
    for k in range(est.n_servers):
        n = int(est.counts[k])
        X = est.features[k, :n]
        design_inv = np.linalg.inv(params.kappa * params.reg * np.eye(dim) + X.T @ X)
        beta = spec_beta(params.kappa, params.reg, dim, est.n_servers, params.delta, params.norm_bound, n)
        covariance = params.bonus_scale ** 2 * beta ** 2 * design_inv
        whitened = np.linalg.solve(np.linalg.cholesky(covariance), (sampled[k] - est.theta[k]).T).T
        # whitened draws are N(0, I): mean within 5 standard errors, covariance within 5 of its s.e. √(2/n)
        assert np.abs(whitened.mean(axis=0)).max() < 5 / math.sqrt(draws)
        assert np.abs(np.cov(whitened.T) - np.eye(dim)).max() < 5 * math.sqrt(2 / draws)


def test_thompson_score_mode_win_frequencies_match_the_spec_gaussian():
    policy, params, contexts = _trained_thompson("score", 1.0)
    est = policy.scorer.estimator
    draws = 3000
    for job in (150, 160, 170, 180):
        means, bonuses = spec_index(est, params, contexts[[job]])
        # server 0 wins iff r̃₀ > r̃₁ with r̃_k ~ N(μ_k, b_k²) independent
        p_first = norm.cdf((means[0, 0] - means[0, 1]) / math.hypot(bonuses[0, 0], bonuses[0, 1]))
        wins = sum(policy.choose(1000, np.array([job]), False)[1] == 0 for _ in range(draws))
        se = math.sqrt(p_first * (1 - p_first) / draws)
        assert abs(wins / draws - p_first) < 5 * se + 1e-3, f"job {job}: {wins / draws} vs {p_first}"


def test_thompson_score_mode_scores_are_mean_plus_bonus_times_standard_normal():
    policy, params, contexts = _trained_thompson("score", 0.5)
    reference = np.random.default_rng(5)  # the policy's generator, replayed
    queue = np.arange(150, 170)
    means, bonuses = spec_index(policy.scorer.estimator, params, contexts[queue])
    for _ in range(300):
        scores = means + bonuses * reference.standard_normal(means.shape)
        expected = np.unravel_index(scores.argmax(), scores.shape)
        assert policy.choose(1000, queue, False)[:2] == tuple(int(i) for i in expected)


# -------------------------------------------------------------------- phase lengths


CONFIGS = [  # (K, d, λ, ϵ, T), K ≠ d
    (5, 3, 0.7, 0.1, 5000),
    (2, 6, 0.5, 0.2, 20_000),
    (8, 4, 0.9, 0.15, 100_000),
    (3, 2, 0.3, 0.05, 2500),
]


@pytest.mark.parametrize("n_servers,dim,rate,slack,horizon", CONFIGS)
def test_tau_epsilon_and_eta2_phases_follow_spec(n_servers, dim, rate, slack, horizon):
    env = PolicyEnv(n_servers, dim, horizon, rate, slack)
    epsilon = 1 / math.sqrt(horizon)
    tau = math.ceil(3e-4 * dim ** 3 * math.log(horizon) * n_servers / rate / (slack - 2 * epsilon) ** 2)
    eps = resolve_params("cqb_eps", None, env)
    assert eps.explore_prob == pytest.approx(epsilon, rel=1e-12)
    assert eps.tau == tau
    assert resolve_params("cqb_eps_opt", None, env).explore_prob == pytest.approx(epsilon, rel=1e-12)
    eta2 = resolve_params("cqb_eta2", None, env)
    assert eta2.eta == pytest.approx(slack / 4, rel=1e-12)
    assert eta2.tau == tau
    constant = EtaParams().cutoff_constant
    assert eta2.cutoff == min(max(horizon - math.ceil(constant / slack ** 2 * math.log(horizon)), tau), horizon)


def test_eta2_cutoff_lies_strictly_between_tau_and_horizon_when_the_horizon_is_long():
    eta2 = resolve_params("cqb_eta2", None, PolicyEnv(4, 2, 200_000, 0.6, 0.2))
    constant = EtaParams().cutoff_constant
    assert eta2.tau < eta2.cutoff == 200_000 - math.ceil(constant / 0.2 ** 2 * math.log(200_000)) < 200_000


# -------------------------------------------------------------------- Filippi projection


def _projection_problem(seed):
    rng = np.random.default_rng(seed)
    n, dim = int(rng.integers(30, 120)), int(rng.integers(2, 5))
    X = rng.normal(size=(n, dim))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    direction = rng.normal(size=dim)
    y = (rng.random(n) < sigmoid(X @ (6 * direction / np.linalg.norm(direction)))).astype(float)
    reg = float(rng.choice([0.01, 0.1, 1.0]))
    mle = fit_logistic(X, y, reg)
    bound = 0.5 * float(np.linalg.norm(mle))
    design_inv = np.linalg.inv(10 * reg * np.eye(dim) + X.T @ X)
    return X, mle, design_inv, reg, bound


def _filippi_objective(X, mle, design_inv, reg, theta):
    residual = X.T @ (sigmoid(X @ theta) - sigmoid(X @ mle)) + reg * (theta - mle)
    return float(residual @ design_inv @ residual)


@pytest.mark.filterwarnings("ignore:delta_grad == 0.0")
@pytest.mark.parametrize("seed", range(6))
def test_filippi_projection_matches_an_independent_trust_region_solver(seed):
    X, mle, design_inv, reg, bound = _projection_problem(seed)
    radial = mle * bound / np.linalg.norm(mle)
    projected = filippi_projection(X, mle, design_inv, reg, bound, radial).theta
    reference = minimize(lambda th: _filippi_objective(X, mle, design_inv, reg, th), np.zeros_like(mle),
                         method="trust-constr",
                         constraints=[{"type": "ineq", "fun": lambda th: bound ** 2 - th @ th}],
                         options={"gtol": 1e-12, "xtol": 1e-12, "maxiter": 3000}).x
    reference *= min(1.0, bound / np.linalg.norm(reference))
    best = _filippi_objective(X, mle, design_inv, reg, reference)
    found = _filippi_objective(X, mle, design_inv, reg, projected)
    assert np.linalg.norm(projected) <= bound * (1 + 1e-12)
    assert found <= best * (1 + 1e-6)
    # non-vacuous: the radial start is clearly worse than the optimum
    assert _filippi_objective(X, mle, design_inv, reg, radial) > best * (1 + 1e-3)


def _filippi_gradient(X, mle, design_inv, reg, theta):
    prob = sigmoid(X @ theta)
    residual = X.T @ (prob - sigmoid(X @ mle)) + reg * (theta - mle)
    jacobian = (X.T * (prob * (1 - prob))) @ X + reg * np.eye(len(theta))
    return 2 * jacobian @ design_inv @ residual


def _kkt_point(X, mle, design_inv, reg, bound):
    """The minimiser on the sphere to ~1e-14: trust-constr for a start, then
    Newton-type root finding on the KKT system ∇f(θ) + 2νθ = 0, ‖θ‖² = S²."""
    start = minimize(lambda th: _filippi_objective(X, mle, design_inv, reg, th), np.zeros_like(mle),
                     method="trust-constr", constraints=[{"type": "ineq", "fun": lambda th: bound ** 2 - th @ th}],
                     options={"gtol": 1e-10, "xtol": 1e-10, "maxiter": 3000}).x
    g = _filippi_gradient(X, mle, design_inv, reg, start)
    multiplier = -(g @ start) / (2 * start @ start)

    def kkt(z):
        theta, nu = z[:-1], z[-1]
        return np.append(_filippi_gradient(X, mle, design_inv, reg, theta) + 2 * nu * theta, theta @ theta - bound ** 2)

    solution = root(kkt, np.append(start, multiplier), tol=1e-14)
    assert np.abs(kkt(solution.x)).max() < 1e-12 and solution.x[-1] > 0  # an active constraint
    return solution.x[:-1]


@pytest.mark.filterwarnings("ignore:delta_grad == 0.0")
@pytest.mark.parametrize("seed", range(6))
def test_filippi_projection_reaches_the_kkt_point_to_1e_8(seed):
    """The projection lands on the minimiser that an independent KKT root
    solve finds, to 1e-8 of the radius (a solver stopped early, or on a wrong
    gradient, lands 1e-7–1e-5 away)."""
    X, mle, design_inv, reg, bound = _projection_problem(seed)
    radial = mle * bound / np.linalg.norm(mle)
    projected = filippi_projection(X, mle, design_inv, reg, bound, radial).theta
    assert np.linalg.norm(projected - _kkt_point(X, mle, design_inv, reg, bound)) <= 1e-8 * bound
