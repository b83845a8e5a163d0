"""Scheduling policies and their registry.

A policy sees the queue as the arrival ids of the waiting jobs, oldest first,
and the context matrix of all arrivals (it may only look at rows of queued
jobs). Each round it returns ``(position in queue, server, explored)`` and then
observes the outcome of that pair. Policies never see θ*, except the oracle,
which is built from the true service probabilities.

To add a policy::

    @register_policy("my_policy", MyParams)
    def make_my_policy(env, contexts, rng, params): ...

where ``MyParams`` is a dataclass of its parameters with defaults (a plugin
uses ``cqb.policies.register_policy``, which also takes its display name).

Modules: ``registry`` (names, parameter resolution, entry-point plugins),
``parameters`` (PolicyEnv and the parameter dataclasses), ``optimistic`` (the
CQB family), ``baselines`` (Random, the oracle, Q-UCB, Q-ThS). Importing this
package registers the built-in policies; plugins load on the first listing
or the first lookup of a name that is not built in.
"""

from .baselines import OraclePolicy, QueueBanditPolicy, RandomPolicy
from .optimistic import ExplorationUCBPolicy, OptimisticPolicy, OptimisticScorer, ThompsonPolicy
from .parameters import (
    EpsilonOptParams,
    EpsilonParams,
    EstimatorParams,
    EtaParams,
    NoParams,
    PolicyEnv,
    QueueBanditParams,
    QueueThompsonParams,
    QueueUCBParams,
    ThompsonParams,
    experiment_tau,
)
from .registry import (
    PLUGIN_GROUP,
    Policy,
    PolicySpec,
    RegistryView,
    builtin_policies,
    get_spec,
    load_plugin_policies,
    make_policy,
    policy_parameters,
    register_policy,
    registered_policies,
    resolve_params,
)

__all__ = [
    "PLUGIN_GROUP", "EpsilonOptParams", "EpsilonParams", "EstimatorParams",
    "EtaParams", "ExplorationUCBPolicy", "NoParams", "OptimisticPolicy", "OptimisticScorer",
    "OraclePolicy", "Policy", "PolicyEnv", "PolicySpec", "RegistryView", "QueueBanditParams", "QueueBanditPolicy",
    "QueueThompsonParams", "QueueUCBParams", "RandomPolicy", "ThompsonParams", "ThompsonPolicy",
    "builtin_policies", "experiment_tau", "get_spec", "load_plugin_policies", "make_policy",
    "policy_parameters", "register_policy", "registered_policies", "resolve_params",
]
