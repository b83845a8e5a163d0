"""Filippi et al.'s projection onto the ball ‖θ‖ ≤ S: :func:`filippi_solve`
and its work space :class:`Projection` (both declared in _projection.pxd, for
the estimator), and :func:`filippi_projection` on numpy arrays."""

import cython
import numpy as np

if cython.compiled:
    from cython.cimports.cqb.sim._algebra import (add_gram_row, cholesky, cholesky_solve, dot, logistic,
                                                  logistic_slope, mirror_upper, nonzeros, sparse_dot)
    from cython.cimports.libc.math import INFINITY, fabs, sqrt
else:
    from math import fabs, sqrt
    from math import inf as INFINITY

    from ._algebra import (add_gram_row, cholesky, cholesky_solve, dot, logistic, logistic_slope, mirror_upper,
                           nonzeros, sparse_dot)

# Newton (or Gauss-Newton) steps on the ball-constrained problem stop when a
# step moves θ by less than PROJECTION_STEP_TOL (relative), or a full Newton
# step by less than NEWTON_STEP_TOL (the next one would be quadratically
# shorter, ~1e-14), or after so many.
PROJECTION_STEP_TOL = 1e-13
NEWTON_STEP_TOL = 1e-7
PROJECTION_MAX_ITER = 100
# A trial point is accepted if f does not rise above its rounding, ~this × ‖V⁻¹r‖‖g(θ̂)‖.
PROJECTION_NOISE = 1e-13
# The multiplier ν of a step: the secular-equation search stops after so many
# steps (each at least bisects its bracket: 60 reach double precision), and
# accepts ‖z(ν)‖ = S to BALL_RTOL relative (a few hundred ulps: ‖z‖ is not known
# better). A ν with H + νI not positive definite grows by at least
# SHIFT_GROWTH·(1 + |H₀₀|), and a bracket without an upper end doubles ν from at
# least NU_FLOOR, so the search leaves ν = 0 on a singular H.
SECULAR_MAX_ITER = cython.declare(cython.Py_ssize_t, 60)
BALL_RTOL = cython.declare(cython.double, 1e-12)
SHIFT_GROWTH = cython.declare(cython.double, 1e-8)
NU_FLOOR = cython.declare(cython.double, 1e-12)
# The step to z is halved at most so many times (2⁻⁴⁰ ≈ 1e-12 of it) before the
# solver stops where it is.
STEP_HALVINGS = cython.declare(cython.Py_ssize_t, 40)


@cython.cclass
class Projection:
    """Work space of :func:`filippi_solve` for up to d dimensions."""

    def __init__(self, d: cython.Py_ssize_t, capacity: cython.Py_ssize_t):
        self.d = d
        self.prob = np.zeros(max(capacity, 1))
        self.target, self.residual, self.wres, self.grad = np.zeros(d), np.zeros(d), np.zeros(d), np.zeros(d)
        self.rhs, self.z, self.trial = np.zeros(d), np.zeros(d), np.zeros(d)
        self.jac, self.wj, self.hess = np.zeros(d * d), np.zeros(d * d), np.zeros(d * d)
        self.second, self.shifted, self.chol = np.zeros(d * d), np.zeros(d * d), np.zeros(d * d)
        self.index = np.zeros(d, dtype=np.intp)


@cython.cfunc
@cython.exceptval(check=False)
def moments(x: cython.double[::1], xo: cython.Py_ssize_t, n: cython.Py_ssize_t, d: cython.Py_ssize_t,
            theta: cython.double[::1], to: cython.Py_ssize_t, prob: cython.double[::1], out: cython.double[::1],
            index: cython.Py_ssize_t[::1]) -> cython.void:
    """out += Σ_i μ(x_iᵀθ) x_i over the n rows at x[xo:], each over its
    non-zero entries; the μ_i into prob."""
    i: cython.Py_ssize_t
    q: cython.Py_ssize_t
    m: cython.Py_ssize_t
    row: cython.Py_ssize_t
    mu: cython.double
    for i in range(n):
        row = xo + i * d
        m = nonzeros(x, row, d, index)
        mu = logistic(sparse_dot(x, row, theta, to, index, m))
        prob[i] = mu
        for q in range(m):
            out[index[q]] += mu * x[row + index[q]]


@cython.cfunc
@cython.exceptval(check=False)
def filippi_value(p: Projection, x: cython.double[::1], xo: cython.Py_ssize_t, n: cython.Py_ssize_t,
                  theta: cython.double[::1], to: cython.Py_ssize_t, design_inv: cython.double[::1],
                  vo: cython.Py_ssize_t, reg: cython.double) -> cython.double:
    """f(θ) = ‖g(θ) − g(θ̂)‖²_{V⁻¹}, with g(θ) = Σ μ(x_iᵀθ) x_i + λθ; leaves
    μ(Xθ) in p.prob, the residual in p.residual and V⁻¹r in p.wres."""
    d: cython.Py_ssize_t = p.d
    i: cython.Py_ssize_t
    a: cython.Py_ssize_t
    mu: cython.double
    for a in range(d):
        p.residual[a] = reg * theta[to + a] - p.target[a]
    moments(x, xo, n, d, theta, to, p.prob, p.residual, p.index)
    for a in range(d):
        p.wres[a] = dot(design_inv, vo + a * d, p.residual, 0, d)
    return dot(p.residual, 0, p.wres, 0, d)


@cython.cfunc
@cython.exceptval(check=False)
def jacobian_pass(p: Projection, x: cython.double[::1], xo: cython.Py_ssize_t, n: cython.Py_ssize_t,
                  reg: cython.double) -> cython.void:
    """In one sweep over the rows, each over its non-zero entries, at the μ_i
    in p.prob and V⁻¹r in p.wres: p.jac = Σ μ̇_i x_i x_iᵀ + λ₀I, and
    p.second = 2 Σ μ̈_i (x_iᵀV⁻¹r) x_i x_iᵀ (μ̈ = μ̇(1 − 2μ))."""
    d: cython.Py_ssize_t = p.d
    i: cython.Py_ssize_t
    a: cython.Py_ssize_t
    m: cython.Py_ssize_t
    row: cython.Py_ssize_t
    mu: cython.double
    first: cython.double
    second: cython.double
    along: cython.double
    jac: cython.double[::1] = p.jac
    sec: cython.double[::1] = p.second
    index: cython.Py_ssize_t[::1] = p.index
    for a in range(d * d):
        jac[a] = 0.0
        sec[a] = 0.0
    for i in range(n):
        row = xo + i * d
        m = nonzeros(x, row, d, index)
        mu = p.prob[i]
        first = logistic_slope(mu)
        along = sparse_dot(x, row, p.wres, 0, index, m)
        second = 2.0 * first * (1.0 - 2.0 * mu) * along
        add_gram_row(jac, d, x, row, index, m, first)  # the logistic Hessian's term, as newton_pass's
        add_gram_row(sec, d, x, row, index, m, second)
    for a in range(d):
        jac[a * d + a] += reg
    mirror_upper(jac, d)
    mirror_upper(sec, d)


@cython.cfunc
def filippi_solve(p: Projection, x: cython.double[::1], xo: cython.Py_ssize_t, n: cython.Py_ssize_t,
                  mle: cython.double[::1], mo: cython.Py_ssize_t, design_inv: cython.double[::1],
                  vo: cython.Py_ssize_t, reg: cython.double, bound: cython.double, theta: cython.double[::1],
                  to: cython.Py_ssize_t) -> cython.Py_ssize_t:
    """argmin over ‖θ‖ ≤ S of f(θ) = ‖g(θ) − g(θ̂)‖²_{V⁻¹} (Filippi et al.'s
    projection), from θ = theta[to:] (e.g. the radial projection), in place.

    Each step minimises the second-order model of f inside the ball: with H the
    Hessian of f (its Gauss–Newton part 2JᵀV⁻¹J when the full Hessian is not
    positive definite) and ∇f = 2JᵀV⁻¹r, the model's minimiser over ‖z‖ ≤ S is
    z(ν) = (H + νI)⁻¹(Hθ − ∇f) with ν = 0 if that is inside, else the ν > 0 with
    ‖z(ν)‖ = S, found by safeguarded Newton steps on 1/‖z(ν)‖ − 1/S (Moré and
    Sorensen's secular equation). The step to z is halved until f decreases.
    Returns the number of steps taken."""
    d: cython.Py_ssize_t = p.d
    i: cython.Py_ssize_t
    a: cython.Py_ssize_t
    b: cython.Py_ssize_t
    it: cython.Py_ssize_t
    inner: cython.Py_ssize_t
    mu: cython.double
    value: cython.double
    trial_value: cython.double
    nu: cython.double
    lo: cython.double
    hi: cython.double
    norm: cython.double
    qnorm: cython.double
    step: cython.double
    scale: cython.double
    alpha: cython.double
    newton: cython.bint
    noise: cython.double
    # g(θ̂)
    for a in range(d):
        p.target[a] = reg * mle[mo + a]
    moments(x, xo, n, d, mle, mo, p.prob, p.target, p.index)
    value = filippi_value(p, x, xo, n, theta, to, design_inv, vo, reg)
    for it in range(PROJECTION_MAX_ITER):
        # J = Σ μ̇ x xᵀ + λI and the second-order term 2 Σ μ̈ (xᵀV⁻¹r) x xᵀ
        jacobian_pass(p, x, xo, n, reg)
        # V⁻¹J, then H = 2 JᵀV⁻¹J (J symmetric) and ∇f = 2 J V⁻¹r
        for a in range(d):
            for b in range(d):
                p.wj[a * d + b] = 0.0
            for i in range(d):
                scale = design_inv[vo + a * d + i]
                for b in range(d):
                    p.wj[a * d + b] += scale * p.jac[i * d + b]
        for a in range(d):
            p.grad[a] = 2.0 * dot(p.jac, a * d, p.wres, 0, d)
            for b in range(a, d):
                step = 0.0
                for i in range(d):
                    step += p.jac[a * d + i] * p.wj[i * d + b]
                p.hess[a * d + b] = 2.0 * step
                p.hess[b * d + a] = 2.0 * step
        # the full Hessian where it is positive definite, else Gauss–Newton's
        for a in range(d * d):
            p.shifted[a] = p.hess[a] + p.second[a]
        newton = cholesky(p.shifted, p.chol, d)
        if newton:
            for a in range(d * d):
                p.hess[a] = p.shifted[a]
        # rhs = Hθ − ∇f
        for a in range(d):
            p.rhs[a] = dot(p.hess, a * d, theta, to, d) - p.grad[a]
        # z(ν): ν = 0 if inside, else the secular equation on [lo, hi]
        nu = 0.0
        lo = 0.0
        hi = INFINITY
        for inner in range(SECULAR_MAX_ITER):
            for a in range(d * d):
                p.shifted[a] = p.hess[a]
            for a in range(d):
                p.shifted[a * d + a] += nu
            if not cholesky(p.shifted, p.chol, d):
                # H + νI not positive definite: ν must grow
                lo = nu
                nu = 2.0 * nu + SHIFT_GROWTH * (1.0 + fabs(p.hess[0]))
                continue
            for a in range(d):
                p.z[a] = p.rhs[a]
            cholesky_solve(p.chol, p.z, d)
            norm = sqrt(dot(p.z, 0, p.z, 0, d))
            if norm <= bound * (1.0 + BALL_RTOL) and (nu == 0.0 or norm >= bound * (1.0 - BALL_RTOL)):
                break
            if norm > bound:
                lo = nu
            else:
                hi = nu
            # q = L⁻¹ z; Newton step on 1/‖z(ν)‖ − 1/S
            for a in range(d):
                p.trial[a] = (p.z[a] - dot(p.chol, a * d, p.trial, 0, a)) / p.chol[a * d + a]
            qnorm = dot(p.trial, 0, p.trial, 0, d)
            nu = nu + (norm * norm / qnorm) * (norm - bound) / bound
            if not (lo < nu < hi):  # safeguard: bisect the bracket
                nu = 0.5 * (lo + hi) if hi < INFINITY else 2.0 * lo + NU_FLOOR
        # pull z onto the ball if the search left it a hair outside
        norm = sqrt(dot(p.z, 0, p.z, 0, d))
        if norm > bound:
            for a in range(d):
                p.z[a] *= bound / norm
        # halve the step θ → z until f decreases (the ball is convex: every point is inside),
        # up to f's rounding: r = g(θ) − g(θ̂) cancels terms of size ‖g(θ̂)‖, so f is known
        # to about 2‖V⁻¹r‖‖g(θ̂)‖ε; near the minimiser a Newton step lowers f by less than that
        noise = PROJECTION_NOISE * sqrt(dot(p.wres, 0, p.wres, 0, d) * dot(p.target, 0, p.target, 0, d))
        alpha = 1.0
        trial_value = INFINITY
        for inner in range(STEP_HALVINGS):
            for a in range(d):
                p.trial[a] = theta[to + a] + alpha * (p.z[a] - theta[to + a])
            trial_value = filippi_value(p, x, xo, n, p.trial, 0, design_inv, vo, reg)
            if trial_value <= value + noise:
                break
            alpha *= 0.5
        if not trial_value <= value + noise:
            filippi_value(p, x, xo, n, theta, to, design_inv, vo, reg)  # the state of θ again
            return it
        step = 0.0
        norm = 0.0
        for a in range(d):
            step += (p.trial[a] - theta[to + a]) * (p.trial[a] - theta[to + a])
            norm += theta[to + a] * theta[to + a]
            theta[to + a] = p.trial[a]
        value = trial_value
        if sqrt(step) <= (NEWTON_STEP_TOL if newton and alpha == 1.0 else PROJECTION_STEP_TOL) * (1.0 + sqrt(norm)):
            return it + 1
    return PROJECTION_MAX_ITER


def filippi_projection(X, mle, design_inv, reg, bound, start):
    """:func:`filippi_solve` on numpy arrays: the samples X (n, d), the MLE θ̂,
    V⁻¹, λ₀ and S, from ``start``; returns the projected θ."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    n, d = X.shape
    theta = np.array(start, dtype=np.float64).reshape(-1)
    work = Projection(d, n)
    filippi_solve(work, X.reshape(-1), 0, n, np.ascontiguousarray(mle, dtype=np.float64).reshape(-1), 0,
                  np.ascontiguousarray(design_inv, dtype=np.float64).reshape(-1), 0, float(reg), float(bound),
                  theta, 0)
    return theta
