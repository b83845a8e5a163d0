"""Filippi et al.'s projection onto the ball ‖θ‖ ≤ S: :func:`filippi_solve`
and its work space :class:`Projection` (both declared in _projection.pxd, for
the estimator), and :func:`filippi_projection` on numpy arrays."""

import cython
import numpy as np

if cython.compiled:
    from cython.cimports.cqb.sim._algebra import (add_gram_row, at, cholesky, cholesky_solve, dot, index_at,
                                                  logistic, logistic_slope, mirror_upper, nonzeros, sparse_dot)
    from cython.cimports.libc.math import INFINITY, fabs, sqrt
else:
    from math import fabs, sqrt
    from math import inf as INFINITY

    from ._algebra import (add_gram_row, at, cholesky, cholesky_solve, dot, index_at, logistic, logistic_slope,
                           mirror_upper, nonzeros, sparse_dot)

# Filippi's projection stops at a certified minimiser: where θ̂ lies outside the
# ball (the only case solved; inside, θ̂ is the answer, f(θ̂) = 0) every KKT point
# of min f over ‖θ‖ ≤ S is on the sphere with ∇f + 2νθ = 0, ν ≥ 0 (∇f = 2JV⁻¹r
# vanishes only at θ̂, J and V⁻¹ being positive definite). It stops when the
# residual ‖∇f + 2νθ‖/‖∇f‖ (the sine of the angle between −∇f and θ) is below
# PROJECTION_KKT_TOL: tight enough that θ lies within 1e-8·S of the minimiser
# (tests/test_sim_policies.py), above the residual's rounding floor, which grows
# as S/‖θ̂‖ → 1 and with the Hessian's condition: ≤ 1e-10 on random problems
# (d ≤ 120, S/‖θ̂‖ ≤ 0.99999), up to ~1.2e-8 in base-instance runs (n ≈ 1,200,
# S/‖θ̂‖ ≈ 0.9993). A solve that does not get there within PROJECTION_MAX_ITER
# steps (converging solves took ≤ 4 on those problems), or whose step cannot lower f, is not
# converged: the estimator counts it, a run records the count.
PROJECTION_KKT_TOL = 3e-8
PROJECTION_MAX_ITER = 30
# a point is on the sphere (where ν may be positive) within this relative distance
PROJECTION_SPHERE_TOL = 1e-10
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
        self.steps = 0
        self.kkt = 0.0
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
        m = nonzeros(at(x), row, d, index_at(index))
        mu = logistic(sparse_dot(at(x), row, at(theta), to, index_at(index), m))
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
        p.wres[a] = dot(at(design_inv), vo + a * d, at(p.residual), 0, d)
    return dot(at(p.residual), 0, at(p.wres), 0, d)


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
        m = nonzeros(at(x), row, d, index_at(index))
        mu = p.prob[i]
        first = logistic_slope(mu)
        along = sparse_dot(at(x), row, at(p.wres), 0, index_at(index), m)
        second = 2.0 * first * (1.0 - 2.0 * mu) * along
        add_gram_row(at(jac), d, at(x), row, index_at(index), m, first)  # the logistic Hessian's term, as newton_pass's
        add_gram_row(at(sec), d, at(x), row, index_at(index), m, second)
    for a in range(d):
        jac[a * d + a] += reg
    mirror_upper(jac, d)
    mirror_upper(sec, d)


@cython.cfunc
@cython.exceptval(check=False)
def kkt_residual(p: Projection, x: cython.double[::1], xo: cython.Py_ssize_t, n: cython.Py_ssize_t,
                 theta: cython.double[::1], to: cython.Py_ssize_t, reg: cython.double,
                 bound: cython.double) -> cython.double:
    """‖∇f + 2νθ‖/‖∇f‖ at θ = theta[to:], from the μ_i in p.prob and V⁻¹r in
    p.wres (as filippi_value leaves them): ∇f = 2JV⁻¹r = 2(Σ μ̇_i (x_iᵀV⁻¹r) x_i
    + λV⁻¹r), O(nd), into p.grad; ν = max(0, −∇fᵀθ/(2‖θ‖²)) on the sphere, 0
    inside. 0 where ∇f = 0."""
    d: cython.Py_ssize_t = p.d
    i: cython.Py_ssize_t
    a: cython.Py_ssize_t
    q: cython.Py_ssize_t
    m: cython.Py_ssize_t
    row: cython.Py_ssize_t
    mu: cython.double
    along: cython.double
    squared: cython.double
    inward: cython.double
    nu: cython.double
    orthogonal: cython.double
    component: cython.double
    for a in range(d):
        p.grad[a] = reg * p.wres[a]
    for i in range(n):
        row = xo + i * d
        m = nonzeros(at(x), row, d, index_at(p.index))
        mu = p.prob[i]
        along = mu * (1.0 - mu) * sparse_dot(at(x), row, at(p.wres), 0, index_at(p.index), m)
        for q in range(m):
            p.grad[p.index[q]] += along * x[row + p.index[q]]
    for a in range(d):
        p.grad[a] *= 2.0
    squared = dot(at(p.grad), 0, at(p.grad), 0, d)
    if squared == 0.0:
        return 0.0
    norm: cython.double = dot(at(theta), to, at(theta), to, d)
    inward = -dot(at(p.grad), 0, at(theta), to, d)
    nu = inward / (2.0 * norm) if inward > 0.0 and sqrt(norm) >= bound * (1.0 - PROJECTION_SPHERE_TOL) else 0.0
    orthogonal = 0.0
    for a in range(d):
        component = p.grad[a] + 2.0 * nu * theta[to + a]
        orthogonal += component * component
    return sqrt(orthogonal / squared)


@cython.cfunc
def filippi_solve(p: Projection, x: cython.double[::1], xo: cython.Py_ssize_t, n: cython.Py_ssize_t,
                  mle: cython.double[::1], mo: cython.Py_ssize_t, design_inv: cython.double[::1],
                  vo: cython.Py_ssize_t, reg: cython.double, bound: cython.double, theta: cython.double[::1],
                  to: cython.Py_ssize_t, max_iter: cython.Py_ssize_t) -> cython.bint:
    """argmin over ‖θ‖ ≤ S of f(θ) = ‖g(θ) − g(θ̂)‖²_{V⁻¹} (Filippi et al.'s
    projection) for θ̂ outside the ball, from θ = theta[to:] (inside it; e.g.
    the radial projection, or the last solution), in place.

    Each step minimises the second-order model of f inside the ball: with H the
    Hessian of f (its Gauss–Newton part 2JᵀV⁻¹J when the full Hessian is not
    positive definite) and ∇f = 2JᵀV⁻¹r, the model's minimiser over ‖z‖ ≤ S is
    z(ν) = (H + νI)⁻¹(Hθ − ∇f) with ν = 0 if that is inside, else the ν > 0 with
    ‖z(ν)‖ = S, found by safeguarded Newton steps on 1/‖z(ν)‖ − 1/S (Moré and
    Sorensen's secular equation). The step to z is halved until f decreases.
    Returns True when θ is a KKT point to PROJECTION_KKT_TOL (see there), False
    when max_iter steps did not get there or a step could not lower f; the
    steps taken go to p.steps, the last residual to p.kkt."""
    d: cython.Py_ssize_t = p.d
    i: cython.Py_ssize_t
    a: cython.Py_ssize_t
    b: cython.Py_ssize_t
    it: cython.Py_ssize_t
    inner: cython.Py_ssize_t
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
    it = 0
    while True:
        p.steps = it
        p.kkt = kkt_residual(p, x, xo, n, theta, to, reg, bound)  # and ∇f into p.grad
        if p.kkt <= PROJECTION_KKT_TOL:
            return True
        if it >= max_iter:
            return False
        it += 1
        # J = Σ μ̇ x xᵀ + λI and the second-order term 2 Σ μ̈ (xᵀV⁻¹r) x xᵀ
        jacobian_pass(p, x, xo, n, reg)
        # V⁻¹J, then H = 2 JᵀV⁻¹J (J symmetric)
        for a in range(d):
            for b in range(d):
                p.wj[a * d + b] = 0.0
            for i in range(d):
                scale = design_inv[vo + a * d + i]
                for b in range(d):
                    p.wj[a * d + b] += scale * p.jac[i * d + b]
        for a in range(d):
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
            p.rhs[a] = dot(at(p.hess), a * d, at(theta), to, d) - p.grad[a]
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
            norm = sqrt(dot(at(p.z), 0, at(p.z), 0, d))
            if norm <= bound * (1.0 + BALL_RTOL) and (nu == 0.0 or norm >= bound * (1.0 - BALL_RTOL)):
                break
            if norm > bound:
                lo = nu
            else:
                hi = nu
            # q = L⁻¹ z; Newton step on 1/‖z(ν)‖ − 1/S
            for a in range(d):
                p.trial[a] = (p.z[a] - dot(at(p.chol), a * d, at(p.trial), 0, a)) / p.chol[a * d + a]
            qnorm = dot(at(p.trial), 0, at(p.trial), 0, d)
            nu = nu + (norm * norm / qnorm) * (norm - bound) / bound
            if not (lo < nu < hi):  # safeguard: bisect the bracket
                nu = 0.5 * (lo + hi) if hi < INFINITY else 2.0 * lo + NU_FLOOR
        # pull z onto the ball if the search left it a hair outside
        norm = sqrt(dot(at(p.z), 0, at(p.z), 0, d))
        if norm > bound:
            for a in range(d):
                p.z[a] *= bound / norm
        # halve the step θ → z until f decreases (the ball is convex: every point is inside),
        # up to f's rounding: r = g(θ) − g(θ̂) cancels terms of size ‖g(θ̂)‖, so f is known
        # to about 2‖V⁻¹r‖‖g(θ̂)‖ε; near the minimiser a Newton step lowers f by less than that
        noise = PROJECTION_NOISE * sqrt(dot(at(p.wres), 0, at(p.wres), 0, d) * dot(at(p.target), 0, at(p.target), 0, d))
        alpha = 1.0
        trial_value = INFINITY
        for inner in range(STEP_HALVINGS):
            for a in range(d):
                p.trial[a] = theta[to + a] + alpha * (p.z[a] - theta[to + a])
            trial_value = filippi_value(p, x, xo, n, p.trial, 0, design_inv, vo, reg)
            if trial_value <= value + noise:
                break
            alpha *= 0.5
        if not trial_value <= value + noise:  # no step lowers f: θ stays, not certified
            filippi_value(p, x, xo, n, theta, to, design_inv, vo, reg)  # the state of θ again
            p.steps = it
            return False
        for a in range(d):
            theta[to + a] = p.trial[a]
        value = trial_value


def filippi_projection(X, mle, design_inv, reg, bound, start, max_iter=PROJECTION_MAX_ITER):
    """:func:`filippi_solve` on numpy arrays: the samples X (n, d), the MLE θ̂,
    V⁻¹, λ₀ and S, from ``start`` (inside the ball), at most ``max_iter``
    steps. Returns (θ, converged, steps, KKT residual); θ = θ̂ (no step) when θ̂
    is inside the ball, where it is the minimiser (f(θ̂) = 0)."""
    reg, bound = float(reg), float(bound)
    if not (reg > 0.0 and reg < INFINITY):
        raise ValueError(f"filippi_projection: reg must be a positive number, got {reg!r}")
    if not (bound > 0.0 and bound < INFINITY):
        raise ValueError(f"filippi_projection: bound must be a positive number, got {bound!r}")
    X = np.ascontiguousarray(X, dtype=np.float64)
    n, d = X.shape
    mle = np.ascontiguousarray(mle, dtype=np.float64).reshape(-1)
    theta = np.array(start, dtype=np.float64).reshape(-1)
    start_norm = float(np.linalg.norm(theta))
    if not start_norm <= bound * (1.0 + 1e-12):
        raise ValueError(f"filippi_projection: the start must lie inside the ball ‖θ‖ ≤ {bound!r}, "
                         f"got ‖start‖ = {start_norm!r}")
    if float(np.linalg.norm(mle)) <= bound:
        return mle.copy(), True, 0, 0.0
    work = Projection(d, n)
    converged = filippi_solve(work, X.reshape(-1), 0, n, mle, 0,
                              np.ascontiguousarray(design_inv, dtype=np.float64).reshape(-1), 0, reg, bound,
                              theta, 0, int(max_iter))
    return theta, bool(converged), int(work.steps), float(work.kkt)
