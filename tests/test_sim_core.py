"""The simulation core (cqb.sim.core's kernels) against the science, not against a copy.

* every built-in policy gives the same run through the plugin loop (its Python
  choose/observe, wrapped by PolicyChooser) as through its compiled chooser;
* the compiled kernels give the runs and the states of the same files run as
  plain Python (the reference for debugging);
* the estimator, after every update, against numpy from scratch: V⁻¹, H⁻¹, the
  exact MLE after a refit, one Newton step otherwise, β_k, the projection;
* the choosers' tie-breaks and NaN rule against numpy's argmax, Q-ThS's Beta
  arguments, Q-UCB's index; bad inputs refused with one clear line; a stale
  or uncompiled build refused.
"""

from __future__ import annotations

import importlib.util
import math
import signal

import numpy as np
import pytest

import cqb.sim.core as core_module
from cqb.sim.core import core
from cqb.sim.estimation import LogisticEstimator
from cqb.sim.instances import pool_instance
from cqb.sim.policies import EstimatorParams, builtin_policies, get_spec, make_policy
from cqb.sim.rng import stream
from cqb.sim.simulate import draw, play, policy_env, run_policy
from reference_math import confidence_width, estimator_params, fit_logistic, logistic

# every built-in policy, from the registry (a new one is covered without a list to edit)
POLICIES = builtin_policies()
ESTIMATOR_POLICIES = {name for name in POLICIES if issubclass(get_spec(name).params, EstimatorParams)}


def policy_params(name, horizon, extra=None):
    """Parameters that need no slack (pool instances have none) and make every
    phase happen within ``horizon``; ``extra`` for the estimator's policies."""
    params = {
        "cqb_eps": {"tau": horizon // 5, "explore_prob": 0.2},
        "cqb_opt": {"bonus_scale": 0.3},
        "cqb_eps_opt": {"explore_prob": 0.2},
        "cqb_ts": {"bonus_scale": 0.3},
        "cqb_eta2": {"tau": horizon // 6, "eta": 0.2, "cutoff": horizon // 2},
        "q_ucb": {"explore_constant": 0.1},
        "q_ths": {"explore_constant": 0.3},
    }.get(name)
    if params is not None and name in ESTIMATOR_POLICIES:
        params = {**params, **(extra or {})}
    return params


def sparse_pool(dim, n_servers, seed, ones=1):
    """A pool like the real-data ones: rows with ``ones`` non-zero entries
    (one-hot at 1), scaled to unit norm; θ* spread so the servers differ."""
    rng = np.random.default_rng(seed)
    rows = np.zeros((4 * dim, dim))
    for i in range(rows.shape[0]):
        rows[i, rng.choice(dim, size=ones, replace=False)] = 1.0 / math.sqrt(ones)
    theta = rng.normal(size=(n_servers, dim)) * 1.5
    return pool_instance(theta, rows, 0.6)


# ------------------------------------------------------- the estimator, every update


def spec_width(params, dim, n_servers, n, bound):
    """β_k of docs/model.md#the-confidence-widths-and-the-index, written out."""
    return (params.kappa / 2) * math.sqrt(2 * dim * math.log(1 + n / (params.kappa * params.reg * dim))
                                          + math.log(n_servers / params.delta)) \
        + params.kappa * bound * math.sqrt(params.reg) / 2


def filippi_gradient(X, mle, design_inv, reg, theta):
    prob = logistic(X @ theta)
    residual = X.T @ (prob - logistic(X @ mle)) + reg * (theta - mle)
    jacobian = (X.T * (prob * (1 - prob))) @ X + reg * np.eye(len(theta))
    return 2 * jacobian @ design_inv @ residual


ESTIMATOR_CASES = [
    # (dim, non-zeros per context (None: dense), parameters)
    (4, None, dict(norm_bound=0.8, reg=0.5)),
    (4, None, dict(norm_bound=0.8, reg=0.5, projection="euclidean", design_reg="plain")),
    (10, 2, dict(norm_bound=1.0, reg=1.0, kappa=3.0)),  # sparse: the gathered paths
    (6, None, dict(norm_bound=(0.5, 5.0), reg=0.2, refit_growth=0.5, refit_min_samples=3)),
]


@pytest.mark.parametrize("dim, ones, overrides", ESTIMATOR_CASES)
def test_the_estimator_after_every_update_against_numpy_from_scratch(dim, ones, overrides):
    rng = np.random.default_rng(dim)
    params = estimator_params(newton_tol=1e-10, **overrides)
    K, capacity = 2, 200
    est = LogisticEstimator(K, dim, capacity, params)
    ridge = params.kappa * params.reg if params.design_reg == "kappa" else params.reg
    bounds = params.norm_bound if isinstance(params.norm_bound, tuple) else (params.norm_bound,) * K
    theta_true = rng.normal(size=(K, dim)) * 2
    refits = lazy = outside = 0
    for i in range(300):
        server = int(rng.integers(K))
        if ones is None:
            x = rng.normal(size=dim) / math.sqrt(dim)
        else:
            x = np.zeros(dim)
            x[rng.choice(dim, ones, replace=False)] = rng.choice([-0.7, 0.7], ones)
        y = float(rng.random() < logistic(x @ theta_true[server]))
        other = 1 - server
        before = {field: np.array(getattr(est, field)) for field in ("mle", "theta", "inverses", "widths")}
        hessian_before = np.linalg.inv(est.inverses[server, 1])
        projections = est.projections
        refitted = est.update(server, x, y)
        n = int(est.counts[server])
        X, Y = est.features[server, :n], est.outcomes[server, :n]
        np.testing.assert_array_equal(X[-1], x)
        assert Y[-1] == y
        # V⁻¹ = (ridge·I + Σ x xᵀ)⁻¹ and both inverses exactly symmetric
        np.testing.assert_allclose(est.design_inv[server], np.linalg.inv(ridge * np.eye(dim) + X.T @ X),
                                   rtol=1e-9, atol=1e-12 / ridge)
        for m in range(2):
            np.testing.assert_array_equal(est.inverses[server, m], est.inverses[server, m].T)
        mle = est.mle[server]
        if refitted:
            refits += 1
            np.testing.assert_allclose(mle, fit_logistic(X, Y, params.reg, tol=1e-13), rtol=0, atol=1e-9)
            prob = logistic(X @ mle)
            hessian = (X.T * (prob * (1 - prob))) @ X + params.reg * np.eye(dim)
            np.testing.assert_allclose(est.inverses[server, 1], np.linalg.inv(hessian), rtol=1e-9, atol=1e-12)
        else:  # one Newton step with the stored Hessian plus the new sample's
            lazy += 1
            prob = logistic(x @ before["mle"][server])
            hessian = hessian_before + prob * (1 - prob) * np.outer(x, x)
            np.testing.assert_allclose(est.inverses[server, 1], np.linalg.inv(hessian), rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(mle, before["mle"][server] - (prob - y) * np.linalg.solve(hessian, x),
                                       rtol=1e-9, atol=1e-12)
        # β_k of the paper's §5 (docs/model.md) at the new count
        assert est.widths[server] == pytest.approx(spec_width(params, dim, K, n, bounds[server]), rel=1e-13)
        np.testing.assert_allclose(est.widths, confidence_width(params, dim, K, est.counts), rtol=1e-13)
        # θ_k: θ̂_k inside the ball, else its projection
        bound, theta = bounds[server], est.theta[server]
        if np.linalg.norm(mle) <= bound:
            np.testing.assert_array_equal(theta, mle)
            assert est.projections == projections
        else:
            outside += 1
            assert est.projections == projections + 1
            assert np.linalg.norm(theta) == pytest.approx(bound, rel=1e-9)
            if params.projection == "euclidean":
                np.testing.assert_allclose(theta, mle * bound / np.linalg.norm(mle), rtol=1e-13)
            else:  # a KKT point on the sphere: the gradient points straight inward
                g = filippi_gradient(X, mle, est.design_inv[server], params.reg, theta)
                cosine = -(g @ theta) / (np.linalg.norm(g) * np.linalg.norm(theta))
                assert cosine > 1 - 1e-7 or np.linalg.norm(g) < 1e-10, f"update {i}: cosine {cosine}"
        # the other server untouched
        for field, value in before.items():
            np.testing.assert_array_equal(getattr(est, field)[other], value[other])
    assert refits >= 15 and lazy >= 100 and outside >= 30


# ------------------------------------------------------- ties and NaN


def scorer_with(contexts, n_servers=3):
    est = LogisticEstimator(n_servers, contexts.shape[1], 10, estimator_params())
    scorer = core().Scorer(est, contexts, 0.5)
    everyone = np.arange(contexts.shape[0], dtype=np.int64)
    scorer.refresh(everyone, everyone.shape[0])  # every row scored, no column stale
    return scorer


def tie_matrices(rng, n, shape):
    """Matrices of few distinct values (ties everywhere), some with NaN."""
    for i in range(n):
        matrix = rng.choice([0.25, 0.5, 0.75], size=shape)
        if i % 3 == 0:
            matrix.flat[rng.integers(matrix.size)] = np.nan
        if i % 9 == 0:
            matrix[0, 0] = np.nan
        yield matrix


def test_ucb_ties_go_to_the_earliest_job_then_the_lowest_server_and_nan_wins():
    """The chosen pair is numpy's argmax of the index over (queue position,
    server), row-major: the first maximum, or the first NaN."""
    rng = np.random.default_rng(0)
    scorer = scorer_with(rng.normal(size=(40, 3)) / 3)
    chooser = core().OptimisticChooser(scorer)
    for matrix in tie_matrices(rng, 300, (6, 3)):
        queue = np.sort(rng.choice(40, size=6, replace=False)).astype(np.int64)
        scorer.ucb[queue] = matrix
        chooser.choose(5, queue, 6, False)
        expected = np.unravel_index(int(np.argmax(matrix)), matrix.shape)
        assert (chooser.position, chooser.server) == expected and not chooser.explored
    # the two rules by name
    queue = np.arange(4, dtype=np.int64)
    scorer.ucb[queue] = [[0.1, 0.2, 0.2], [0.1, 0.3, 0.3], [0.3, 0.1, 0.3], [0.2, 0.2, 0.2]]
    chooser.choose(5, queue, 4, False)
    assert (chooser.position, chooser.server) == (1, 1)
    scorer.ucb[2, 2] = np.nan
    chooser.choose(5, queue, 4, False)
    assert (chooser.position, chooser.server) == (2, 2)


def test_thompson_ties_and_nan_follow_numpys_argmax_of_the_sampled_scores():
    rng = np.random.default_rng(1)
    scorer = scorer_with(rng.normal(size=(40, 3)) / 3)
    chooser = core().ThompsonChooser(scorer, np.random.default_rng(9))
    replay = np.random.default_rng(9)
    scorer.bonuses[:] = 0.0  # scores = means: the ties stay exact
    for matrix in tie_matrices(rng, 200, (5, 3)):
        queue = np.sort(rng.choice(40, size=5, replace=False)).astype(np.int64)
        scorer.means[queue] = matrix
        chooser.choose(5, queue, 5, False)
        scores = matrix + 0.0 * replay.standard_normal((5, 3))
        assert (chooser.position, chooser.server) == np.unravel_index(int(np.argmax(scores)), scores.shape)
    # with bonuses: mean + bonus·z, z ~ N(0, 1) drawn as rng.standard_normal((length, K))
    scorer.bonuses[:] = rng.uniform(0.1, 1.0, size=scorer.bonuses.shape)
    queue = np.arange(10, 30, dtype=np.int64)
    for _ in range(100):
        chooser.choose(5, queue, 20, False)
        scores = scorer.means[queue] + scorer.bonuses[queue] * replay.standard_normal((20, 3))
        assert (chooser.position, chooser.server) == np.unravel_index(int(np.argmax(scores)), scores.shape)


def test_the_oracle_takes_the_earliest_of_the_best_jobs_at_its_lowest_best_server():
    rng = np.random.default_rng(2)
    for _ in range(200):
        means = rng.choice([0.2, 0.5, 0.8], size=(30, 3))
        chooser = core().OracleChooser(means)
        queue = np.sort(rng.choice(30, size=int(rng.integers(1, 8)), replace=False)).astype(np.int64)
        chooser.choose(3, queue, queue.shape[0], False)
        position = int(np.argmax(means[queue].max(axis=1)))
        assert (chooser.position, chooser.server) == (position, int(np.argmax(means[queue[position]])))
        assert not chooser.explored


def test_mu_is_one_over_one_plus_exp_minus_z_to_an_ulp_without_overflow():
    """μ by one exp of −|z|: within two units in the last place of
    1/(1 + e^(−z)) (in long double) everywhere, the far negative tail
    included (where (1 + tanh(z/2))/2 cancels to a relative error of order
    one), symmetric, 0 and 1 at the far ends with no overflow (e^(−z) itself
    overflows below z ≈ −709)."""
    rng = np.random.default_rng(4)
    z = np.concatenate([rng.normal(scale=3.0, size=5000), rng.uniform(-40, 40, 5000),
                        [0.0, -0.0, 1e-300, -1e-300, 36.0, -36.0, 700.0, -700.0, 745.0, -745.0, 1e300, -1e300]])
    mu = core().logistic_values(z)
    with np.errstate(over="ignore"):
        reference = (1 / (1 + np.exp(-z.astype(np.longdouble)))).astype(np.float64)
    far = np.abs(mu - reference) > 2 * np.spacing(reference)
    assert not far.any(), z[far]
    assert np.all(np.abs(mu + core().logistic_values(-z) - 1) <= 2 * np.spacing(1.0))
    assert core().logistic_values([-1e300, 1e300]).tolist() == [0.0, 1.0]
    assert core().logistic_values(np.array([[0.0]])).shape == (1, 1)


@pytest.mark.parametrize("n_servers", [1, 3, 7])
def test_the_choosers_draw_what_the_generator_methods_return(n_servers):
    """Compiled, the choosers draw through numpy's C functions on the
    Generator's bit generator: the values, and the order, of rng.random(),
    rng.integers(n), rng.standard_normal and rng.beta, replayed here on a
    twin Generator, choice by choice."""
    K = n_servers
    queue = np.arange(12, dtype=np.int64)
    uniform_pick = core().RandomChooser(K, np.random.default_rng(5))
    replay = np.random.default_rng(5)
    for length in (1, 2, 5, 12) * 25:
        uniform_pick.choose(3, queue, length, False)
        assert (uniform_pick.position, uniform_pick.server) == (replay.integers(length), replay.integers(K))
    for sampling in (True, False):
        bandit = core().QueueBanditChooser(K, np.random.default_rng(6), sampling, 0.05)
        replay = np.random.default_rng(6)
        for t in range(2, 400):
            bandit.choose(t, queue, 3, False)
            explore = replay.random() < min(1.0, 0.05 * K * math.log(t) ** 2 / t)
            if explore:
                assert (bandit.server, bandit.explored) == (replay.integers(K), True)
            elif sampling:
                draws = replay.beta(bandit.successes + 1.0, bandit.trials - bandit.successes + 1.0)
                assert bandit.server == int(np.argmax(draws)) and not bandit.explored
            bandit.observe(t, 0, bandit.server, t % 3 == 0)
    scorer = scorer_with(np.random.default_rng(7).normal(size=(40, 3)) / 3, n_servers=K)
    explorer = core().OptimisticChooser(scorer, np.random.default_rng(8), 0.0, 0.4, 10_000.0, False)
    replay = np.random.default_rng(8)
    for t in range(1, 300):
        explorer.choose(t, queue, 4, True)
        if replay.random() < 0.4:
            assert (explorer.server, explorer.explored) == (replay.integers(K), True)
        else:
            assert not explorer.explored


class FakeRng:
    """A generator whose draws the test sets: random() (the exploration coin),
    integers(), beta() (recording its arguments)."""

    def __init__(self, coin=1.0, beta=None):
        self.coin, self.beta_value, self.beta_args = coin, beta, []

    def random(self):
        return self.coin

    def integers(self, n):
        return n - 1

    def beta(self, a, b):
        self.beta_args.append((np.array(a), np.array(b)))
        return np.array(self.beta_value, dtype=np.float64)


def test_q_ths_draws_beta_of_successes_plus_one_and_failures_plus_one_and_breaks_ties_low():
    chooser = core().QueueBanditChooser(3, FakeRng(beta=[0.3, 0.7, 0.7]), True, 0.3)
    outcomes = [(0, True), (0, False), (0, False), (1, True), (2, True), (2, True), (2, False)]
    for t, (server, success) in enumerate(outcomes, start=1):
        chooser.observe(t, 0, server, success)
    np.testing.assert_array_equal(chooser.successes, [1, 1, 2])
    np.testing.assert_array_equal(chooser.trials, [3, 1, 3])
    queue = np.array([4, 7], dtype=np.int64)
    chooser.choose(100, queue, 2, False)
    (alpha, beta), = chooser.rng.beta_args
    np.testing.assert_array_equal(alpha, [2, 2, 3])  # s_k + 1
    np.testing.assert_array_equal(beta, [3, 1, 2])  # n_k − s_k + 1
    assert (chooser.position, chooser.server, chooser.explored) == (0, 1, False)  # the tie to the lowest
    for draws, server in (([0.3, np.nan, 0.9], 1), ([np.nan, 0.5, 0.9], 0), ([0.9, 0.2, 0.95], 2)):
        chooser.rng.beta_value = draws
        chooser.choose(100, queue, 2, False)
        assert chooser.server == server
    explorer = core().QueueBanditChooser(3, FakeRng(coin=0.0), True, 0.3)
    explorer.choose(100, queue, 2, False)
    assert (explorer.position, explorer.server, explorer.explored) == (0, 2, True)


def test_q_ucb_index_is_the_empirical_mean_plus_its_bonus_untried_first_ties_low():
    """ŝ_k/n_k + √(ln²t/(2n_k)), ∞ for an untried server, on random counts with
    many ties, against numpy's argmax; exploration with probability
    min(1, c·K·ln²t/t)."""
    rng = np.random.default_rng(3)
    fake = FakeRng()
    chooser = core().QueueBanditChooser(4, fake, False, 0.2)
    queue = np.array([0], dtype=np.int64)
    differs_from_greedy = 0
    for _ in range(300):
        chooser.trials[:] = rng.integers(0, 5, size=4)
        chooser.successes[:] = np.minimum(rng.integers(0, 4, size=4), chooser.trials)
        t = int(rng.integers(2, 10_000))
        chooser.choose(t, queue, 1, False)
        n, s = chooser.trials, chooser.successes
        with np.errstate(divide="ignore", invalid="ignore"):
            index = np.where(n > 0, s / n + np.sqrt(math.log(t) ** 2 / (2 * n)), np.inf)
        assert chooser.server == int(np.argmax(index)) and not chooser.explored
        if n.min() > 0:
            differs_from_greedy += chooser.server != int(np.argmax(s / n))
    assert differs_from_greedy > 10
    # the exploration coin against its probability
    for t, coin, explores in ((100, 0.2 * 4 * math.log(100) ** 2 / 100 - 1e-9, True),
                              (100, 0.2 * 4 * math.log(100) ** 2 / 100 + 1e-9, False)):
        fake.coin = coin
        chooser.choose(t, queue, 1, False)
        assert chooser.explored == explores and chooser.server == (3 if explores else chooser.server)
    capped = core().QueueBanditChooser(4, FakeRng(coin=0.999), False, 5.0)  # 5·4·ln²7/7 > 1: always
    capped.choose(7, queue, 1, False)
    assert capped.explored


# ------------------------------------------------------- bad inputs


def one_line(error):
    assert "\n" not in str(error.value)
    return str(error.value)


def test_queue_ids_out_of_range_are_refused():
    scorer = scorer_with(np.eye(3)[:, :2] * 0.5)
    chooser = core().OptimisticChooser(scorer)
    for bad in ([0, 3], [-1, 1]):
        with pytest.raises(IndexError, match=rf"arrival id {bad[0] if bad[0] < 0 else bad[1]} out of range "
                                              r"\(3 contexts\)") as error:
            chooser.choose(2, np.array(bad, dtype=np.int64), 2, False)
        one_line(error)
    with pytest.raises(ValueError, match="the queue is empty"):
        scorer.refresh(np.zeros(1, dtype=np.int64), 0)
    with pytest.raises(IndexError, match=r"job 3 out of range \(3 contexts\)"):
        scorer.learn(3, 0, True)
    with pytest.raises(IndexError, match=r"server 3 out of range \(K = 3\)"):
        scorer.learn(0, 3, True)
    with pytest.raises(ValueError, match=r"contexts must be \(N, 2\)"):
        core().Scorer(scorer.estimator, np.zeros((4, 3)), 0.5)


class Chooses:
    """A plugin that always picks the given (position, server)."""

    def __init__(self, position, server):
        self.pair = (position, server)

    def choose(self, t, queue, new_arrival):
        return (*self.pair, False)

    def observe(self, t, job, server, success):
        pass


@pytest.mark.parametrize("position, server", [(3, 0), (-1, 0), (0, 2), (0, -1)])
def test_a_choice_out_of_range_raises_index_error_naming_it(position, server):
    arrivals = np.array([1, 1, 1, 0, 0, 0], dtype=np.uint8)
    service = np.full(6, 0.99)
    means = np.full((3, 2), 0.5)
    # position 3 is out of range once three jobs wait (round 4); the others at once
    with pytest.raises(IndexError, match=rf"^the policy chose \(position {position}, server {server}\) out of "
                                         r"range \(queue of \d, K = 2\)$") as error:
        core().play_rounds(core().PolicyChooser(Chooses(position, server)), arrivals, service, means)
    one_line(error)


def test_a_full_estimator_and_a_mismatched_trace_are_refused():
    est = LogisticEstimator(2, 2, 3, estimator_params())
    for _ in range(3):
        est.update(1, [0.5, 0.5], 1.0)
    with pytest.raises(IndexError, match=r"^server 1 has room for 3 samples$"):
        est.update(1, [0.5, 0.5], 1.0)
    assert est.counts.tolist() == [0, 3]  # refused before anything was stored
    with pytest.raises(IndexError, match=r"^server 2 out of range \(K = 2\)$"):
        est.update(2, [0.5, 0.5], 1.0)
    chooser = core().PolicyChooser(Chooses(0, 0))
    with pytest.raises(ValueError, match="do not match"):
        core().play_rounds(chooser, np.ones(4, np.uint8), np.ones(3), np.full((4, 2), 0.5))
    with pytest.raises(ValueError, match="do not match"):  # more arrivals than jobs with true means
        core().play_rounds(chooser, np.ones(4, np.uint8), np.ones(4), np.full((3, 2), 0.5))


def test_a_signal_during_the_round_loop_is_raised_inside_it():
    """The compiled loop runs no bytecode, where the interpreter acts on a
    signal: it asks every SIGNAL_CHECK_ROUNDS rounds, so the handler's
    exception (a Ctrl-C's KeyboardInterrupt) comes out of play_rounds, not
    after its last round. The oracle's scan of a queue that only grows makes
    the 60,000 rounds last about a second."""

    class Interrupted(Exception):
        pass

    def interrupt(*_):
        raise Interrupted

    horizon = 60_000
    arrivals, service, means = np.ones(horizon, np.uint8), np.ones(horizon), np.full((horizon, 2), 0.5)
    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        with pytest.raises(Interrupted) as raised:
            core().play_rounds(core().OracleChooser(means), arrivals, service, means)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    names = [entry.name.rsplit(".", 1)[-1] for entry in raised.traceback]  # compiled: cqb.sim._rounds.play_rounds
    assert names[-2:] == ["play_rounds", "interrupt"], names


# ------------------------------------------------------- the build check


def test_a_stale_build_is_refused_and_the_current_one_accepted(monkeypatch, tmp_path):
    monkeypatch.setattr(core_module, "_CORE", None)
    assert core().COMPILED  # this checkout's build is current
    stale = tmp_path / "_kernels.sha256"
    stale.write_text("0" * 64 + "\n")
    for patch in ({"BUILD_RECORD": stale}, {"BUILD_RECORD": tmp_path / "missing.sha256"}):
        monkeypatch.setattr(core_module, "_CORE", None)
        for name, value in patch.items():
            monkeypatch.setattr(core_module, name, value)
        with pytest.raises(ImportError, match="compiled from another version .* rebuild them with `pip install -e .`"):
            core()
        monkeypatch.undo()
    # any kernel source edited after the build, its .py or its .pxd
    for source in core_module.kernel_sources(core_module.SOURCE_FOLDER):
        copy = tmp_path / source.name / "sim"
        copy.mkdir(parents=True)
        for kernel in core_module.kernel_sources(core_module.SOURCE_FOLDER):
            (copy / kernel.name).write_bytes(kernel.read_bytes())
        (copy / source.name).write_bytes(source.read_bytes() + b"\n# edited after the build\n")
        monkeypatch.setattr(core_module, "SOURCE_FOLDER", copy)
        monkeypatch.setattr(core_module, "_CORE", None)
        with pytest.raises(ImportError, match="compiled from another version"):
            core()
        monkeypatch.undo()



def test_an_uncompiled_core_is_refused_unless_asked_for(monkeypatch, plain_core):
    monkeypatch.setattr(core_module, "_CORE", None)
    monkeypatch.setattr(core_module, "import_kernels", lambda: list(plain_core.modules))
    monkeypatch.delenv("CQB_UNCOMPILED", raising=False)
    with pytest.raises(ImportError, match=r"not compiled: run `pip install -e .`.*CQB_UNCOMPILED=1") as error:
        core()
    one_line(error)
    monkeypatch.setenv("CQB_UNCOMPILED", "0")
    with pytest.raises(ImportError, match="not compiled"):
        core()
    monkeypatch.setenv("CQB_UNCOMPILED", "1")
    assert not core().COMPILED and core().modules == plain_core.modules


# ------------------------------------------------------- the plugin loop and the compiled loop


SYNTHETIC = {"kind": "synthetic", "n_servers": 5, "dim": 5, "arrival_rate": 0.7, "slack": 0.1}

# (instance or spec, horizon, seed, estimator parameters): ≥ 10 cases
LOOP_CASES = [
    (SYNTHETIC, 1500, 0, {}),
    ({**SYNTHETIC, "n_servers": 3, "dim": 2, "arrival_rate": 0.6, "slack": 0.15}, 1500, 1, {}),
    ({**SYNTHETIC, "n_servers": 2, "dim": 8, "arrival_rate": 0.5}, 1500, 2, {}),
    ({**SYNTHETIC, "n_servers": 4, "dim": 3}, 1500, 3, {"norm_bound": 0.5}),  # Filippi active
    ({**SYNTHETIC, "n_servers": 4, "dim": 3}, 1500, 3, {"norm_bound": 0.5, "projection": "euclidean"}),
    ("one-hot", 1500, 4, {}),
    ("sparse", 800, 5, {"norm_bound": 1.0}),  # sparse contexts with Filippi active
    ({**SYNTHETIC, "n_servers": 9, "slack": 0.05}, 1200, 6, {}),
    (SYNTHETIC, 500, 7, {"refit_growth": 0.0}),  # a refit at every sample
    ({**SYNTHETIC, "n_servers": 3, "dim": 4}, 1200, 8, {"newton_max_iter": 1, "design_reg": "plain"}),
    (SYNTHETIC, 1200, 9, {"phase1_server": "uniform"}),
]


def instance_of(spec, seed):
    if spec == "one-hot":
        return sparse_pool(12, 3, seed)
    if spec == "sparse":
        return sparse_pool(30, 2, seed, ones=4)
    return spec


def drop_unknown(name, params):
    """phase1_server belongs to CQB-ε and CQB-η-2 only."""
    if params and "phase1_server" in params and name not in ("cqb_eps", "cqb_eta2"):
        params = {key: value for key, value in params.items() if key != "phase1_server"}
    return params


@pytest.mark.parametrize("case", range(len(LOOP_CASES)))
@pytest.mark.parametrize("name", POLICIES)
def test_the_plugin_loop_and_the_compiled_loop_take_the_same_path(name, case):
    """The policy's Python choose/observe, called by PolicyChooser every round,
    against its compiled chooser called by play_rounds directly: the same queue,
    gap, exploration flags and departures, round for round."""
    spec, horizon, seed, extra = LOOP_CASES[case]
    instance, _, trace, _ = draw(instance_of(spec, seed), horizon, seed)
    params = drop_unknown(name, policy_params(name, horizon, extra))
    compiled, _ = play(instance, trace, name, params, seed)
    record = {}
    plugin, _ = play(instance, trace, name, params, seed, record)
    decisions = int((compiled.queue > 0).sum())
    assert len(record["rounds"]) == decisions > 0.4 * horizon  # the plugin path ran every decision
    for field in ("queue", "gap", "explored", "departures"):
        np.testing.assert_array_equal(getattr(plugin, field), getattr(compiled, field), err_msg=field)
    assert compiled.departures.sum() > 0.3 * horizon


# ------------------------------------------------------- compiled against uncompiled


@pytest.fixture(scope="module")
def plain_core():
    """The kernels' sources run as plain Python (Cython's shadow `cython` module
    makes the annotations no-ops), under another package name."""
    if importlib.util.find_spec("cython") is None:
        pytest.fail("the uncompiled core needs Cython's shadow module `cython`: pip install cython")
    kernels = core_module.plain_kernels()
    assert not kernels.COMPILED and core().COMPILED
    assert not any(core_module.is_compiled(module) for module in kernels.modules)
    return kernels


def ulps(a, b):
    """The largest distance in units of the last place between two float arrays."""
    a, b = np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel()
    assert np.array_equal(np.isnan(a), np.isnan(b))
    a, b = a[~np.isnan(a)], b[~np.isnan(b)]
    ia, ib = a.view(np.int64), b.view(np.int64)
    ia = np.where(ia < 0, np.int64(-2 ** 63) - ia, ia)  # two's-complement order of floats
    ib = np.where(ib < 0, np.int64(-2 ** 63) - ib, ib)
    return int(np.abs(ia - ib).max()) if a.size else 0


def policy_state(policy):
    """Every array a built-in policy's run leaves behind."""
    state = {}
    scorer = getattr(policy, "scorer", None)
    if scorer is not None:
        est = scorer.estimator
        for field in ("features", "outcomes", "counts", "mle", "theta", "inverses", "next_refit", "widths"):
            state[field] = np.array(getattr(est, field))
        state["refits"], state["projections"] = est.refits, est.projections
        for field in ("means", "bonuses", "ucb", "stale"):
            state[field] = np.array(getattr(scorer, field))
    chooser = getattr(policy, "chooser", None)
    for field in ("successes", "trials"):
        if hasattr(chooser, field):
            state[field] = np.array(getattr(chooser, field))
    rng = getattr(chooser, "rng", None) or getattr(policy, "rng", None)
    if rng is not None:
        state["rng"] = rng.bit_generator.state
    return state


UNCOMPILED_CASES = [  # small: the uncompiled core is ~100× slower
    ({**SYNTHETIC, "n_servers": 3, "dim": 3, "arrival_rate": 0.6, "slack": 0.15}, 250, 1, {}),
    ("one-hot-4", 250, 2, {}),
    ({**SYNTHETIC, "n_servers": 2, "dim": 4}, 250, 3, {"norm_bound": 0.4}),  # Filippi active
]


@pytest.mark.parametrize("case", range(len(UNCOMPILED_CASES)))
@pytest.mark.parametrize("name", POLICIES)
def test_the_compiled_core_is_the_uncompiled_source_to_the_bit(monkeypatch, plain_core, name, case):
    spec, horizon, seed, extra = UNCOMPILED_CASES[case]
    spec = sparse_pool(4, 2, seed) if spec == "one-hot-4" else spec
    instance, _, trace, _ = draw(spec, horizon, seed)
    params = policy_params(name, horizon, extra)
    runs, states = [], []
    for module in (core(), plain_core):
        monkeypatch.setattr(core_module, "_CORE", module)  # what every policy and run_policy build on
        policy, _ = make_policy(name, policy_env(instance, horizon), trace.contexts, stream(seed, "policy"),
                                params, true_means=trace.true_means)
        assert type(policy.chooser).__module__ in {kernel.__name__ for kernel in module.modules}
        runs.append(run_policy(policy, trace))
        states.append(policy_state(policy))
    compiled, plain = runs
    for field in ("queue", "gap", "explored", "departures"):
        np.testing.assert_array_equal(getattr(plain, field), getattr(compiled, field), err_msg=field)
    assert states[0].keys() == states[1].keys()
    for field, value in states[0].items():
        if isinstance(value, np.ndarray) and value.dtype == np.float64:
            assert ulps(value, states[1][field]) == 0, field
        else:
            assert value == states[1][field] if not isinstance(value, np.ndarray) \
                else np.array_equal(value, states[1][field]), field
    if name in ESTIMATOR_POLICIES and case == 2:
        assert states[0]["projections"] > 10  # the projection ran in both


@pytest.mark.parametrize("projection", ["filippi", "euclidean"])
@pytest.mark.parametrize("dim, ones", [(4, None), (8, 2)])
def test_the_uncompiled_estimator_gives_the_compiled_state_after_every_update(plain_core, projection, dim, ones):
    """Refits, online steps, dense and sparse rank-one updates, projections:
    every array of both estimators equal after every update."""
    rng = np.random.default_rng(dim)
    params = estimator_params(norm_bound=0.6, projection=projection, reg=0.5)
    estimators = [module.Estimator(2, dim, 150, params) for module in (core(), plain_core)]
    theta_true = rng.normal(size=dim) * 3
    for i in range(200):
        if ones is None:
            x = rng.normal(size=dim) / math.sqrt(dim)
        else:
            x = np.zeros(dim)
            x[rng.choice(dim, ones, replace=False)] = rng.choice([-1.0, 1.0], ones)
        server, outcome = int(rng.integers(2)), float(rng.random() < logistic(x @ theta_true))
        if estimators[0].counts[server] == 150:
            continue
        refitted = [est.update(server, x, outcome) for est in estimators]
        assert refitted[0] == refitted[1]
        for field in ("mle", "theta", "inverses", "widths", "counts", "next_refit"):
            a, b = getattr(estimators[0], field), getattr(estimators[1], field)
            assert a.tobytes() == b.tobytes(), f"update {i}: {field}"
    assert estimators[0].projections == estimators[1].projections > 20
    assert estimators[0].refits == estimators[1].refits


@pytest.mark.parametrize("n, d", [(6000, 4), (300, 1), (2000, 30), (0, 3)])
def test_row_keys_group_rows_exactly_as_their_bytes_do(plain_core, n, d):
    """The scorer's keys: rows share a key if and only if they are equal bit
    for bit (a sort of the rows' bytes as the reference; −0.0 is not 0.0, a
    NaN row equals its copy), numbered in order of first appearance, the
    same compiled and as plain Python. Half the rows repeat others, so
    the hash table's probing meets both equal and unequal rows."""
    rng = np.random.default_rng(n + d)
    rows = rng.integers(0, 3, size=(n, d)).astype(np.float64)  # many repeats, as a pool's rows
    rows[::2] = rng.uniform(-1, 1, size=rows[::2].shape)
    if n:
        rows[1], rows[3] = 0.0, -0.0
        rows[5], rows[7] = np.nan, np.nan
    keys = core().row_keys(rows)
    reference = np.unique(rows.view(np.dtype((np.void, 8 * d))).reshape(-1), return_inverse=True)[1].reshape(-1)
    assert keys.dtype == np.intp and keys.shape == (n,)
    assert len(set(zip(keys.tolist(), reference.tolist()))) == len(set(keys.tolist())) == len(set(reference.tolist()))
    first_seen = keys[np.sort(np.unique(keys, return_index=True)[1])].tolist()  # the keys in order of first appearance
    assert first_seen == list(range(len(first_seen)))
    if n:
        assert keys[1] != keys[3] and keys[5] == keys[7] and len(first_seen) < n
    np.testing.assert_array_equal(plain_core.row_keys(rows[:400]), keys[:400])


def test_the_uncompiled_projection_and_screen_are_the_compiled_ones(plain_core):
    rng = np.random.default_rng(3)
    for n, d in [(2, 2), (30, 3), (12, 6), (60, 4)]:
        X = rng.standard_normal((n, d)) / math.sqrt(d)
        mle = 3.0 * rng.standard_normal(d)
        design_inv = np.linalg.inv(X.T @ X + 5.0 * np.eye(d))
        bound = 0.4 * float(np.linalg.norm(mle))
        start = mle * bound / np.linalg.norm(mle)
        results = [module.filippi_projection(X, mle, design_inv, 1.0, bound, start)[0] for module in (core(), plain_core)]
        assert results[0].tobytes() == results[1].tobytes()
        assert not np.array_equal(results[0], start)
    theta = rng.uniform(-1, 1, size=(3, 4))
    streams = [np.random.default_rng(5) for _ in range(2)]
    (rows, codes), (plain_rows, plain_codes) = [module.draw_screened(generator, 2000, theta, 0.2, 0.5)
                                                for module, generator in zip((core(), plain_core), streams)]
    assert rows.tobytes() == plain_rows.tobytes() and codes.tobytes() == plain_codes.tobytes()
    assert {1, 2} <= set(codes.tolist()) and streams[0].random() == streams[1].random()
