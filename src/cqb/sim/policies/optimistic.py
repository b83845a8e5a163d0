"""The CQB family (CQB-ε, CQB-Opt, CQB-ε-Opt, CQB-TS, CQB-η-2): each a
compiled chooser of cqb.sim._choosers on a cached optimistic scorer."""

from __future__ import annotations

import numpy as np

from ..core import core
from ..estimation import LogisticEstimator, logistic
from .parameters import EpsilonOptParams, EpsilonParams, EstimatorParams, EtaParams, ThompsonParams
from .registry import register_policy


def OptimisticScorer(env, contexts, params):
    """The cached means, bonuses c_β·β_k·‖x‖_{V_k⁻¹} and UCB index of queued
    jobs (cqb.sim._scorer.Scorer) on a fresh estimator of one server per K."""
    estimator = LogisticEstimator(env.n_servers, env.dim, env.horizon, params)
    return core().Scorer(estimator, contexts, float(params.bonus_scale))


class CompiledPolicy:
    """A built-in policy: ``chooser`` (cqb.sim._choosers) plays every round of
    cqb.sim.simulate.run_policy in compiled code. choose and observe call the
    same chooser from Python, so the policy is also an ordinary plugin-shaped
    object (the tests play it both ways)."""

    chooser = None

    def choose(self, t, queue, new_arrival):
        queue = np.ascontiguousarray(queue, dtype=np.int64)
        chooser = self.chooser
        chooser.choose(t, queue, queue.shape[0], bool(new_arrival))
        return chooser.position, chooser.server, chooser.explored

    def observe(self, t, job, server, success):
        self.chooser.observe(t, job, server, bool(success))


class ScoredPolicy(CompiledPolicy):
    """A CQB policy: its scorer, and the chooser that decides on it."""

    def __init__(self, env, contexts, params):
        self.scorer = OptimisticScorer(env, contexts, params)


class ExplorationUCBPolicy(ScoredPolicy):
    """CQB-ε, CQB-ε-Opt and CQB-η-2: forced exploration of the newest job,
    otherwise the optimistic (UCB) pair.

    Rounds t ≤ ``tau``: every fresh arrival is explored (server round-robin or
    uniform). Rounds ``tau`` < t ≤ ``explore_until``: a fresh arrival is
    explored with probability ``explore_prob`` (uniform server). Later rounds:
    UCB only.
    """

    def __init__(self, env, contexts, rng, params, tau, explore_prob, explore_until, phase1_server):
        super().__init__(env, contexts, params)
        self.chooser = core().OptimisticChooser(self.scorer, rng, float(tau), float(explore_prob),
                                                float(explore_until), phase1_server == "round_robin")


class OptimisticPolicy(ScoredPolicy):
    """CQB-Opt: the UCB pair in every round."""

    def __init__(self, env, contexts, rng, params):
        super().__init__(env, contexts, params)
        self.chooser = core().OptimisticChooser(self.scorer)


class ThompsonPolicy(ScoredPolicy):
    """CQB-TS: a sampled score per (job, server) pair ("score", default: the
    compiled chooser), or a sampled θ̃_k ~ N(θ_k, c²β_k²V_k⁻¹) per server and
    round ("parameter", in Python: it runs through the plugin interface)."""

    def __init__(self, env, contexts, rng, params):
        super().__init__(env, contexts, params)
        self.rng, self.mode = rng, params.ts_mode
        if self.mode == "score":
            self.chooser = core().ThompsonChooser(self.scorer, rng)

    def choose(self, t, queue, new_arrival):
        if self.mode == "score":
            return super().choose(t, queue, new_arrival)
        scorer = self.scorer
        est = scorer.estimator
        # Explicit Cholesky keeps the draw identical on every platform.
        factors = np.linalg.cholesky(est.design_inv)
        noise = self.rng.standard_normal((est.n_servers, est.dim))
        scale = scorer.bonus_scale * est.widths
        sampled = est.theta + scale[:, None] * np.einsum("kde,ke->kd", factors, noise)
        scores = logistic(scorer.contexts[queue] @ sampled.T)
        position, server = divmod(int(scores.argmax()), scores.shape[1])
        return position, server, False

    def observe(self, t, job, server, success):
        self.scorer.learn(job, server, bool(success))


@register_policy("cqb_eps", EpsilonParams)
def _make_cqb_eps(env, contexts, rng, params):
    return ExplorationUCBPolicy(env, contexts, rng, params, params.tau, params.explore_prob,
                                env.horizon, params.phase1_server)


@register_policy("cqb_opt", EstimatorParams)
def _make_cqb_opt(env, contexts, rng, params):
    return OptimisticPolicy(env, contexts, rng, params)


@register_policy("cqb_eps_opt", EpsilonOptParams)
def _make_cqb_eps_opt(env, contexts, rng, params):
    return ExplorationUCBPolicy(env, contexts, rng, params, 0, params.explore_prob,
                                env.horizon, "uniform")


@register_policy("cqb_ts", ThompsonParams)
def _make_cqb_ts(env, contexts, rng, params):
    return ThompsonPolicy(env, contexts, rng, params)


@register_policy("cqb_eta2", EtaParams)
def _make_cqb_eta2(env, contexts, rng, params):
    return ExplorationUCBPolicy(env, contexts, rng, params, params.tau, params.eta,
                                params.cutoff, params.phase1_server)
