"""Greedy-rate: an example cqb policy plugin (see examples/greedy_rate/README.md).

Context-blind and greedy: serve the oldest job at the server with the highest
empirical success rate, where every server starts with ``prior`` pseudo-trials
that all succeeded, rate_k = (successes_k + prior) / (trials_k + prior). The
optimistic start makes every server get tried; after that nothing explores, so
the policy can lock onto a server that was lucky early. It never looks at the
contexts, so it cannot route a job to the server that suits it: a baseline to
beat, not a contender.

A policy is a factory registered with ``@register_policy(name, display name,
parameter dataclass)``; the factory gets ``(env, contexts, rng, params)`` and
returns an object with ``choose(t, queue, new_arrival) -> (position in queue,
server, explored)`` and ``observe(t, job, server, success)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from cqb.policies import register_policy


@dataclass(frozen=True)
class GreedyRateParams:
    prior: float = 1.0  # pseudo-trials per server, all successes (an optimistic start)

    def resolve(self, env):
        """Called with the run's PolicyEnv before the policy is built; a bad value fails here."""
        if not (isinstance(self.prior, (int, float)) and math.isfinite(self.prior) and self.prior > 0):
            raise ValueError(f"prior must be a positive number, got {self.prior!r}")
        return self


class GreedyRatePolicy:
    def __init__(self, env, contexts, rng, params: GreedyRateParams):
        self.prior = float(params.prior)
        self.successes = np.zeros(env.n_servers)
        self.trials = np.zeros(env.n_servers)

    def rates(self) -> np.ndarray:
        return (self.successes + self.prior) / (self.trials + self.prior)

    def choose(self, t, queue, new_arrival):
        # the oldest job (position 0); ties between servers go to the lowest index
        return 0, int(self.rates().argmax()), False

    def observe(self, t, job, server, success):
        self.trials[server] += 1
        self.successes[server] += bool(success)


@register_policy("greedy_rate", "Greedy rate", GreedyRateParams)
def make_greedy_rate(env, contexts, rng, params):
    return GreedyRatePolicy(env, contexts, rng, params)
