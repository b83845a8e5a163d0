"""Per-server regularised logistic MLE with the confidence bonus of the paper's §5 (docs/model.md).

Every server k keeps its own data (x_i, D(i)), the MLE θ̂_k (warm-started
Newton refits on a geometric schedule, one online Newton step in between),
its projection θ_k onto {‖θ‖ ≤ S_k} (S_k = S for every server unless a bound
per server is given) and the inverses of the design matrix
V_k = κλ₀I + Σ x_i x_iᵀ and of the Hessian, kept by Sherman–Morrison updates.
Only the served server changes in a round. The arithmetic is the compiled
core's (cqb.sim._estimator.Estimator); this module checks the parameters and builds it.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from .core import core

PROJECTIONS = ("filippi", "euclidean")
DESIGN_REGS = ("kappa", "plain")


def logistic(z):
    """μ(z) = 1/(1 + e^(−z)) of every entry of the array z: the kernels' one μ
    (cqb.sim._algebra.logistic), not a second formula that rounds otherwise."""
    return core().logistic_values(z)


def check_estimator_params(params) -> None:
    """ValueError naming the first bad value among a resolved EstimatorParams'
    estimator fields (delta and norm_bound resolved, not None)."""
    for name in ("reg", "kappa", "norm_bound", "newton_tol"):
        value = getattr(params, name)
        if name == "norm_bound" and isinstance(value, tuple) and value:
            if all(_positive_number(bound) for bound in value):
                continue
            raise ValueError(f"norm_bound per server must be positive numbers, got {value!r}")
        if not _positive_number(value):
            raise ValueError(f"{name} must be a positive number, got {value!r}")
    if not (isinstance(params.delta, (int, float)) and 0 < params.delta < 1):
        raise ValueError(f"delta must lie in (0, 1), got {params.delta!r}")
    if params.projection not in PROJECTIONS:
        raise ValueError(f"projection must be one of {PROJECTIONS}, got {params.projection!r}")
    if params.design_reg not in DESIGN_REGS:
        raise ValueError(f"design_reg must be one of {DESIGN_REGS}, got {params.design_reg!r}")
    if not (isinstance(params.refit_growth, (int, float)) and params.refit_growth >= 0):
        raise ValueError(f"refit_growth must be a number ≥ 0, got {params.refit_growth!r}")
    if int(params.newton_max_iter) < 1:
        raise ValueError(f"newton_max_iter must be ≥ 1, got {params.newton_max_iter!r}")


def _positive_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 and math.isfinite(value)


def LogisticEstimator(n_servers: int, dim: int, capacity: int, params):
    """The K per-server estimators of one CQB policy (cqb.sim._estimator.Estimator,
    whose docstring gives the schedule), from a resolved EstimatorParams."""
    check_estimator_params(params)
    return core().Estimator(n_servers, dim, capacity, params)


class Projected(NamedTuple):
    """A Filippi projection: θ, whether it is a certified KKT point (the
    core's PROJECTION_KKT_TOL), the solver's steps and its last KKT residual."""

    theta: np.ndarray
    converged: bool
    steps: int
    kkt_residual: float


def filippi_projection(X, mle, design_inv, reg, bound, start, max_iter: int | None = None) -> Projected:
    """argmin over ‖θ‖ ≤ S of ‖g(θ) − g(θ̂)‖ in the V⁻¹ norm, g(θ) = Σ μ(x_iᵀθ)x_i + λ₀θ,
    from ``start`` (inside the ball), in at most ``max_iter`` solver steps
    (None: PROJECTION_MAX_ITER) (cqb.sim._projection.filippi_solve).

    The regularised score equation makes g(θ̂) = Σ y_i x_i, so the projected
    estimate matches the data's moments as well as the ball allows. A bad
    λ₀, S or start is one ValueError naming the value."""
    the_core = core()
    steps = the_core.PROJECTION_MAX_ITER if max_iter is None else max_iter
    return Projected(*the_core.filippi_projection(X, mle, design_inv, reg, bound, start, steps))
