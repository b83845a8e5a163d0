"""The context-blind baselines and the oracle: Random, Optimal (π*), Q-UCB and
Q-ThS, each a compiled chooser of cqb.sim._choosers."""

from __future__ import annotations

from ..core import core
from .optimistic import CompiledPolicy
from .parameters import NoParams, QueueThompsonParams, QueueUCBParams
from .registry import register_policy


class RandomPolicy(CompiledPolicy):
    """A uniform job and an independent uniform server."""

    def __init__(self, env, contexts, rng, params):
        self.chooser = core().RandomChooser(env.n_servers, rng)


class OraclePolicy(CompiledPolicy):
    """π*: the pair of highest true success probability; ties to the earliest
    arrival, then the lowest server index."""

    def __init__(self, env, contexts, rng, params, true_means):
        self.chooser = core().OracleChooser(true_means)


class QueueBanditPolicy(CompiledPolicy):
    """Q-UCB and Q-ThS (Krishnasamy et al. 2021): context-blind, oldest job."""

    def __init__(self, env, contexts, rng, params, sampling: bool):
        self.chooser = core().QueueBanditChooser(env.n_servers, rng, bool(sampling), float(params.explore_constant))

    @property
    def successes(self):
        return self.chooser.successes

    @property
    def trials(self):
        return self.chooser.trials


@register_policy("random", NoParams)
def _make_random(env, contexts, rng, params):
    return RandomPolicy(env, contexts, rng, params)


@register_policy("oracle", NoParams, needs_truth=True)
def _make_oracle(env, contexts, rng, params, true_means):
    return OraclePolicy(env, contexts, rng, params, true_means)


@register_policy("q_ucb", QueueUCBParams)
def _make_q_ucb(env, contexts, rng, params):
    return QueueBanditPolicy(env, contexts, rng, params, sampling=False)


@register_policy("q_ths", QueueThompsonParams)
def _make_q_ths(env, contexts, rng, params):
    return QueueBanditPolicy(env, contexts, rng, params, sampling=True)
