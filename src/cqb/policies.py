"""Scheduling policies and their registry.

A policy sees the queue as the arrival ids of the waiting jobs, oldest first,
and the context matrix of all arrivals (it may only look at rows of queued
jobs). Each round it returns ``(position in queue, server, explored)`` and then
observes the outcome of that pair. Policies never see θ*, except the oracle,
which is built from the true service probabilities.

To add a policy::

    @register_policy("my_policy", "My policy", MyParams)
    def make_my_policy(env, contexts, rng, params): ...

where ``MyParams`` is a dataclass of its parameters with defaults.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Callable, Protocol

import numpy as np

from .estimation import EstimatorConfig, LogisticEstimator, logistic


@dataclass(frozen=True)
class PolicyEnv:
    """What a policy may know about the problem before it starts."""

    n_servers: int
    dim: int
    horizon: int
    arrival_rate: float
    slack: float | None  # nominal slack ϵ; None for real-data instances
    norm_bound: float | None = None  # the known S of Assumption 3.1, if the instance states one


class Policy(Protocol):
    def choose(self, t: int, queue: np.ndarray, new_arrival: bool) -> tuple[int, int, bool]:
        """Pick (position in ``queue``, server, explored) for round t."""

    def observe(self, t: int, job: int, server: int, success: bool) -> None:
        """The outcome D(t) of serving arrival ``job`` at ``server``."""


@dataclass(frozen=True)
class PolicySpec:
    name: str
    display_name: str
    params: type
    factory: Callable
    needs_truth: bool = False


POLICIES: dict[str, PolicySpec] = {}
DISPLAY_NAMES: dict[str, str] = {}  # policy name → name in figures


def register_policy(name: str, display_name: str, params: type, needs_truth: bool = False):
    """Decorator that adds a policy factory to the registry."""

    def wrap(factory):
        if name in POLICIES:
            raise ValueError(f"policy {name!r} is already registered")
        POLICIES[name] = PolicySpec(name, display_name, params, factory, needs_truth)
        DISPLAY_NAMES[name] = display_name
        return factory

    return wrap


def registered_policies() -> dict[str, PolicySpec]:
    """Every registered policy, plugins included, by name."""
    return POLICIES


def get_spec(name: str) -> PolicySpec:
    if name not in POLICIES:
        raise ValueError(f"unknown policy {name!r}; known policies: {', '.join(sorted(POLICIES))}")
    return POLICIES[name]


def policy_parameters(name: str) -> dict:
    """The parameters of a policy with their defaults."""
    return asdict(get_spec(name).params())


def resolve_params(name: str, params: dict | None, env: PolicyEnv):
    """The policy's parameter dataclass with user values and resolved defaults."""
    spec = get_spec(name)
    params = dict(params or {})
    known = {f.name for f in fields(spec.params)}
    unknown = set(params) - known
    if unknown:
        raise ValueError(f"unknown parameter(s) {sorted(unknown)} for policy {name!r}; "
                         f"its parameters: {sorted(known) or 'none'}")
    values = spec.params(**params)
    return values.resolve(env) if hasattr(values, "resolve") else values


def make_policy(name: str, env: PolicyEnv, contexts: np.ndarray, rng: np.random.Generator,
                params: dict | None = None, true_means: np.ndarray | None = None):
    """Build policy ``name``; returns (policy, resolved parameter dataclass)."""
    spec = get_spec(name)
    resolved = resolve_params(name, params, env)
    if spec.needs_truth:
        if true_means is None:
            raise ValueError(f"policy {name!r} needs the true service probabilities")
        return spec.factory(env, contexts, rng, resolved, true_means=true_means), resolved
    return spec.factory(env, contexts, rng, resolved), resolved


# --------------------------------------------------------------------------- parameters


@dataclass(frozen=True)
class NoParams:
    pass


@dataclass(frozen=True)
class EstimatorParams:
    reg: float = 1.0
    kappa: float = 10.0
    delta: float | None = None  # None → 1/T
    norm_bound: float | None = None  # None → the instance's known bound (√d synthetic, max ‖θ*‖ pool)
    bonus_scale: float = 0.03  # c_β: see README, "The bonus scale"
    projection: str = "filippi"
    design_reg: str = "kappa"
    newton_tol: float = 1e-6
    newton_max_iter: int = 25
    refit_growth: float = 0.2
    refit_min_samples: int = 10

    def resolve(self, env: PolicyEnv):
        changes = {}
        if self.delta is None:
            changes["delta"] = 1.0 / env.horizon
        if self.norm_bound is None:
            changes["norm_bound"] = env.norm_bound if env.norm_bound is not None else math.sqrt(env.dim)
        if not (self.bonus_scale >= 0 and math.isfinite(self.bonus_scale)):
            raise ValueError(f"bonus_scale must be a non-negative number, got {self.bonus_scale!r}")
        resolved = _replace(self, **changes)
        resolved.estimator_config()  # validates the rest
        return resolved

    def estimator_config(self) -> EstimatorConfig:
        return EstimatorConfig(reg=self.reg, kappa=self.kappa, delta=self.delta,
                               norm_bound=self.norm_bound, projection=self.projection,
                               design_reg=self.design_reg, newton_tol=self.newton_tol,
                               newton_max_iter=self.newton_max_iter,
                               refit_growth=self.refit_growth,
                               refit_min_samples=self.refit_min_samples)


def _replace(obj, **changes):
    return type(obj)(**{**asdict(obj), **changes})


def experiment_tau(env: PolicyEnv, explore_prob: float, tau_constant: float) -> int:
    """τ = C·d³·ln T·K/λ/(ϵ − 2ε)², the paper's experimental phase-1 length."""
    if env.slack is None:
        raise ValueError("tau is null but the instance has no nominal slack to compute it from; "
                         "give tau explicitly (the real-data experiments use tau = T/10)")
    margin = env.slack - 2 * explore_prob
    if margin <= 0:
        raise ValueError(f"tau formula needs slack > 2·explore_prob, got slack={env.slack} "
                         f"and explore_prob={explore_prob}")
    tau = tau_constant * env.dim ** 3 * math.log(env.horizon) * env.n_servers / env.arrival_rate / margin ** 2
    return int(math.ceil(tau))


@dataclass(frozen=True)
class EpsilonParams(EstimatorParams):
    tau: int | None = None  # None → experiment formula
    tau_constant: float = 3e-4
    explore_prob: float | None = None  # None → T^(-1/2)
    phase1_server: str = "round_robin"

    def resolve(self, env):
        base = EstimatorParams.resolve(self, env)
        explore_prob = env.horizon ** -0.5 if self.explore_prob is None else self.explore_prob
        _check_probability("explore_prob", explore_prob)
        tau = experiment_tau(env, explore_prob, self.tau_constant) if self.tau is None else self.tau
        _check_round("tau", tau)
        _check_choice("phase1_server", self.phase1_server, ("round_robin", "uniform"))
        return _replace(base, explore_prob=explore_prob, tau=int(tau))


@dataclass(frozen=True)
class EpsilonOptParams(EstimatorParams):
    explore_prob: float | None = None  # None → T^(-1/2)

    def resolve(self, env):
        base = EstimatorParams.resolve(self, env)
        explore_prob = env.horizon ** -0.5 if self.explore_prob is None else self.explore_prob
        _check_probability("explore_prob", explore_prob)
        return _replace(base, explore_prob=explore_prob)


@dataclass(frozen=True)
class ThompsonParams(EstimatorParams):
    ts_mode: str = "score"

    def resolve(self, env):
        _check_choice("ts_mode", self.ts_mode, ("score", "parameter"))
        return EstimatorParams.resolve(self, env)


@dataclass(frozen=True)
class EtaParams(EstimatorParams):
    tau: int | None = None  # None → CQB-ε's experiment formula (same phase 1)
    tau_constant: float = 3e-4
    eta: float | None = None  # None → slack/4
    cutoff: int | None = None  # None → T − ⌈(C/ϵ²) ln T⌉ clipped to [τ, T]
    cutoff_constant: float = 32.0
    phase1_server: str = "round_robin"

    def resolve(self, env):
        base = EstimatorParams.resolve(self, env)
        if (self.eta is None or self.cutoff is None) and env.slack is None:
            raise ValueError("cqb_eta2 needs eta and cutoff when the instance has no nominal slack")
        eta = env.slack / 4 if self.eta is None else self.eta
        _check_probability("eta", eta)
        tau = experiment_tau(env, env.horizon ** -0.5, self.tau_constant) if self.tau is None else self.tau
        _check_round("tau", tau)
        if self.cutoff is None:
            length = math.ceil(self.cutoff_constant / env.slack ** 2 * math.log(env.horizon))
            cutoff = min(max(env.horizon - length, tau), env.horizon)
        else:
            cutoff = self.cutoff
        _check_round("cutoff", cutoff)
        _check_choice("phase1_server", self.phase1_server, ("round_robin", "uniform"))
        return _replace(base, eta=eta, tau=int(tau), cutoff=int(cutoff))


@dataclass(frozen=True)
class QueueBanditParams:
    explore_constant: float = 3.0  # exploration probability min{1, C·K(ln t)²/t}

    def resolve(self, env):
        if not self.explore_constant >= 0:
            raise ValueError(f"explore_constant must be ≥ 0, got {self.explore_constant!r}")
        return self


def _check_probability(name, value):
    if not (isinstance(value, (int, float)) and 0 <= value <= 1):
        raise ValueError(f"{name} must lie in [0, 1], got {value!r}")


def _check_round(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer number of rounds, got {value!r}")


def _check_choice(name, value, choices):
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")


# --------------------------------------------------------------------------- baselines


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


# --------------------------------------------------------------------------- CQB family


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
        self.scored_until = 0  # arrival ids below this have full rows
        # Columns to refresh before the next decision. A set, not one server:
        # exploration rounds update a server without scoring, so several
        # columns can go stale between two UCB rounds.
        self.stale = np.zeros(env.n_servers, dtype=bool)

    def refresh(self, queue):
        est = self.estimator
        length = queue.shape[0]
        newest = int(queue[-1]) + 1
        fresh = max(newest - self.scored_until, 0)
        # New ids sit at the tail of the id-sorted queue; an explored newcomer
        # may have left unscored, then fall back to a search.
        if fresh == 0:
            n_old = length
        elif fresh <= length and queue[length - fresh] == self.scored_until:
            n_old = length - fresh
        else:
            n_old = int(np.searchsorted(queue, self.scored_until))
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
            X = self.contexts[self.scored_until:newest]
            means = logistic(X @ est.theta.T)
            if fresh == 1:
                widths = np.sqrt((est.design_inv @ X[0]) @ X[0])[None]
            else:
                widths = np.sqrt(np.einsum("nd,kde,ne->nk", X, est.design_inv, X))
            bonuses = (self.bonus_scale * est.widths) * widths
            self.means[self.scored_until:newest] = means
            self.bonuses[self.scored_until:newest] = bonuses
            self.ucb[self.scored_until:newest] = means + bonuses
            self.scored_until = newest

    def optimistic_choice(self, queue):
        self.refresh(queue)
        scores = self.ucb[queue]
        flat = int(scores.argmax())  # row-major: earliest job, then lowest server, on ties
        return divmod(flat, scores.shape[1])

    def update(self, job, server, success):
        self.estimator.update(server, self.contexts[job], float(success))
        self.stale[server] = True


class ExplorationUCBPolicy:
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

    def observe(self, t, job, server, success):
        self.scorer.update(job, server, success)


class OptimisticPolicy:
    """CQB-Opt: the UCB pair in every round."""

    def __init__(self, env, contexts, rng, params):
        self.scorer = OptimisticScorer(env, contexts, params)

    def choose(self, t, queue, new_arrival):
        position, server = self.scorer.optimistic_choice(queue)
        return position, server, False

    def observe(self, t, job, server, success):
        self.scorer.update(job, server, success)


class ThompsonPolicy:
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

    def observe(self, t, job, server, success):
        self.scorer.update(job, server, success)


# --------------------------------------------------------------------------- registry


@register_policy("random", "Random", NoParams)
def _make_random(env, contexts, rng, params):
    return RandomPolicy(env, contexts, rng, params)


@register_policy("oracle", "Optimal", NoParams, needs_truth=True)
def _make_oracle(env, contexts, rng, params, true_means):
    return OraclePolicy(env, contexts, rng, params, true_means)


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


@register_policy("q_ucb", "Q-UCB", QueueBanditParams)
def _make_q_ucb(env, contexts, rng, params):
    return QueueBanditPolicy(env, contexts, rng, params, sampling=False)


@register_policy("q_ths", "Q-ThS", QueueBanditParams)
def _make_q_ths(env, contexts, rng, params):
    return QueueBanditPolicy(env, contexts, rng, params, sampling=True)


@register_policy("cqb_eta2", "CQB-η-2", EtaParams)
def _make_cqb_eta2(env, contexts, rng, params):
    return ExplorationUCBPolicy(env, contexts, rng, params, params.tau, params.eta,
                                params.cutoff, params.phase1_server)



PLUGIN_GROUP = "cqb.policies"


def load_plugin_policies(entry_points=None) -> list[str]:
    """Import the modules that installed packages declare under the entry-point
    group ``cqb.policies``; their ``@register_policy`` decorators register them.
    So a policy of your own package is known to the CLI, the simulator and every
    pipeline job without editing this repository::

        [project.entry-points."cqb.policies"]
        my_policies = "my_package.policies"
    """
    if entry_points is None:
        from importlib.metadata import entry_points as installed

        entry_points = installed(group=PLUGIN_GROUP)
    loaded = []
    for entry in entry_points:
        try:
            entry.load()
        except Exception as error:
            raise ImportError(f"policy plugin {entry.name!r} ({entry.value}) failed to import: {error}") from error
        loaded.append(entry.name)
    return loaded


load_plugin_policies()
