"""Problem instances: server parameters θ*, the arrival rate, and the
rejection sampler that keeps the slack.

Two families (the paper's §7 and Appendix A):

* synthetic: θ*_k ~ U(−1, 1)^d; a context is u ~ U(−1, 1)^d scaled to unit
  norm and kept only if some server serves it with probability at least
  λ + ϵ (rejection sampling), so the slack assumption holds by construction;
* pool: θ* and a finite matrix of contexts are given (real-data experiments).

How the arrivals draw their contexts is the instance's stream
(:mod:`cqb.sim.streams`, which also builds an instance from its spec).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .estimation import logistic




@dataclass(frozen=True)
class Instance:
    """θ* (K × d), the arrival rate λ and how contexts are drawn."""

    kind: str  # its context stream (cqb.sim.streams.STREAM_KINDS)
    theta: np.ndarray
    arrival_rate: float
    slack: float | None = None  # nominal slack ϵ; None when not enforced (pool)
    pool: np.ndarray | None = None  # (n, d) contexts of a pool instance
    accept_rate: float | None = None  # share of raw draws that pass the slack test
    description: dict = field(default_factory=dict)
    stream_params: object = None  # the stream's own parameters (None: an i.i.d. stream's defaults)
    min_accept_rate: float = 0.005  # a synthetic stream fails below this share of passing draws

    @property
    def family(self) -> str:
        """"pool" when contexts are rows of a given pool, else "synthetic"."""
        return "pool" if self.pool is not None else "synthetic"

    @property
    def norm_bound(self) -> float:
        """The known S ≥ max ‖θ*_k‖ of Assumption 3.1: √d for U(−1, 1)^d parameters
        (the largest possible norm), the largest ‖θ*_k‖ for a given θ* (pool)."""
        if self.family == "synthetic":
            return math.sqrt(self.dim)
        return float(np.linalg.norm(self.theta, axis=1).max())

    @property
    def server_norms(self) -> tuple[float, ...]:
        """‖θ*_k‖ of every server: the per-server bounds S_k (policy parameter
        norm_bound_kind "per_server")."""
        return tuple(float(norm) for norm in np.linalg.norm(self.theta, axis=1))

    @property
    def n_servers(self) -> int:
        return self.theta.shape[0]

    @property
    def dim(self) -> int:
        return self.theta.shape[1]

    def service_probabilities(self, contexts: np.ndarray) -> np.ndarray:
        """μ(xᵀθ*_k) for every row x of ``contexts`` and every server k."""
        return logistic(contexts @ self.theta.T)

    def diagnostics(self, contexts: np.ndarray) -> dict:
        """Measured slack and κ over a sample of contexts (e.g. a run's arrivals)."""
        if contexts.shape[0] == 0:
            return {"measured_slack": None, "measured_kappa": None}
        probs = self.service_probabilities(contexts)
        derivative = probs * (1.0 - probs)
        return {
            "measured_slack": float(probs.max(axis=1).min() - self.arrival_rate),
            "measured_kappa": float(1.0 / derivative.min()),
        }

    def summary(self) -> dict:
        return {
            "kind": self.kind,
            "n_servers": self.n_servers,
            "dim": self.dim,
            "arrival_rate": self.arrival_rate,
            "slack": self.slack,
            "theta_max_norm": float(np.linalg.norm(self.theta, axis=1).max()),
            "norm_bound": self.norm_bound,
            "accept_rate": self.accept_rate,
            **self.description,
        }


def _unit_rows(n: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    raw = rng.uniform(-1.0, 1.0, size=(n, dim))
    return raw / _row_norms(raw)[:, None]


def _row_norms(matrix: np.ndarray) -> np.ndarray:
    """``np.linalg.norm(matrix, axis=1)``, bit for bit. numpy sums a row of
    fewer than 8 entries left to right, so for up to 7 columns a running sum
    over the columns adds the same squares in the same order, ~3× faster than
    its reduction along such short rows; wider rows are summed pairwise by
    numpy, and go to numpy (tests/test_sim_instances.py checks both)."""
    if not 2 <= matrix.shape[1] <= 7:
        return np.linalg.norm(matrix, axis=1)
    squares = matrix * matrix
    total = squares[:, 0].copy()
    for column in range(1, matrix.shape[1]):
        total += squares[:, column]
    return np.sqrt(total, out=total)


def _passes(contexts: np.ndarray, theta: np.ndarray, threshold: float) -> np.ndarray:
    """max_k μ(xᵀθ*_k) ≥ threshold, row by row. μ is increasing, so a row is
    decided by its largest score against logit(threshold); only rows within a
    hair of that cut (far wider than μ's rounding) get μ itself. The same
    decisions as μ on every entry, without a tanh per entry: the rejection
    sampler tests 10⁵–10⁶ raw contexts per run (tests/test_simulate.py)."""
    scores = contexts @ theta.T
    best = _row_max(scores)
    cut = math.log(threshold) - math.log1p(-threshold)
    margin = 1e-9 * (1.0 + abs(cut))
    passes = best >= cut + margin
    near = np.flatnonzero(np.abs(best - cut) < margin)
    if near.size:
        passes[near] = logistic(scores[near]).max(axis=1) >= threshold
    return passes


def _row_max(matrix: np.ndarray) -> np.ndarray:
    """``matrix.max(axis=1)``; for a tall matrix of up to 8 columns (K servers)
    as a running maximum over the columns, ~2–10× faster than numpy's
    reduction along such short rows (past 8 columns the strided passes cost
    more). The same decisions either way: a maximum rounds nothing."""
    if not 2 <= matrix.shape[1] <= 8:
        return matrix.max(axis=1)
    best = matrix[:, 0].copy()
    for column in range(1, matrix.shape[1]):
        np.maximum(best, matrix[:, column], out=best)
    return best


def _sample_accepted_contexts(theta, threshold, n, rng, accept_rate, screen: bool = True) -> np.ndarray:
    """n unit contexts that pass the slack test, in draw order. ``screen``: the
    draws and the acceptance test in compiled code (:func:`_draw_accepted`);
    False: the numpy reference (unit rows, then :func:`_passes`). Both consume
    the same uniforms and keep the same rows (tests/test_sim_instances.py)."""
    dim = theta.shape[1]
    chunks, have = [], 0
    # Batches sized from the known acceptance rate keep the loop to one or two passes.
    rate = max(accept_rate or 0.01, 1e-4)
    while have < n:
        size = int(math.ceil((n - have) / rate * 1.2)) + 64
        if screen:
            kept = _draw_accepted(rng, size, theta, threshold)
            kept /= _row_norms(kept)[:, None]  # the same rows, bit for bit, as _unit_rows gives
        else:
            batch = _unit_rows(size, dim, rng)
            kept = batch[_passes(batch, theta, threshold)]
        chunks.append(kept)
        have += kept.shape[0]
    return np.concatenate(chunks)[:n] if chunks else np.empty((0, dim))


# How far outside the decision band of _passes the compiled screen decides a
# row itself: its scores differ from numpy's (another summation order, one
# division per row) by a few ulps, ~1e-15 at these magnitudes, so 1e-11 is
# ample; rows in between go to _passes.
SCREEN_SLOP = 1e-11


def _draw_accepted(rng, size: int, theta: np.ndarray, threshold: float) -> np.ndarray:
    """Of ``size`` raw draws ``rng.uniform(-1, 1, (size, d))``, the rows that
    pass ``_passes`` once scaled to unit length, in draw order, not yet scaled:
    drawn and screened in compiled code (cqb.sim._sampler.draw_screened), which
    decides every row clearly inside or outside the cut; the numpy reference
    decides the rest (a handful per million draws)."""
    from .core import core
    cut = math.log(threshold) - math.log1p(-threshold)
    band = 1e-9 * (1.0 + abs(cut)) + SCREEN_SLOP * (1.0 + abs(cut))  # _passes's margin, widened
    rows, codes = core().draw_screened(rng, size, theta, cut - band, cut + band)
    accepted = codes == 1
    undecided = np.flatnonzero(codes == 2)
    if undecided.size:
        near = rows[undecided]
        accepted[undecided] = _passes(near / _row_norms(near)[:, None], theta, threshold)
    return rows[accepted]


def synthetic_instance(
    n_servers: int,
    dim: int,
    arrival_rate: float,
    slack: float,
    rng: np.random.Generator,
    min_accept_rate: float = 0.005,
    acceptance_probe: int = 20000,
    max_redraws: int = 200,
) -> Instance:
    """A synthetic instance (docs/model.md#synthetic-instances); θ* is redrawn while fewer than
    ``min_accept_rate`` of raw contexts satisfy the slack."""
    check_positive_int("n_servers", n_servers)
    check_positive_int("dim", dim)
    check_arrival_rate(arrival_rate)
    if not 0 < slack < 1 - arrival_rate:
        raise ValueError(
            f"slack must lie in (0, 1 - arrival_rate) = (0, {1 - arrival_rate:g}), got {slack!r}")
    if not 0 < min_accept_rate < 1:
        raise ValueError(f"min_accept_rate must lie in (0, 1), got {min_accept_rate!r}")
    threshold = arrival_rate + slack
    for redraw in range(max_redraws):
        theta = rng.uniform(-1.0, 1.0, size=(n_servers, dim))
        # the share of acceptance_probe raw draws (as _unit_rows draws them) that pass
        accept_rate = _draw_accepted(rng, acceptance_probe, theta, threshold).shape[0] / acceptance_probe
        if accept_rate >= min_accept_rate:
            return Instance("synthetic", theta, float(arrival_rate), float(slack),
                            accept_rate=accept_rate,
                            description={"theta_redraws": redraw})
    raise ValueError(
        f"no θ* with acceptance rate ≥ {min_accept_rate} in {max_redraws} draws for "
        f"K={n_servers}, d={dim}, arrival_rate={arrival_rate}, slack={slack}: "
        "the slack cannot be met with unit-norm contexts")


def pool_instance(theta: np.ndarray, contexts: np.ndarray, arrival_rate: float,
                  slack: float | None = None, description: dict | None = None) -> Instance:
    """An instance whose arrivals sample rows of ``contexts`` uniformly."""
    theta = np.asarray(theta, dtype=np.float64)
    contexts = np.asarray(contexts, dtype=np.float64)
    check_arrival_rate(arrival_rate)
    if theta.ndim != 2 or contexts.ndim != 2:
        raise ValueError(f"theta and contexts must be matrices, got shapes {theta.shape} and {contexts.shape}")
    if theta.shape[1] != contexts.shape[1]:
        raise ValueError(
            f"dimension mismatch: theta has d={theta.shape[1]} but contexts have d={contexts.shape[1]}")
    if contexts.shape[0] == 0:
        raise ValueError("the context pool is empty")
    norms = np.linalg.norm(contexts, axis=1)
    if norms.max() > 1 + 1e-9:
        raise ValueError(f"contexts must have norm ≤ 1, the largest is {norms.max():.6g}")
    return Instance("pool", theta, float(arrival_rate), slack, pool=contexts,
                    description=dict(description or {}, pool_size=int(contexts.shape[0])))


def load_pool_file(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """(contexts, theta) of a pool file; pool_instance converts and checks them."""
    with np.load(path, allow_pickle=False) as data:
        missing = {"contexts", "theta"} - set(data.files)
        if missing:
            raise ValueError(f"pool file {path} lacks {sorted(missing)}")
        return data["contexts"], data["theta"]


def check_keys(spec: dict, allowed: set, required: set) -> None:
    unknown = set(spec) - allowed
    if unknown:
        raise ValueError(f"unknown instance keys {sorted(unknown)}; allowed: {sorted(allowed)}")
    missing = required - set(spec)
    if missing:
        raise ValueError(f"instance spec lacks {sorted(missing)}")


def check_arrival_rate(arrival_rate) -> None:
    if not isinstance(arrival_rate, (int, float)) or not 0 < arrival_rate < 1:
        raise ValueError(f"arrival_rate must lie in (0, 1), got {arrival_rate!r}")


def check_positive_int(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
