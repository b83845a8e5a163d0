"""Context streams: how the arrivals of a run get their contexts.

Each stream kind is declared once, in :data:`STREAM_KINDS` (by
:func:`declare_stream`): its name (the instance spec's ``kind``), its family,
its own parameters (a dataclass with defaults: they become instance keys of
the config schema), its sampler and the tag that starts its run paths.

A family says what the rest of an instance is and how a trace stores the
contexts:

* ``synthetic``: θ*_k ~ U(−1, 1)^d and contexts of norm ≤ 1 that some server
  serves at λ + ϵ or more (Assumption 3.4's slack, kept by rejection); the
  trace stores the contexts. Every context such a stream emits is checked
  (:func:`check_emitted`).
* ``pool``: θ* and a finite pool of contexts read from a file (the real-data
  experiments); the trace stores the pool row of each arrival, so a pool
  stream reorders or resamples rows and never changes one.

A sampler receives the round of every arrival and the horizon, so a stream can
change at a round T₀. Every stream here is *oblivious*: its whole sequence is a
function of the instance, the horizon and the seed's ``contexts`` stream,
fixed before the run and the same for every policy and for the optimal policy,
so the common random numbers and Q(t) − Q*(t) keep their meaning. An adaptive
adversary (one that reads the run's queue or estimates) would give each policy
another sequence, and the optimal policy yet another: out of scope.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Callable

import numpy as np

from .instances import (
    Instance,
    _passes,
    _sample_accepted_contexts,
    check_keys,
    load_pool_file,
    pool_instance,
    synthetic_instance,
)

FAMILIES = ("synthetic", "pool")


@dataclass(frozen=True)
class NoStreamParams:
    """An i.i.d. stream has no parameters of its own."""


@dataclass(frozen=True)
class SubspaceShiftParams:
    """Contexts in a ``subspace_dim``-dimensional subspace until round
    T₀ = ⌈shift_fraction · T⌉ (the direction of the server of largest ‖θ*_k‖
    and random directions orthogonal to it), then anywhere (``after: whole``)
    or in its orthogonal complement (``after: complement``, which often
    cannot keep the slack: a clear error then). Before T₀, E[xxᵀ] is singular
    (Assumption 3.3 fails) and no estimate learns the directions that arrive
    after it."""

    subspace_dim: int = 2
    shift_fraction: float = 0.9
    after: str = "whole"
    noise_scale: float = 0.0


@dataclass(frozen=True)
class SwitchParams:
    """A deceptive switch: until round T₀ = ⌈shift_fraction · T⌉ every context
    has one server as its best, from T₀ on another: the servers best for the
    largest and the second largest share of the contexts that keep the slack
    (measured on a probe of the stream's own draws), so both phases can keep it."""

    shift_fraction: float = 0.9
    noise_scale: float = 0.0


@dataclass(frozen=True)
class SortedPoolParams:
    """The shuffled pool's draws (the same rows, with replacement) presented
    sorted by each row's optimal server, argmax_k xᵀθ*_k (stable: ties keep
    their draw order), so whole regions of context space first arrive late."""

    order_by: str = "optimal_server"


@dataclass(frozen=True)
class StreamKind:
    name: str
    family: str  # one of FAMILIES
    params: type  # the stream's own parameters (a frozen dataclass with defaults)
    sampler: Callable  # (instance, rounds, horizon, rng) -> (contexts, pool rows or None)
    tag: str  # the first word of its run paths
    description: str
    choices: dict  # parameter -> its allowed values, for the text-valued ones


STREAM_KINDS: dict[str, StreamKind] = {}


def declare_stream(name: str, family: str, params: type, tag: str, description: str, choices: dict | None = None):
    """Decorator declaring a stream kind whose sampler it wraps."""
    if family not in FAMILIES:
        raise ValueError(f"stream family must be one of {FAMILIES}, got {family!r}")

    def wrap(sampler):
        if name in STREAM_KINDS or any(kind.tag == tag for kind in STREAM_KINDS.values()):
            raise ValueError(f"stream kind {name!r} or its tag {tag!r} is already declared")
        STREAM_KINDS[name] = StreamKind(name, family, params, sampler, tag, description, dict(choices or {}))
        return sampler

    return wrap


def stream_kind(name) -> StreamKind:
    if name not in STREAM_KINDS:
        raise ValueError(f"instance kind must be one of {', '.join(STREAM_KINDS)}, got {name!r}")
    return STREAM_KINDS[name]


def family_of(spec: dict) -> str:
    """The family ("synthetic" or "pool") of an instance spec's stream."""
    return stream_kind(spec.get("kind")).family


def stream_params(kind: StreamKind, spec: dict):
    """The stream's own parameter dataclass from an instance spec (defaults for
    keys it does not give), its values checked."""
    values = kind.params(**{f.name: spec[f.name] for f in fields(kind.params) if f.name in spec})
    for key, allowed in kind.choices.items():
        if getattr(values, key) not in allowed:
            raise ValueError(f"{key} of stream {kind.name!r} must be one of {list(allowed)}, "
                             f"got {getattr(values, key)!r}")
    for key in ("shift_fraction",):
        if hasattr(values, key) and not 0 < getattr(values, key) <= 1:
            raise ValueError(f"{key} of stream {kind.name!r} must lie in (0, 1], got {getattr(values, key)!r}")
    if getattr(values, "noise_scale", 0.0) < 0:
        raise ValueError(f"noise_scale of stream {kind.name!r} must be ≥ 0, got {values.noise_scale!r}")
    return values


def shift_round(params, horizon: int) -> int:
    """T₀ = ⌈shift_fraction · T⌉: the first round of the stream's second phase."""
    return max(1, math.ceil(params.shift_fraction * horizon))


def check_emitted(instance, contexts: np.ndarray) -> None:
    """Every context a synthetic stream emits has norm ≤ 1 and some server
    serving it at λ + ϵ or more (the same test the rejection sampler applies);
    a ValueError naming the stream and the first arrival that breaks it."""
    if contexts.shape[0] == 0:
        return
    norms = np.sqrt((contexts * contexts).sum(axis=1))
    over = np.flatnonzero(norms > 1 + 1e-9)
    short = np.flatnonzero(~_passes(contexts, instance.theta, instance.arrival_rate + instance.slack))
    if over.size or short.size:
        first = int(min(over.min() if over.size else contexts.shape[0], short.min() if short.size else contexts.shape[0]))
        raise ValueError(f"stream {instance.kind!r} emitted a context that breaks the slack assumption "
                         f"(arrival {first}: norm {norms[first]:.6g}, best service probability "
                         f"{float(instance.service_probabilities(contexts[first:first + 1]).max()):.6g} "
                         f"< λ + ϵ = {instance.arrival_rate + instance.slack:g})")


# ---------------------------------------------------------------- the i.i.d. streams (the paper's)


@declare_stream("synthetic", "synthetic", NoStreamParams, "synth",
                "i.i.d.: unit contexts uniform on the sphere, kept if some server reaches λ + ϵ (the paper's §7)")
def _iid_synthetic(instance, rounds, horizon, rng):
    threshold = instance.arrival_rate + instance.slack
    return _sample_accepted_contexts(instance.theta, threshold, rounds.size, rng, instance.accept_rate), None


@declare_stream("pool", "pool", NoStreamParams, "pool",
                "i.i.d.: rows of a real-data pool, uniform with replacement (the paper's Appendix A)")
def _iid_pool(instance, rounds, horizon, rng):
    rows = rng.integers(instance.pool.shape[0], size=rounds.size)
    return instance.pool[rows], rows


# ---------------------------------------------------------------- oblivious adversaries


@declare_stream("sorted_pool", "pool", SortedPoolParams, "sortedpool",
                "the shuffled pool's rows, sorted by their optimal server", {"order_by": ("optimal_server",)})
def _sorted_pool(instance, rounds, horizon, rng):
    _, rows = _iid_pool(instance, rounds, horizon, rng)
    best = np.argmax(instance.pool[rows] @ instance.theta.T, axis=1)
    rows = rows[np.argsort(best, kind="stable")]
    return instance.pool[rows], rows


def _unit_gaussian(rng, size: int, basis: np.ndarray) -> np.ndarray:
    """``size`` directions uniform on the unit sphere of span(basis columns)."""
    draws = rng.standard_normal((size, basis.shape[1])) @ basis.T
    return draws / np.sqrt((draws * draws).sum(axis=1))[:, None]


def _smoothed(rng, rows: np.ndarray, noise_scale: float) -> np.ndarray:
    """rows + N(0, σ² I), each brought back into the unit ball (σ = 0: unchanged)."""
    if noise_scale == 0:
        return rows
    moved = rows + noise_scale * rng.standard_normal(rows.shape)
    return moved / np.maximum(1.0, np.sqrt((moved * moved).sum(axis=1)))[:, None]


def _rejection(instance, rng, n: int, propose: Callable, accept: Callable, what: str) -> np.ndarray:
    """n proposals that pass ``accept`` (and the slack), in draw order. Fails
    clearly when fewer than ``min_accept_rate`` of a probe pass: such a stream
    cannot keep the slack assumption."""
    minimum = instance.min_accept_rate
    threshold = instance.arrival_rate + instance.slack
    kept, have, rate = [], 0, None
    while have < n:
        size = 2000 if rate is None else int(math.ceil((n - have) / rate * 1.2)) + 64
        batch = propose(size)
        good = batch[_passes(batch, instance.theta, threshold) & accept(batch)]
        if rate is None:
            rate = good.shape[0] / size
            if rate < minimum:
                raise ValueError(f"stream {instance.kind!r} cannot keep the slack: only {good.shape[0]} of {size} "
                                 f"contexts {what} reach λ + ϵ = {threshold:g} (min_accept_rate {minimum:g})")
        kept.append(good)
        have += good.shape[0]
    return np.concatenate(kept)[:n] if kept else np.empty((0, instance.dim))


def _two_phases(instance, rounds, horizon, rng, params, first: Callable, second: Callable) -> np.ndarray:
    """The arrivals before T₀ from ``first(rng, n)``, those from T₀ on from
    ``second(rng, n)``, each smoothed by the stream's noise, in arrival order."""
    before = int(np.searchsorted(rounds, shift_round(params, horizon)))
    parts = [first(rng, before), second(rng, rounds.size - before)]
    return np.concatenate(parts) if rounds.size else np.empty((0, instance.dim))


@declare_stream("subspace_shift", "synthetic", SubspaceShiftParams, "subspace",
                "contexts in a random subspace until T₀, then in new directions",
                {"after": ("whole", "complement")})
def _subspace_shift(instance, rounds, horizon, rng):
    params = instance.stream_params
    d, m = instance.dim, params.subspace_dim
    if not 1 <= m < d:
        raise ValueError(f"subspace_dim of stream 'subspace_shift' must lie in [1, d − 1] = [1, {d - 1}], got {m!r}")
    # The subspace holds the direction of the server of largest ‖θ*_k‖ (so its
    # contexts can keep the slack: a uniformly random plane of d = 5 rarely
    # reaches λ + ϵ) and m − 1 directions uniform among those orthogonal to it.
    anchor = instance.theta[int(np.argmax((instance.theta ** 2).sum(axis=1)))]
    basis, _ = np.linalg.qr(np.column_stack([anchor, rng.standard_normal((d, d - 1))]))
    inside = basis[:, :m]
    outside = basis[:, m:] if params.after == "complement" else np.eye(d)

    def phase(directions, what):
        def draw(phase_rng, n):
            if n == 0:
                return np.empty((0, d))
            return _rejection(instance, phase_rng, n,
                              lambda size: _smoothed(phase_rng, _unit_gaussian(phase_rng, size, directions),
                                                     params.noise_scale),
                              lambda batch: np.ones(batch.shape[0], dtype=bool), what)
        return draw

    return _two_phases(instance, rounds, horizon, rng, params,
                       phase(inside, f"in the {m}-dimensional subspace"),
                       phase(outside, f"after the shift ({params.after})")), None


@declare_stream("deceptive_switch", "synthetic", SwitchParams, "switch",
                "early contexts favour one server, later ones another")
def _deceptive_switch(instance, rounds, horizon, rng):
    params = instance.stream_params
    d = instance.dim
    probe = _unit_gaussian(rng, 20000, np.eye(d))
    probe = probe[_passes(probe, instance.theta, instance.arrival_rate + instance.slack)]
    shares = np.bincount(np.argmax(probe @ instance.theta.T, axis=1), minlength=instance.n_servers)
    first, second = (int(server) for server in np.argsort(-shares, kind="stable")[:2])

    def phase(server):
        def draw(phase_rng, n):
            if n == 0:
                return np.empty((0, d))
            return _rejection(instance, phase_rng, n,
                              lambda size: _smoothed(phase_rng, _unit_gaussian(phase_rng, size, np.eye(d)),
                                                     params.noise_scale),
                              lambda batch: np.argmax(batch @ instance.theta.T, axis=1) == server,
                              f"with server {server} best")
        return draw

    return _two_phases(instance, rounds, horizon, rng, params, phase(first), phase(second)), None


def draw_contexts(instance, rounds: np.ndarray, horizon: int, rng: np.random.Generator):
    """(contexts, pool rows or None) of the arrivals at ``rounds`` (1-based,
    increasing), from the instance's stream; a synthetic stream's contexts
    checked (:func:`check_emitted`)."""
    kind = stream_kind(instance.kind)
    contexts, rows = kind.sampler(instance, np.asarray(rounds), int(horizon), rng)
    if kind.family == "synthetic":
        check_emitted(instance, contexts)
    return contexts, rows


# ---------------------------------------------------------------- instances from their specs

# The instance keys of each family besides the stream's own parameters.
FAMILY_KEYS = {
    "synthetic": ({"kind", "n_servers", "dim", "arrival_rate", "slack", "min_accept_rate"},
                  {"n_servers", "dim", "arrival_rate", "slack"}),
    "pool": ({"kind", "pool", "arrival_rate", "name"}, {"pool", "arrival_rate"}),
}


def instance_from_spec(spec: dict, rng: np.random.Generator) -> Instance:
    """Build an instance from its config dict (docs/architecture.md): the
    family's θ* (and pool), with the stream its ``kind`` names."""
    kind = stream_kind(spec.get("kind"))
    allowed, required = FAMILY_KEYS[kind.family]
    check_keys(spec, allowed | {f.name for f in fields(kind.params)}, required)
    params = stream_params(kind, spec)
    if kind.family == "synthetic":
        minimum = spec.get("min_accept_rate", 0.005)
        instance = synthetic_instance(spec["n_servers"], spec["dim"], spec["arrival_rate"], spec["slack"],
                                      rng, min_accept_rate=minimum)
        instance = replace(instance, min_accept_rate=minimum)
    else:
        contexts, theta = load_pool_file(spec["pool"])
        instance = pool_instance(theta, contexts, spec["arrival_rate"],
                                 description={"pool": str(spec["pool"]), "name": spec.get("name")})
    if kind.name == kind.family:  # the i.i.d. streams: the instance as the paper's experiments build it
        return instance
    return replace(instance, kind=kind.name, stream_params=params,
                   description=dict(instance.description, stream=kind.name,
                                     **{f.name: getattr(params, f.name) for f in fields(params)}))
