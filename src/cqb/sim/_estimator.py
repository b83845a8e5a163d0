"""The K per-server logistic estimators of one CQB policy (:class:`Estimator`,
declared in _estimator.pxd): exact Newton refits, online Newton steps with
Sherman–Morrison updates of V⁻¹ and H⁻¹, the widths β_k, the projection."""

import cython
import numpy as np

if cython.compiled:
    from cython.cimports.cqb.sim._algebra import (DenseAlgebra, at, dot, index_at, index_from, logistic,
                                                  logistic_slope, newton_pass, row_dot, row_support)
    from cython.cimports.cqb.sim._projection import Projection, filippi_solve
    from cython.cimports.libc.math import ceil, fabs, log, log1p, sqrt

    from ._algebra import dense_algebra  # a Python function: imported, not cimported
else:
    from math import ceil, fabs, log, log1p, sqrt

    from ._algebra import (DenseAlgebra, at, dense_algebra, dot, index_at, index_from, logistic, logistic_slope,
                           newton_pass, row_dot, row_support)
    from ._projection import Projection, filippi_solve
from ._projection import PROJECTION_MAX_ITER  # a Python constant, in both modes


@cython.cclass
class Estimator:
    """The K per-server estimators of one CQB policy (docs/model.md#the-per-server-logistic-estimator).

    The MLE is refitted exactly (warm-started Newton on the server's data)
    whenever the server's sample count has grown by the factor
    1 + refit_growth since its last refit, and at every sample below
    refit_min_samples. In between, each new sample moves θ̂ by one Newton step
    on a quadratic model of the old data (the Hessian of the last refit plus
    the samples since, kept inverted by Sherman–Morrison). ``params`` is read
    by name: reg (λ₀), kappa, delta, norm_bound (S, or one S_k per server),
    projection, design_reg, newton_tol, newton_max_iter, refit_growth,
    refit_min_samples (the policy dataclass EstimatorParams, resolved).
    """

    def __init__(self, n_servers: cython.Py_ssize_t, dim: cython.Py_ssize_t, capacity: cython.Py_ssize_t, params,
                 algebra: DenseAlgebra = None):
        d: cython.Py_ssize_t = dim
        self.params = params
        self.n_servers, self.dim, self.capacity = n_servers, dim, capacity
        self.reg = params.reg
        self.kappa = params.kappa
        self.delta = params.delta
        self.newton_tol = params.newton_tol
        self.newton_max_iter = params.newton_max_iter
        self.refit_growth = params.refit_growth
        self.refit_min_samples = params.refit_min_samples
        self.filippi = params.projection == "filippi"
        self.ridge = params.kappa * params.reg if params.design_reg == "kappa" else params.reg
        bound = params.norm_bound
        bounds = list(bound) if isinstance(bound, tuple) else [bound] * n_servers
        if len(bounds) != n_servers:
            raise ValueError(f"norm_bound per server needs {n_servers} values (one per server), got {len(bounds)}")
        self.norm_bounds = np.array(bounds, dtype=np.float64)
        self.features = np.zeros((n_servers, capacity, d))
        self.outcomes = np.zeros((n_servers, capacity))
        self.counts = np.zeros(n_servers, dtype=np.int64)
        self.mle = np.zeros((n_servers, d))
        self.theta = np.zeros((n_servers, d))
        self.inverses = np.empty((n_servers, 2, d, d))
        self.inverses[:, 0] = np.eye(d) / self.ridge
        self.inverses[:, 1] = np.eye(d) / self.reg
        self.design_inv = self.inverses[:, 0]
        self.next_refit = np.ones(n_servers, dtype=np.int64)
        self.widths = np.zeros(n_servers)
        self._x = self.features.reshape(-1)
        self._y = self.outcomes.reshape(-1)
        self._n = self.counts
        self._mle = self.mle.reshape(-1)
        self._theta = self.theta.reshape(-1)
        self._inv = self.inverses.reshape(-1)
        self._next = self.next_refit
        self._widths = self.widths
        self._bounds = self.norm_bounds
        self._grad, self._u, self._uh, self._hx = np.zeros(d), np.zeros(d), np.zeros(d), np.zeros(d)
        self._h, self._l, self._y_inv = np.zeros(d * d), np.zeros(d * d), np.zeros(d * d)
        self._w = np.zeros(max(capacity, 1))
        self._index = np.zeros(d, dtype=np.intp)
        # each stored row's non-zero columns, found once when it is stored (the refits pass over it often)
        self._support = np.zeros(max(n_servers * capacity * d, 1), dtype=np.intp)
        self._support_len = np.zeros(max(n_servers * capacity, 1), dtype=np.intp)
        self._projection = Projection(d, capacity)
        self._algebra = dense_algebra(d) if algebra is None else algebra  # tests pass the loops at any d
        self._gram = np.zeros(max(capacity, 1) * d if self._algebra.batches_gram else 1)
        self._versions = np.zeros(n_servers, dtype=np.int64)
        self._last_u = np.zeros(n_servers * d)
        self.refits = 0
        self.projections = 0
        self.projection_steps = 0
        self.projection_unconverged = 0
        self.projection_max_iter = PROJECTION_MAX_ITER
        self._projected = np.zeros(n_servers, dtype=np.int64)
        k: cython.Py_ssize_t
        for k in range(n_servers):
            self._widths[k] = self.width(0, self._bounds[k])

    @cython.ccall
    @cython.exceptval(check=False)
    def width(self, n_samples: cython.longlong, bound: cython.double) -> cython.double:
        """β_k = (κ/2)√(2d log(1 + N_k/(κλ₀d)) + log(K/δ)) + κS_k√λ₀/2."""
        inner: cython.double = (2.0 * self.dim) * log1p(n_samples / (self.kappa * self.reg * self.dim))
        inner += log(self.n_servers / self.delta)
        return 0.5 * self.kappa * (sqrt(inner) + bound * sqrt(self.reg))

    def update(self, server: cython.Py_ssize_t, x, outcome: cython.double) -> cython.bint:
        """Add the sample (x, outcome) to ``server``; True if it refitted."""
        if not 0 <= server < self.n_servers:
            raise IndexError(f"server {server} out of range (K = {self.n_servers})")
        return self.add(server, np.array(x, dtype=np.float64).reshape(self.dim), 0, outcome)

    @cython.cfunc
    def add(self, k: cython.Py_ssize_t, xs: cython.double[::1], xo: cython.Py_ssize_t,
            outcome: cython.double) -> cython.bint:
        """Store the sample x = xs[xo:xo + d] of server k, then refit or take the
        online Newton step, project, and set β_k."""
        d: cython.Py_ssize_t = self.dim
        a: cython.Py_ssize_t
        n: cython.longlong = self._n[k] + 1
        growth: cython.longlong
        if n > self.capacity:
            raise IndexError(f"server {k} has room for {self.capacity} samples")
        slot: cython.Py_ssize_t = k * self.capacity + n - 1
        base: cython.Py_ssize_t = slot * d
        for a in range(d):
            self._x[base + a] = xs[xo + a]
        self._y[slot] = outcome
        self._support_len[slot] = row_support(at(self._x), base, d, index_from(self._support, slot * d))
        self._n[k] = n
        refitted: cython.bint = n >= self._next[k]
        if refitted:
            self.rank_one(k, xs, xo, slot, 0.0)  # V⁻¹ only: the refit rebuilds H⁻¹
            self.refit(k)
            growth = cython.cast(cython.longlong, ceil(n * self.refit_growth))
            self._next[k] = n + 1 if n < self.refit_min_samples else n + max(growth, 1)
        else:
            # one Newton step on (quadratic model of the old data) + the new sample
            prob: cython.double = logistic(dot(at(xs), xo, at(self._mle), k * d, d))
            self.rank_one(k, xs, xo, slot, logistic_slope(prob))
            for a in range(d):
                self._mle[k * d + a] -= (prob - outcome) * self._hx[a]
        bound: cython.double = self._bounds[k]
        norm: cython.double = sqrt(dot(at(self._mle), k * d, at(self._mle), k * d, d))
        if norm > bound:
            self.project(k, norm, bound)
        else:  # θ̂ is the minimiser of either projection's objective
            for a in range(d):
                self._theta[k * d + a] = self._mle[k * d + a]
            self._projected[k] = 0
        self._widths[k] = self.width(n, bound)
        return refitted

    @cython.cfunc
    def refit(self, k: cython.Py_ssize_t) -> cython.void:
        """Warm-started Newton on server k's data to newton_tol, then H⁻¹ rebuilt
        from the data at the new θ̂ (V⁻¹ needs no rebuild: V only grows, and
        its Sherman–Morrison updates are exact up to rounding)."""
        d: cython.Py_ssize_t = self.dim
        n: cython.Py_ssize_t = self._n[k]
        xo: cython.Py_ssize_t = k * self.capacity * d
        yo: cython.Py_ssize_t = k * self.capacity
        to: cython.Py_ssize_t = k * d
        vo: cython.Py_ssize_t = k * 2 * d * d
        i: cython.Py_ssize_t
        a: cython.Py_ssize_t
        it: cython.Py_ssize_t
        p: cython.double
        r: cython.double
        longest: cython.double
        for it in range(self.newton_max_iter):
            newton_pass(self._x, xo, self._y, yo, n, d, self._mle, to, self.reg, self._grad, True, self._h,
                        self._support, self._support_len, yo, self._algebra, self._gram)
            if not self._algebra.factor(self._h, self._l, d):
                raise ArithmeticError(f"server {k}'s Hessian is not positive definite")
            self._algebra.solve(self._l, self._grad, d)  # the Newton step
            longest = 0.0
            for a in range(d):
                self._mle[to + a] -= self._grad[a]
                longest = max(longest, fabs(self._grad[a]))
            if longest < self.newton_tol:  # the next step would be quadratically shorter
                break
        newton_pass(self._x, xo, self._y, yo, n, d, self._mle, to, self.reg, self._grad, False, self._h,
                    self._support, self._support_len, yo, self._algebra, self._gram)
        if not self._algebra.inverse(self._h, self._inv, vo + d * d, self._l, self._y_inv, d):
            raise ArithmeticError(f"server {k}'s Hessian is not positive definite")
        self.refits += 1

    @cython.cfunc
    def rank_one(self, k: cython.Py_ssize_t, xs: cython.double[::1], xo: cython.Py_ssize_t,
                 slot: cython.Py_ssize_t, weight: cython.double) -> cython.void:
        """Sherman–Morrison on V⁻¹ (weight 1) and, when weight > 0, on H⁻¹
        (weight μ̇) for the sample x just stored at ``slot`` (its support read
        from there); leaves H⁻¹x in _hx. With u = Mx/√(1/w + xᵀMx), outer(u, u)
        is exactly symmetric, so both inverses stay symmetric."""
        d: cython.Py_ssize_t = self.dim
        vo: cython.Py_ssize_t = k * 2 * d * d
        ho: cython.Py_ssize_t = vo + d * d
        a: cython.Py_ssize_t
        b: cython.Py_ssize_t
        m: cython.Py_ssize_t = self._support_len[slot]
        for a in range(m):
            self._index[a] = self._support[slot * d + a]
        algebra: DenseAlgebra = self._algebra
        algebra.matvec(self._inv, vo, xs, xo, self._u, d, self._index, m)
        scale: cython.double = 1.0 / sqrt(1.0 + row_dot(at(self._u), 0, at(xs), xo, d, index_at(self._index), m))
        if weight > 0.0:
            algebra.matvec(self._inv, ho, xs, xo, self._uh, d, self._index, m)
            scale_h: cython.double = 1.0 / sqrt(1.0 / weight
                                                + row_dot(at(self._uh), 0, at(xs), xo, d, index_at(self._index), m))
            for a in range(d):
                self._uh[a] *= scale_h
            algebra.subtract_outer(self._inv, ho, self._uh, d)
        for a in range(d):
            self._u[a] *= scale
            self._last_u[k * d + a] = self._u[a]
        algebra.subtract_outer(self._inv, vo, self._u, d)
        self._versions[k] += 1
        algebra.matvec(self._inv, ho, xs, xo, self._hx, d, self._index, m)

    @cython.cfunc
    def project(self, k: cython.Py_ssize_t, norm: cython.double, bound: cython.double) -> cython.void:
        """θ_k for θ̂_k outside the ball: the radial projection of θ̂_k, or
        (Filippi) the solver from the last update's solution when that update
        was projected too (one sample moves the problem little: a step or two
        from there), else from the radial projection."""
        d: cython.Py_ssize_t = self.dim
        a: cython.Py_ssize_t
        self.projections += 1
        if not (self.filippi and self._projected[k]):
            for a in range(d):
                self._theta[k * d + a] = self._mle[k * d + a] * (bound / norm)
        if self.filippi:
            if not filippi_solve(self._projection, self._x, k * self.capacity * d, self._n[k], self._mle, k * d,
                                 self._inv, k * 2 * d * d, self.reg, bound, self._theta, k * d,
                                 self.projection_max_iter):
                self.projection_unconverged += 1
            self.projection_steps += self._projection.steps
        self._projected[k] = 1

    def design(self, server: int):
        """V_k, rebuilt from the data (the estimator itself keeps only V_k⁻¹)."""
        X = self.features[server, :self.counts[server]]
        return self.ridge * np.eye(self.dim) + X.T @ X
