"""Per-server regularised logistic MLE with the confidence bonus of SPEC §2.

Every server k keeps its own data (x_i, D(i)) in preallocated arrays, the MLE
θ̂_k (updated by warm-started Newton steps), its projection θ_k onto
{‖θ‖ ≤ S_k} (S_k = S for every server unless a bound per server is given), the design matrix V_k = κλ₀I + Σ x_i x_iᵀ and its inverse, kept by
Sherman–Morrison updates. Only the served server changes in a round.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

PROJECTIONS = ("filippi", "euclidean")


def logistic(z):
    """μ(z) = 1/(1 + e^(−z)), computed as (1 + tanh(z/2))/2: stable for any z, and
    plain numpy, so a simulation job need not import scipy (≈ 0.3 s per job)."""
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(z, dtype=np.float64)))

DESIGN_REGS = ("kappa", "plain")
# "compiled": the per-round work in C (cqb/sim/_kernel.c); "numpy": the reference
# implementation in numpy, which the tests compare it with every round
KERNELS = ("compiled", "numpy")


@dataclass(frozen=True)
class EstimatorConfig:
    reg: float = 1.0  # λ₀: the MLE minimises NLL + (λ₀/2)‖θ‖²
    kappa: float = 10.0  # κ in V's ridge and in β
    delta: float = 0.01  # confidence level of β (the policies pass 1/T)
    # S (the policies pass the instance's bound), or one S_k per server: a tuple
    # of K values, used in server k's β_k and projection radius
    norm_bound: float | tuple[float, ...] = 1.0
    projection: str = "filippi"
    design_reg: str = "kappa"  # V's ridge: κλ₀I ("kappa") or λ₀I ("plain")
    newton_tol: float = 1e-6  # a refit stops once a Newton step is shorter than this
    newton_max_iter: int = 25
    refit_growth: float = 0.2  # exact refit when the sample count grew by this factor
    refit_min_samples: int = 10  # exact refit at every sample below this count
    kernel: str = "compiled"  # KERNELS: same arithmetic, rounding apart (docs/benchmarks.md)

    def __post_init__(self):
        for name in ("reg", "kappa", "norm_bound", "newton_tol"):
            value = getattr(self, name)
            if name == "norm_bound" and isinstance(value, tuple) and value:
                if all(_positive_number(bound) for bound in value):
                    continue
                raise ValueError(f"norm_bound per server must be positive numbers, got {value!r}")
            if not _positive_number(value):
                raise ValueError(f"{name} must be a positive number, got {value!r}")
        if not 0 < self.delta < 1:
            raise ValueError(f"delta must lie in (0, 1), got {self.delta!r}")
        if self.projection not in PROJECTIONS:
            raise ValueError(f"projection must be one of {PROJECTIONS}, got {self.projection!r}")
        if self.design_reg not in DESIGN_REGS:
            raise ValueError(f"design_reg must be one of {DESIGN_REGS}, got {self.design_reg!r}")
        if not (isinstance(self.refit_growth, (int, float)) and self.refit_growth >= 0):
            raise ValueError(f"refit_growth must be a number ≥ 0, got {self.refit_growth!r}")
        if self.kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {KERNELS}, got {self.kernel!r}")
        if int(self.newton_max_iter) < 1:
            raise ValueError(f"newton_max_iter must be ≥ 1, got {self.newton_max_iter!r}")


def _positive_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 and math.isfinite(value)


def server_norm_bounds(config: EstimatorConfig, n_servers: int) -> list:
    """S_k of every server: the shared S repeated, or the per-server tuple."""
    if not isinstance(config.norm_bound, tuple):
        return [config.norm_bound] * n_servers
    if len(config.norm_bound) != n_servers:
        raise ValueError(f"norm_bound per server needs {n_servers} values (one per server), "
                         f"got {len(config.norm_bound)}")
    return list(config.norm_bound)


def fit_logistic(X: np.ndarray, y: np.ndarray, reg: float, theta0: np.ndarray | None = None,
                 tol: float = 1e-10, max_iter: int = 100) -> np.ndarray:
    """Minimiser of Σ log-loss + (reg/2)‖θ‖² by Newton's method (no intercept)."""
    theta = np.zeros(X.shape[1]) if theta0 is None else np.array(theta0, dtype=np.float64)
    for _ in range(max_iter):
        step = _newton_step(X, y, theta, reg)
        theta -= step
        if np.abs(step).max() < tol:
            break
    return theta


def _newton_step(X, y, theta, reg):
    prob = logistic(X @ theta)
    gradient = X.T @ (prob - y) + reg * theta
    hessian = (X.T * (prob * (1.0 - prob))) @ X
    hessian.flat[:: hessian.shape[0] + 1] += reg
    # The ridge keeps the Hessian positive definite even for separable data.
    return np.linalg.solve(hessian, gradient)


def confidence_width(config: EstimatorConfig, dim: int, n_servers: int, n_samples) -> np.ndarray:
    """β_k = (κ/2)√(2d log(1 + N_k/(κλ₀d)) + log(K/δ)) + κS_k√λ₀/2 (SPEC §2; S_k = S
    for a shared bound)."""
    kappa, reg = config.kappa, config.reg
    inner = 2 * dim * np.log1p(np.asarray(n_samples, dtype=np.float64) / (kappa * reg * dim))
    inner = inner + math.log(n_servers / config.delta)
    bound = config.norm_bound
    if isinstance(bound, tuple):
        bound = np.asarray(server_norm_bounds(config, n_servers), dtype=np.float64)
    return 0.5 * kappa * np.sqrt(inner) + 0.5 * kappa * bound * math.sqrt(reg)


class LogisticEstimator:
    """The K per-server estimators of one CQB policy.

    The MLE is refitted exactly (warm-started Newton on the server's data) on
    a geometric schedule: whenever the server's sample count has grown by the
    factor ``1 + refit_growth`` since its last refit, and at every sample while
    it has fewer than ``refit_min_samples``. In between, each new sample moves
    θ̂ by one Newton step on a quadratic model of the old data (an online
    Newton step with the Hessian of the last refit, kept inverted by
    Sherman–Morrison). Per round this is O(d²) amortised; ``refit_growth = 0``
    refits exactly at every sample.
    """

    def __init__(self, n_servers: int, dim: int, capacity: int, config: EstimatorConfig):
        self.config = config
        self.n_servers, self.dim = n_servers, dim
        self.features = np.zeros((n_servers, capacity, dim))
        self.outcomes = np.zeros((n_servers, capacity))
        self.counts = np.zeros(n_servers, dtype=np.int64)
        self.mle = np.zeros((n_servers, dim))  # θ̂_k, also the warm start of the next refit
        self.theta = np.zeros((n_servers, dim))  # projected estimate used by the policies
        self.ridge = config.kappa * config.reg if config.design_reg == "kappa" else config.reg
        # inverses[k, 0] = V_k⁻¹, inverses[k, 1] = H_k⁻¹ (Hessian of the last refit plus
        # the samples since); stacked so one call updates both.
        self.inverses = np.empty((n_servers, 2, dim, dim))
        self.inverses[:, 0] = np.eye(dim) / self.ridge
        self.inverses[:, 1] = np.eye(dim) / config.reg
        self.design_inv = self.inverses[:, 0]  # a view: V_k⁻¹ for the policies' widths
        self.next_refit = np.ones(n_servers, dtype=np.int64)
        # S_k per server (a list: indexed every round, cheaper than numpy)
        self.norm_bounds = server_norm_bounds(config, n_servers)
        self.widths = confidence_width(config, dim, n_servers, self.counts)
        self.refits = 0
        self.projections = 0  # how often the projection was active (diagnostic)
        self.core = _compiled_core(self) if config.kernel == "compiled" else None

    def design(self, server: int) -> np.ndarray:
        """V_k, rebuilt from the data (the estimator itself keeps only V_k⁻¹)."""
        X = self.features[server, :self.counts[server]]
        return self.ridge * np.eye(self.dim) + X.T @ X

    def update(self, server: int, x: np.ndarray, outcome: float) -> None:
        if self.core is not None:
            x = np.ascontiguousarray(x, dtype=np.float64)
            self.finish_compiled_update(server, self.core.update(server, x, float(outcome)))
            return
        n = int(self.counts[server]) + 1
        self.features[server, n - 1] = x
        self.outcomes[server, n - 1] = outcome
        self.counts[server] = n
        if n >= self.next_refit[server]:
            self._refit(server)  # rebuilds V⁻¹ and H⁻¹ from the data, this sample included
            growth = math.ceil(n * self.config.refit_growth)
            self.next_refit[server] = n + 1 if n < self.config.refit_min_samples else n + max(growth, 1)
        else:
            theta = self.mle[server]
            exponent = -(x @ theta)
            # e^709.8 overflows a float; μ is then 0 to double precision
            prob = 1.0 / (1.0 + math.exp(exponent)) if exponent < 709.0 else 0.0
            hx = self._rank_one(server, x, prob * (1.0 - prob))
            # One Newton step on (quadratic model of the old data) + new sample.
            theta -= (prob - outcome) * hx
        mle = self.mle[server]
        norm = math.sqrt(mle @ mle)
        bound = self.norm_bounds[server]
        if norm > bound:
            self.theta[server] = self._project(server, mle, norm, bound)
        else:
            self.theta[server] = mle
        self.widths[server] = _width(self.config, self.dim, self.n_servers, n, bound)

    def finish_compiled_update(self, server: int, flags: int) -> None:
        """What the compiled update leaves to Python: counting the refit, and the
        projection when the MLE left the ball (scipy's SLSQP for Filippi's)."""
        if flags & _REFITTED:
            self.refits += 1
        if flags & _OUTSIDE_BALL:
            mle = self.mle[server]
            self.theta[server] = self._project(server, mle, math.sqrt(mle @ mle), self.norm_bounds[server])

    def _rank_one(self, server, x, weight):
        """Sherman–Morrison on V⁻¹ (weight 1) and, when ``weight`` > 0, on the
        Hessian inverse H⁻¹ (weight μ̇), in one stacked operation; returns the
        updated H⁻¹x. With u = M x/√(1/w + xᵀMx), outer(u, u) is exactly
        symmetric, so both inverses stay symmetric in floating point."""
        inverses = self.inverses[server]
        mx = inverses @ x
        if weight > 0.0:
            quad = mx @ x
            u = mx * np.array([[1.0 / math.sqrt(1.0 + quad[0])],
                               [1.0 / math.sqrt(1.0 / weight + quad[1])]])
            inverses -= u[:, :, None] * u[:, None, :]
            return inverses[1] @ x
        # μ̇ = 0 (μ(xᵀθ̂) rounds to 0 or 1): H gains nothing, V⁻¹ its rank one
        u = mx[0] / math.sqrt(1.0 + mx[0] @ x)
        inverses[0] -= np.multiply.outer(u, u)
        return inverses[1] @ x

    def _refit(self, server):
        n = self.counts[server]
        X, y = self.features[server, :n], self.outcomes[server, :n]
        theta = self.mle[server].copy()
        for _ in range(self.config.newton_max_iter):
            step = _newton_step(X, y, theta, self.config.reg)
            theta -= step
            # A short step means the next one would be quadratically shorter.
            if np.abs(step).max() < self.config.newton_tol:
                break
        self.mle[server] = theta
        prob = logistic(X @ theta)
        hessian = (X.T * (prob * (1.0 - prob))) @ X
        hessian.flat[:: self.dim + 1] += self.config.reg
        self.inverses[server, 1] = _symmetric_inverse(hessian)
        self.inverses[server, 0] = _symmetric_inverse(self.design(server))
        self.refits += 1

    def _project(self, server, mle, norm, bound):
        self.projections += 1
        radial = mle * (bound / norm)
        if self.config.projection == "euclidean":
            return radial
        # the numpy kernel, the reference, runs the numpy objective too
        return filippi_projection(self.features[server, :self.counts[server]], mle,
                                  self.design_inv[server], self.config.reg, bound, radial,
                                  compiled=self.core is not None)

    def width_column(self, server: int, contexts: np.ndarray) -> np.ndarray:
        """‖x‖_{V_k⁻¹} for every row x of ``contexts``."""
        return np.sqrt(((contexts @ self.design_inv[server]) * contexts).sum(axis=1))

    def mean_column(self, server: int, contexts: np.ndarray) -> np.ndarray:
        return logistic(contexts @ self.theta[server])


_REFITTED, _OUTSIDE_BALL = 1, 2  # the flags of cqb.sim._kernel.Core.update


def compiled_kernel():
    """The module cqb.sim._kernel, checked to be built from the _kernel.c beside it
    (the file the code hash covers): a stale build would run other code than
    the runs record."""
    global _KERNEL
    if _KERNEL is None:
        try:
            from . import _kernel
        except ImportError as error:  # a source checkout that was never installed
            raise ImportError("cqb.sim._kernel is not built: run `pip install -e .` (needs a C compiler), "
                              "or use the policy parameter kernel: numpy") from error
        import hashlib
        from pathlib import Path

        source = Path(__file__).with_name("_kernel.c")
        if getattr(_kernel, "SOURCE_HASH", None) != hashlib.sha256(source.read_bytes()).hexdigest():
            raise ImportError(f"cqb.sim._kernel was built from another version of {source}: "
                              "rebuild it with `pip install -e .`")
        _KERNEL = _kernel
    return _KERNEL


_KERNEL = None


def _compiled_core(estimator: LogisticEstimator):
    _kernel = compiled_kernel()
    config = estimator.config
    estimator.norm_bound_array = np.asarray(estimator.norm_bounds, dtype=np.float64)
    return _kernel.Core(estimator.features, estimator.outcomes, estimator.counts, estimator.mle,
                        estimator.theta, estimator.inverses, estimator.next_refit, estimator.widths,
                        estimator.norm_bound_array, float(config.reg), float(config.kappa),
                        float(config.delta), float(estimator.ridge), float(config.newton_tol),
                        int(config.newton_max_iter), float(config.refit_growth),
                        int(config.refit_min_samples))


def _width(config, dim, n_servers, n_samples, norm_bound) -> float:
    # Scalar twin of confidence_width for one server with bound S_k: this runs
    # every round, numpy's call overhead would dominate.
    inner = 2 * dim * math.log1p(n_samples / (config.kappa * config.reg * dim))
    inner += math.log(n_servers / config.delta)
    return 0.5 * config.kappa * (math.sqrt(inner) + norm_bound * math.sqrt(config.reg))


def _symmetric_inverse(matrix):
    inverse = np.linalg.inv(matrix)
    return 0.5 * (inverse + inverse.T)


def filippi_projection(X, mle, design_inv, reg, bound, start, compiled=True):
    """argmin over ‖θ‖ ≤ S of ‖g(θ) − g(θ̂)‖ in the V⁻¹ norm, g(θ) = Σ μ(x_iᵀθ)x_i + λ₀θ.

    The regularised score equation makes g(θ̂) = Σ y_i x_i, so the projected
    estimate matches the data's moments as well as the ball allows.

    ``compiled``: solve with the compiled loop (cqb.sim._kernel.filippi_slsqp)
    where it applies (compiled_projection); the numpy objective below is its
    reference, and the two give the same iterate to the bit.
    """
    solver = compiled_projection(X) if compiled else None
    if solver is not None:
        theta = solver(X, mle, design_inv, reg, bound, start)
    else:
        target = X.T @ logistic(X @ mle) + reg * mle
        ridge = reg * np.eye(X.shape[1])

        def objective(theta):
            prob = logistic(X @ theta)
            residual = X.T @ prob + reg * theta - target
            weighted = design_inv @ residual
            jacobian = (X.T * (prob * (1 - prob))) @ X + ridge
            return float(residual @ weighted), 2.0 * jacobian @ weighted

        theta = slsqp_in_ball(objective, start, bound, SLSQP_MAX_ITER, SLSQP_FTOL)
    return _onto_ball(theta, bound)


def _onto_ball(theta, bound):
    # SLSQP may overshoot the constraint by rounding; pull back onto the ball.
    norm = np.linalg.norm(theta)
    return theta * (bound / norm) if norm > bound else theta


SLSQP_MAX_ITER, SLSQP_FTOL = 200, 1e-12
# The SciPy releases whose minimize(method="SLSQP") is the loop of
# _slsqp_loop below, call for call (checked by tests/test_sim_estimation.py).
LEAN_SLSQP_SCIPY = ("1.17.",)


def slsqp_in_ball(objective, start, bound, max_iter, ftol):
    """argmin of ``objective`` (θ ↦ (f, ∇f)) over ‖θ‖² ≤ bound², by SciPy's
    SLSQP from ``start``: the result of ``scipy.optimize.minimize(objective,
    start, jac=True, method="SLSQP", constraints=[{"type": "ineq", "fun":
    bound² − θᵀθ, "jac": −2θ}], options={"maxiter": max_iter, "ftol": ftol})``.

    A projection is a few dozen solver steps on d ≤ a few hundred variables,
    and minimize's own set-up and per-step wrappers cost more than the steps
    (about half of a CQB run at T = 5000). On the SciPy releases in
    LEAN_SLSQP_SCIPY the solver's routine is driven directly, with the same
    arguments in the same order, so the iterates are the same to the bit; on
    any other release minimize itself runs."""
    import scipy

    if scipy.__version__.startswith(LEAN_SLSQP_SCIPY):
        return _slsqp_loop(objective, start, bound, max_iter, ftol)
    from scipy.optimize import minimize  # rarely needed: imported on first use

    result = minimize(objective, start, jac=True, method="SLSQP",
                      constraints=[{"type": "ineq", "fun": lambda th: bound ** 2 - th @ th,
                                    "jac": lambda th: -2.0 * th}],
                      options={"maxiter": max_iter, "ftol": ftol})
    return result.x


def _slsqp_loop(objective, start, bound, max_iter, ftol):
    """scipy.optimize._slsqp_py._minimize_slsqp (SciPy 1.17) for one inequality
    constraint, no bounds and no callback: its state, work arrays and calls of
    the compiled routine, with each objective evaluated once per point (as
    SciPy's memoisation does)."""
    from scipy.optimize._slsqplib import slsqp

    x = np.array(start, dtype=np.float64).reshape(-1)
    state, mult, lower, upper, normals, slack, buffer, indices = _slsqp_workspace(x.shape[0], max_iter, ftol)
    squared_bound = bound ** 2
    evaluated_at = x.copy()
    value, gradient = objective(x.copy())
    gradient = np.atleast_1d(gradient)
    normals[0] = -2.0 * x
    slack[0] = squared_bound - x @ x
    while True:
        slsqp(state, value, gradient, normals, slack, x, mult, lower, upper, buffer, indices)
        mode = state["mode"]
        # np.array_equal's checks cost more than the comparison; shapes are fixed here
        if mode in (1, -1) and not (x == evaluated_at).all():
            evaluated_at = x.copy()
            value, gradient = objective(x.copy())
            gradient = np.atleast_1d(gradient)
        if mode == 1:
            slack[0] = squared_bound - x @ x
        elif mode == -1:
            normals[0] = -2.0 * x
        else:
            return x


def _slsqp_workspace(n, max_iter, ftol):
    """The state and work arrays of SciPy 1.17's _minimize_slsqp for n variables
    and one inequality constraint, as it sets them up."""
    m = 1
    state = {"acc": ftol, "alpha": 0.0, "f0": 0.0, "gs": 0.0, "h1": 0.0, "h2": 0.0, "h3": 0.0,
             "h4": 0.0, "t": 0.0, "t0": 0.0, "tol": 10.0 * ftol, "exact": 0, "inconsistent": 0,
             "reset": 0, "iter": 0, "itermax": int(max_iter), "line": 0, "m": m, "meq": 0,
             "mode": 0, "n": n}
    indices = np.zeros(m + 2 * n + 2, dtype=np.int32)
    buffer = np.zeros(n * (n + 1) // 2 + 3 * m * n + 9 * m + 8 * n * n + 35 * n + 28, dtype=np.float64)
    mult = np.zeros(m + 2 * n + 2, dtype=np.float64)
    lower = np.full(n, np.nan)
    upper = np.full(n, np.nan)
    normals = np.zeros((m, n), dtype=np.float64, order="F")
    slack = np.zeros(m, dtype=np.float64)
    return state, mult, lower, upper, normals, slack, buffer, indices


def compiled_projection(X):
    """The compiled Filippi projection for the samples X, or None where the
    Python loop runs: another SciPy than LEAN_SLSQP_SCIPY, fewer than 2 samples
    or dimensions (numpy's matmul takes other routes there), no compiled
    kernel, or a numpy whose BLAS the kernel cannot call (not the ILP64
    scipy-openblas of numpy's wheels, or one that failed the check in
    _load_compiled_projection)."""
    if X.shape[0] < 2 or X.shape[1] < 2 or not X.flags.c_contiguous:
        return None
    global _COMPILED_PROJECTION
    if _COMPILED_PROJECTION is None:
        _COMPILED_PROJECTION = _load_compiled_projection() or False
    return _COMPILED_PROJECTION or None


_COMPILED_PROJECTION = None
# numpy's wheels bundle OpenBLAS as scipy-openblas64: these symbols, 64-bit integers
NUMPY_BLAS_SYMBOLS = ("scipy_cblas_dgemv64_", "scipy_cblas_dgemm64_", "scipy_cblas_ddot64_")


def _load_compiled_projection():
    import glob
    import os

    import scipy

    if not scipy.__version__.startswith(LEAN_SLSQP_SCIPY):
        return None
    try:
        kernel = compiled_kernel()
    except ImportError:
        return None
    libraries = sorted(glob.glob(os.path.join(os.path.dirname(os.path.dirname(np.__file__)),
                                              "numpy.libs", "libscipy_openblas64_*.so*")))
    if not any(kernel.load_blas(path, *NUMPY_BLAS_SYMBOLS) for path in libraries):
        return None
    from scipy.optimize._slsqplib import slsqp

    def solve(X, mle, design_inv, reg, bound, start):
        x = np.array(start, dtype=np.float64).reshape(-1)
        state, mult, lower, upper, normals, slack, buffer, indices = _slsqp_workspace(
            x.shape[0], SLSQP_MAX_ITER, SLSQP_FTOL)
        gradient = np.empty_like(x)
        work = np.empty(X.shape[0])
        return kernel.filippi_slsqp(slsqp, np.tanh, X, np.ascontiguousarray(mle, dtype=np.float64),
                                    np.ascontiguousarray(design_inv, dtype=np.float64), float(reg),
                                    float(bound ** 2), state, x, gradient, normals, slack, mult, lower,
                                    upper, buffer, indices, work)

    # The BLAS numpy loaded, its own tanh, SciPy's routine: the same iterate as
    # the numpy objective, checked once per process on a projection that moves.
    check = np.random.default_rng(20261201)
    X = check.standard_normal((12, 4))
    mle = 3.0 * check.standard_normal(4)
    design_inv = np.linalg.inv(X.T @ X + np.eye(4))
    bound = 0.5 * float(np.linalg.norm(mle))
    start = mle * (bound / np.linalg.norm(mle))
    expected = filippi_projection(X, mle, design_inv, 1.0, bound, start, compiled=False)
    if not np.array_equal(_onto_ball(solve(X, mle, design_inv, 1.0, bound, start), bound), expected):
        return None
    return solve

