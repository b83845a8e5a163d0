"""The CQB family: the cached optimistic scorer and the policies built on it
(CQB-ε, CQB-Opt, CQB-ε-Opt, CQB-TS, CQB-η-2)."""

from __future__ import annotations

import numpy as np

from ..estimation import LogisticEstimator, logistic
from ..trace import loop_arrays
from .parameters import EpsilonOptParams, EpsilonParams, EstimatorParams, EtaParams, ThompsonParams
from .registry import register_policy


class OptimisticScorer:
    """Estimated means μ(xᵀθ_k), bonuses c_β·β_k·‖x‖_{V_k⁻¹} and their sum (the
    UCB index) of queued jobs, cached by arrival id: a round recomputes only
    the served server's column and the rows of new arrivals, O(queue · d²)
    instead of O(queue · K · d²)."""

    def __init__(self, env, contexts, params):
        self.contexts = contexts
        self.estimator = LogisticEstimator(env.n_servers, env.dim, env.horizon, params.estimator_config())
        self.bonus_scale = params.bonus_scale
        capacity = contexts.shape[0]
        self.means = np.empty((capacity, env.n_servers))
        self.bonuses = np.empty((capacity, env.n_servers))
        self.ucb = np.empty((capacity, env.n_servers))
        self._scored_until = 0  # arrival ids below this have full rows (numpy kernel)
        # Columns to refresh before the next decision. A set, not one server:
        # exploration rounds update a server without scoring, so several
        # columns can go stale between two UCB rounds.
        self.stale = np.zeros(env.n_servers, dtype=bool)
        self.core = self.estimator.core
        if self.core is not None:
            self.core.attach_scorer(contexts, self.means, self.bonuses, self.ucb, self.stale,
                                    float(self.bonus_scale))

    @property
    def scored_until(self) -> int:
        """Arrival ids below this have their full row of scores."""
        return self.core.scored_until if self.core is not None else self._scored_until

    def refresh(self, queue):
        if self.core is not None:
            self.core.refresh(queue)
            return
        est = self.estimator
        length = queue.shape[0]
        newest = int(queue[-1]) + 1
        fresh = max(newest - self._scored_until, 0)
        # New ids sit at the tail of the id-sorted queue; an explored newcomer
        # may have left unscored, then fall back to a search.
        if fresh == 0:
            n_old = length
        elif fresh <= length and queue[length - fresh] == self._scored_until:
            n_old = length - fresh
        else:
            n_old = int(np.searchsorted(queue, self._scored_until))
        if n_old:
            old = queue[:n_old]
            X = self.contexts[old]
            for k in np.flatnonzero(self.stale):
                means = est.mean_column(k, X)
                bonuses = (self.bonus_scale * est.widths[k]) * est.width_column(k, X)
                self.means[old, k] = means
                self.bonuses[old, k] = bonuses
                self.ucb[old, k] = means + bonuses
        self.stale[:] = False
        if fresh > 0:
            X = self.contexts[self._scored_until:newest]
            means = logistic(X @ est.theta.T)
            if fresh == 1:
                widths = np.sqrt((est.design_inv @ X[0]) @ X[0])[None]
            else:
                widths = np.sqrt(np.einsum("nd,kde,ne->nk", X, est.design_inv, X))
            bonuses = (self.bonus_scale * est.widths) * widths
            self.means[self._scored_until:newest] = means
            self.bonuses[self._scored_until:newest] = bonuses
            self.ucb[self._scored_until:newest] = means + bonuses
            self._scored_until = newest

    def optimistic_choice(self, queue):
        if self.core is not None:
            return self.core.choose(queue)
        self.refresh(queue)
        scores = self.ucb[queue]
        flat = int(scores.argmax())  # row-major: earliest job, then lowest server, on ties
        return divmod(flat, scores.shape[1])

    def update(self, job, server, success):
        if self.core is not None:
            self.estimator.finish_compiled_update(server, self.core.update_job(job, server, float(success)))
            return
        self.estimator.update(server, self.contexts[job], float(success))
        self.stale[server] = True


class ScoredPolicy:
    """What the CQB policies share: each outcome goes to the scorer's estimator."""

    def observe(self, t, job, server, success):
        self.scorer.update(job, server, success)


class ExplorationUCBPolicy(ScoredPolicy):
    """CQB-ε, CQB-ε-Opt and CQB-η-2: forced exploration of the newest job,
    otherwise the optimistic (UCB) pair.

    Rounds t ≤ ``tau``: every fresh arrival is explored (server round-robin or
    uniform). Rounds ``tau`` < t ≤ ``explore_until``: a fresh arrival is
    explored with probability ``explore_prob`` (uniform server). Later rounds:
    UCB only.
    """

    def __init__(self, env, contexts, rng, params, tau, explore_prob, explore_until, phase1_server):
        self.scorer = OptimisticScorer(env, contexts, params)
        self.rng, self.n_servers = rng, env.n_servers
        self.tau, self.explore_prob, self.explore_until = tau, explore_prob, explore_until
        self.round_robin = phase1_server == "round_robin"
        self.phase1_visits = 0

    def choose(self, t, queue, new_arrival):
        if new_arrival and t <= self.explore_until:
            newest = queue.shape[0] - 1
            if t <= self.tau:
                if self.round_robin:
                    server = self.phase1_visits % self.n_servers
                    self.phase1_visits += 1
                else:
                    server = int(self.rng.integers(self.n_servers))
                return newest, server, True
            if self.rng.random() < self.explore_prob:
                return newest, int(self.rng.integers(self.n_servers)), True
        position, server = self.scorer.optimistic_choice(queue)
        return position, server, False

    def compiled_play(self, trace):
        """The whole round loop in the compiled kernel, or None without it."""
        if self.scorer.core is None:
            return None
        outputs, self.phase1_visits = compiled_play(
            self.scorer, trace, self.rng, PLAY_EXPLORE, self.tau, self.explore_prob, self.explore_until,
            self.round_robin, self.phase1_visits)
        return outputs


class OptimisticPolicy(ScoredPolicy):
    """CQB-Opt: the UCB pair in every round."""

    def __init__(self, env, contexts, rng, params):
        self.scorer = OptimisticScorer(env, contexts, params)

    def choose(self, t, queue, new_arrival):
        position, server = self.scorer.optimistic_choice(queue)
        return position, server, False

    def compiled_play(self, trace):
        """The whole round loop in the compiled kernel, or None without it."""
        if self.scorer.core is None:
            return None
        return compiled_play(self.scorer, trace)[0]


# Core.play's modes: the optimistic choice; plus ExplorationUCBPolicy's forced
# exploration; ThompsonPolicy's sampled scores
PLAY_OPTIMISTIC, PLAY_EXPLORE, PLAY_THOMPSON = 0, 1, 2


def compiled_play(scorer, trace, rng=None, mode=PLAY_OPTIMISTIC, tau=0, explore_prob=0.0, explore_until=0,
                  round_robin=False, phase1_visits=0):
    """cqb.sim.simulate.run_policy's loop for a policy of mode ``mode``, run by
    the kernel (Core.play) on the scorer's Core: (queue length, gap,
    explored, departures) of every round, and the final phase-1 visit count.
    The same rounds, generator calls and estimator updates as the Python
    loop, which stays the reference (tests/test_sim_kernel.py)."""
    inputs, outputs = loop_arrays(trace)
    visits = scorer.core.play(*inputs, scorer.estimator.finish_compiled_update, rng, int(mode), float(tau),
                              float(explore_prob), float(explore_until), bool(round_robin), int(phase1_visits),
                              *outputs)
    return outputs, visits


class ThompsonPolicy(ScoredPolicy):
    """CQB-TS: a sampled score per (job, server) pair ("score", default), or a
    sampled θ̃_k ~ N(θ_k, c²β_k²V_k⁻¹) per server and round ("parameter")."""

    def __init__(self, env, contexts, rng, params):
        self.scorer = OptimisticScorer(env, contexts, params)
        self.rng, self.mode = rng, params.ts_mode

    def choose(self, t, queue, new_arrival):
        scorer = self.scorer
        if self.mode == "score":
            scorer.refresh(queue)
            noise = self.rng.standard_normal((queue.shape[0], scorer.estimator.n_servers))
            scores = scorer.means[queue] + scorer.bonuses[queue] * noise
        else:
            est = scorer.estimator
            # Explicit Cholesky keeps the draw identical on every platform.
            factors = np.linalg.cholesky(est.design_inv)
            noise = self.rng.standard_normal((est.n_servers, est.dim))
            scale = scorer.bonus_scale * est.widths
            sampled = est.theta + scale[:, None] * np.einsum("kde,ke->kd", factors, noise)
            scores = logistic(scorer.contexts[queue] @ sampled.T)
        position, server = divmod(int(scores.argmax()), scores.shape[1])
        return position, server, False

    def compiled_play(self, trace):
        """The whole round loop in the compiled kernel (the score mode), or None."""
        if self.scorer.core is None or self.mode != "score":
            return None
        return compiled_play(self.scorer, trace, self.rng, PLAY_THOMPSON)[0]


@register_policy("cqb_eps", "CQB-ε", EpsilonParams)
def _make_cqb_eps(env, contexts, rng, params):
    return ExplorationUCBPolicy(env, contexts, rng, params, params.tau, params.explore_prob,
                                env.horizon, params.phase1_server)


@register_policy("cqb_opt", "CQB-Opt", EstimatorParams)
def _make_cqb_opt(env, contexts, rng, params):
    return OptimisticPolicy(env, contexts, rng, params)


@register_policy("cqb_eps_opt", "CQB-ε-Opt", EpsilonOptParams)
def _make_cqb_eps_opt(env, contexts, rng, params):
    return ExplorationUCBPolicy(env, contexts, rng, params, 0, params.explore_prob,
                                env.horizon, "uniform")


@register_policy("cqb_ts", "CQB-TS", ThompsonParams)
def _make_cqb_ts(env, contexts, rng, params):
    return ThompsonPolicy(env, contexts, rng, params)


@register_policy("cqb_eta2", "CQB-η-2", EtaParams)
def _make_cqb_eta2(env, contexts, rng, params):
    return ExplorationUCBPolicy(env, contexts, rng, params, params.tau, params.eta,
                                params.cutoff, params.phase1_server)
