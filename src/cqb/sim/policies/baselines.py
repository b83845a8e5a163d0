"""The context-blind baselines and the oracle: Random, Optimal (π*), Q-UCB and
Q-ThS."""

from __future__ import annotations

import math

import numpy as np

from ..estimation import compiled_kernel
from ..trace import loop_arrays
from .parameters import NoParams, QueueThompsonParams, QueueUCBParams
from .registry import register_policy


class RandomPolicy:
    """A uniform job and an independent uniform server."""

    def __init__(self, env, contexts, rng, params):
        self.n_servers, self.rng = env.n_servers, rng

    def choose(self, t, queue, new_arrival):
        return int(self.rng.integers(queue.shape[0])), int(self.rng.integers(self.n_servers)), True

    def observe(self, t, job, server, success):
        pass


class OraclePolicy:
    """π*: the pair of highest true success probability; ties to the earliest
    arrival, then the lowest server index."""

    def __init__(self, env, contexts, rng, params, true_means):
        self.best_mean = true_means.max(axis=1)
        self.best_server = true_means.argmax(axis=1)  # argmax keeps the lowest index on ties

    def choose(self, t, queue, new_arrival):
        position = int(self.best_mean[queue].argmax())  # first maximum = earliest arrival
        return position, int(self.best_server[queue[position]]), False

    def observe(self, t, job, server, success):
        pass


class QueueBanditPolicy:
    """Q-UCB and Q-ThS (Krishnasamy et al. 2021): context-blind, oldest job."""

    def __init__(self, env, contexts, rng, params, sampling: bool):
        self.n_servers, self.rng, self.sampling = env.n_servers, rng, sampling
        self.explore_constant = params.explore_constant
        self.successes = np.zeros(env.n_servers)
        self.trials = np.zeros(env.n_servers)

    def choose(self, t, queue, new_arrival):
        log_t = math.log(t)
        explore_prob = min(1.0, self.explore_constant * self.n_servers * log_t ** 2 / t)
        if self.rng.random() < explore_prob:
            return 0, int(self.rng.integers(self.n_servers)), True
        if self.sampling:
            index = self.rng.beta(self.successes + 1, self.trials - self.successes + 1)
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                index = np.where(self.trials > 0,
                                 self.successes / self.trials + np.sqrt(log_t ** 2 / (2 * self.trials)),
                                 np.inf)
        return 0, int(index.argmax()), False

    def observe(self, t, job, server, success):
        self.trials[server] += 1
        self.successes[server] += success

    def compiled_play(self, trace):
        """The whole round loop in the compiled kernel (the same choices, draws
        and counts as choose/observe), or None where the kernel is not built."""
        try:
            kernel = compiled_kernel()
        except ImportError:
            return None
        inputs, outputs = loop_arrays(trace)
        kernel.play_queue_bandit(*inputs, self.rng, self.sampling, float(self.explore_constant), self.successes,
                                 self.trials, np.empty(self.n_servers), np.empty(self.n_servers), *outputs)
        return outputs


@register_policy("random", "Random", NoParams)
def _make_random(env, contexts, rng, params):
    return RandomPolicy(env, contexts, rng, params)


@register_policy("oracle", "Optimal", NoParams, needs_truth=True)
def _make_oracle(env, contexts, rng, params, true_means):
    return OraclePolicy(env, contexts, rng, params, true_means)


@register_policy("q_ucb", "Q-UCB", QueueUCBParams)
def _make_q_ucb(env, contexts, rng, params):
    return QueueBanditPolicy(env, contexts, rng, params, sampling=False)


@register_policy("q_ths", "Q-ThS", QueueThompsonParams)
def _make_q_ths(env, contexts, rng, params):
    return QueueBanditPolicy(env, contexts, rng, params, sampling=True)
