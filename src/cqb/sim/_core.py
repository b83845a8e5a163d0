"""The simulation's hot loops, written once: compiled by Cython (pure-Python
mode) when the package is built, and runnable as plain Python, uncompiled, as
the reference for debugging (tests/test_sim_core.py runs both).

What is here:

* :class:`Estimator`: the K per-server regularised logistic MLEs of SPEC §2
  (exact warm-started Newton refits on a geometric schedule, an online Newton
  step with Sherman–Morrison updates of V⁻¹ and H⁻¹ in between, the widths
  β_k, and the projection onto the ball ‖θ‖ ≤ S_k: radial, or Filippi's by
  :func:`filippi_solve`);
* :class:`Scorer`: the cached μ(xᵀθ_k), bonuses and UCB index of queued jobs;
* the policies' per-round decisions as *choosers* (:class:`Chooser` and its
  subclasses: CQB-Opt, the forced exploration of CQB-ε/CQB-ε-Opt/CQB-η-2,
  CQB-TS, Q-UCB/Q-ThS, Random and the oracle, and :class:`PolicyChooser`, which
  calls a plugin policy's Python methods);
* :func:`play_rounds`: the round loop of SPEC §1 (the queue, the lazy heap of
  the best waiting mean for the gap, the service coins and the arrivals), the
  only implementation of the queue dynamics that a policy runs through;
* :func:`draw_screened`: the rejection sampler's draws and acceptance screen.

Contexts that are mostly zeros (one-hot, pixels) take sparse paths: a zero
term adds nothing to a sum, so skipping it changes no result.

Arrays are flat C-contiguous views of the numpy arrays the Python side owns
(``features[k, i, a]`` is ``_features[(k * capacity + i) * d + a]``), so a test
reads every state as numpy. Randomness is the policy's numpy Generator, called
through Python (its stream is numpy's); the sampler reads its bit generator's
uniforms directly (the same stream). The code hash covers this file; the
build records its hash (cqb.sim.core checks it).
"""

import cython
import numpy as np

if cython.compiled:
    from cython.cimports.cpython.exc import PyErr_CheckSignals
    from cython.cimports.cpython.pycapsule import PyCapsule_GetPointer
    from cython.cimports.numpy.random import bitgen_t
    from cython.cimports.libc.math import INFINITY, ceil, exp, fabs, isnan, log, log1p, sqrt, tanh
else:
    from math import ceil, exp, fabs, isnan, log, log1p, sqrt, tanh
    from math import inf as INFINITY

# Filippi's projection: Newton (or Gauss-Newton) steps on the ball-constrained
# problem stop when a step moves θ by less than PROJECTION_STEP_TOL (relative),
# or a full Newton step by less than NEWTON_STEP_TOL (the next one would be
# quadratically shorter, ~1e-14), or after so many.
PROJECTION_STEP_TOL = 1e-13
NEWTON_STEP_TOL = 1e-7
PROJECTION_MAX_ITER = 100
# A trial point is accepted if f does not rise above its rounding, ~this × ‖V⁻¹r‖‖g(θ̂)‖.
PROJECTION_NOISE = 1e-13
# The compiled round loop runs no Python bytecode, where the interpreter acts on
# signals: it asks every so many rounds, so a Ctrl-C ends a long run at once.
SIGNAL_CHECK_ROUNDS = 4096


# ---------------------------------------------------------------- small dense algebra

@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
def logistic(z: cython.double) -> cython.double:
    """μ(z) = (1 + tanh(z/2))/2: stable for any z."""
    return 0.5 * (1.0 + tanh(0.5 * z))


@cython.cfunc
@cython.exceptval(check=False)
def dot(a: cython.double[::1], ao: cython.Py_ssize_t, b: cython.double[::1], bo: cython.Py_ssize_t,
        n: cython.Py_ssize_t) -> cython.double:
    """Σ a[ao + j] b[bo + j] with four partial sums in flight."""
    s0: cython.double = 0.0
    s1: cython.double = 0.0
    s2: cython.double = 0.0
    s3: cython.double = 0.0
    j: cython.Py_ssize_t = 0
    while j + 4 <= n:
        s0 += a[ao + j] * b[bo + j]
        s1 += a[ao + j + 1] * b[bo + j + 1]
        s2 += a[ao + j + 2] * b[bo + j + 2]
        s3 += a[ao + j + 3] * b[bo + j + 3]
        j += 4
    while j < n:
        s0 += a[ao + j] * b[bo + j]
        j += 1
    return (s0 + s1) + (s2 + s3)


@cython.cfunc
@cython.exceptval(check=False)
def nonzeros(x: cython.double[::1], xo: cython.Py_ssize_t, d: cython.Py_ssize_t,
             index: cython.Py_ssize_t[::1]) -> cython.Py_ssize_t:
    """The positions of x's non-zero entries, into index; their count."""
    m: cython.Py_ssize_t = 0
    a: cython.Py_ssize_t
    for a in range(d):
        if x[xo + a] != 0.0:
            index[m] = a
            m += 1
    return m


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
def sparse_dot(a: cython.double[::1], ao: cython.Py_ssize_t, b: cython.double[::1], bo: cython.Py_ssize_t,
               index: cython.Py_ssize_t[::1], m: cython.Py_ssize_t) -> cython.double:
    """Σ a[ao + i] b[bo + i] over i in index[:m], in that order, one sum."""
    p: cython.Py_ssize_t
    s: cython.double = 0.0
    for p in range(m):
        s += a[ao + index[p]] * b[bo + index[p]]
    return s


@cython.cfunc
@cython.exceptval(check=False)
def sym_matvec(mat: cython.double[::1], mo: cython.Py_ssize_t, x: cython.double[::1], xo: cython.Py_ssize_t,
               out: cython.double[::1], d: cython.Py_ssize_t, index: cython.Py_ssize_t[::1],
               m: cython.Py_ssize_t) -> cython.void:
    """out = M x for a symmetric d×d M at mat[mo:], x's non-zeros in
    index[:m] (m = d: dense). Sparse: M's rows at the non-zeros, scaled and
    added (contiguous, where a row-by-row sum would gather), which adds the
    same products in the same order, M being exactly symmetric."""
    a: cython.Py_ssize_t
    p: cython.Py_ssize_t
    row: cython.Py_ssize_t
    xj: cython.double
    if m == d:
        for a in range(d):
            out[a] = dot(mat, mo + a * d, x, xo, d)
        return
    for a in range(d):
        out[a] = 0.0
    for p in range(m):
        row = mo + index[p] * d
        xj = x[xo + index[p]]
        for a in range(d):
            out[a] += mat[row + a] * xj


@cython.cfunc
@cython.exceptval(check=False)
def quad_form(mat: cython.double[::1], mo: cython.Py_ssize_t, x: cython.double[::1], xo: cython.Py_ssize_t,
              d: cython.Py_ssize_t, index: cython.Py_ssize_t[::1], m: cython.Py_ssize_t) -> cython.double:
    """xᵀ M x over x's non-zeros in index[:m] (m = d: dense)."""
    total: cython.double = 0.0
    inner: cython.double
    p: cython.Py_ssize_t
    q: cython.Py_ssize_t
    a: cython.Py_ssize_t
    if m == d:
        for a in range(d):
            total += dot(mat, mo + a * d, x, xo, d) * x[xo + a]
        return total
    for p in range(m):
        inner = 0.0
        for q in range(m):
            inner += mat[mo + index[p] * d + index[q]] * x[xo + index[q]]
        total += inner * x[xo + index[p]]
    return total


# ---------------------------------------------------------------- the estimator's dense algebra

# From this dimension up, the estimator's refits and rank-one updates call
# BLAS/LAPACK (cqb.sim._blas) instead of the loops above. Side by side
# (bench.sim_speed, CQB-Opt on a cached trace): TODO measured.
BLAS_MIN_DIM = 40


@cython.cclass
class DenseAlgebra:
    """The estimator's O(d²) and O(d³) steps by the loops above: its refits'
    Cholesky factor, solve and inverse, the dense Hessian's Gram sum, and the
    rank-one update's M x and M −= u uᵀ. cqb.sim._blas overrides them with
    BLAS/LAPACK calls (:func:`dense_algebra` picks by d)."""

    def __init__(self):
        self.batches_gram = False

    def kernels(self, a, rows, x, u):
        """For tests, each step on numpy arrays (a: d×d SPD, rows: n×d, x
        and u: d): L, a⁻¹x, a⁻¹, the upper triangle of a + rowsᵀrows, a x and
        a − u uᵀ, each a new array (None for L, a⁻¹x and a⁻¹ if a is not
        positive definite)."""
        d: cython.Py_ssize_t = a.shape[0]
        flat = np.ascontiguousarray(a, dtype=np.float64).reshape(-1)
        vector = np.ascontiguousarray(x, dtype=np.float64)
        factor, work, inverse = np.zeros(d * d), np.zeros(d * d), np.zeros(d * d)
        solved = vector.copy()
        ok = self.factor(flat.copy(), factor, d)
        if ok:
            self.solve(factor, solved, d)
        ok_inverse = self.inverse(flat.copy(), inverse, 0, np.zeros(d * d), work, d)
        gram = flat.copy()
        block = np.ascontiguousarray(rows, dtype=np.float64).reshape(-1)
        if rows.shape[0]:
            self.add_gram(block, rows.shape[0], d, gram)
        product = np.zeros(d)
        self.matvec(flat, 0, vector, 0, product, d, np.arange(d, dtype=np.intp), d)
        downdated = flat.copy()
        self.subtract_outer(downdated, 0, np.ascontiguousarray(u, dtype=np.float64), d)
        shape = (d, d)
        return (factor.reshape(shape) if ok else None, solved if ok else None,
                inverse.reshape(shape) if ok_inverse else None, np.triu(gram.reshape(shape)), product,
                downdated.reshape(shape))

    @cython.cfunc
    @cython.exceptval(check=False)
    def factor(self, a: cython.double[::1], l: cython.double[::1], d: cython.Py_ssize_t) -> cython.bint:
        return cholesky(a, l, d)

    @cython.cfunc
    @cython.exceptval(check=False)
    def solve(self, l: cython.double[::1], b: cython.double[::1], d: cython.Py_ssize_t) -> cython.void:
        cholesky_solve(l, b, d)

    @cython.cfunc
    @cython.exceptval(check=False)
    def inverse(self, a: cython.double[::1], out: cython.double[::1], oo: cython.Py_ssize_t, l: cython.double[::1],
                y: cython.double[::1], d: cython.Py_ssize_t) -> cython.bint:
        return spd_inverse(a, out, oo, l, y, d)

    @cython.cfunc
    @cython.exceptval(check=False)
    def add_gram(self, rows: cython.double[::1], n: cython.Py_ssize_t, d: cython.Py_ssize_t,
                 h: cython.double[::1]) -> cython.void:
        """h[a, b] += Σ_i rows[i, a] rows[i, b] for a ≤ b (the upper triangle)."""
        i: cython.Py_ssize_t
        a: cython.Py_ssize_t
        b: cython.Py_ssize_t
        for i in range(n):
            for a in range(d):
                for b in range(a, d):
                    h[a * d + b] += rows[i * d + a] * rows[i * d + b]

    @cython.cfunc
    @cython.exceptval(check=False)
    def matvec(self, mat: cython.double[::1], mo: cython.Py_ssize_t, x: cython.double[::1], xo: cython.Py_ssize_t,
               out: cython.double[::1], d: cython.Py_ssize_t, index: cython.Py_ssize_t[::1],
               m: cython.Py_ssize_t) -> cython.void:
        sym_matvec(mat, mo, x, xo, out, d, index, m)

    @cython.cfunc
    @cython.exceptval(check=False)
    def subtract_outer(self, mat: cython.double[::1], mo: cython.Py_ssize_t, u: cython.double[::1],
                       d: cython.Py_ssize_t) -> cython.void:
        subtract_outer(mat, mo, u, d)


def dense_algebra(d: cython.Py_ssize_t) -> DenseAlgebra:
    """The loops below BLAS_MIN_DIM (and when running uncompiled), else
    cqb.sim._blas's BLAS/LAPACK calls: imported here, at the first estimator
    that needs it, so that the processes of smaller instances never load
    scipy.linalg (~0.2 s)."""
    if d < BLAS_MIN_DIM or not cython.compiled:
        return DenseAlgebra()
    from .core import blas_module  # checked to be built from its source, like this module

    return blas_module().BlasAlgebra()


@cython.cfunc
@cython.exceptval(check=False)
def newton_pass(x: cython.double[::1], xo: cython.Py_ssize_t, y: cython.double[::1], yo: cython.Py_ssize_t,
                n: cython.Py_ssize_t, d: cython.Py_ssize_t, theta: cython.double[::1], to: cython.Py_ssize_t,
                reg: cython.double, grad: cython.double[::1], with_grad: cython.bint, h: cython.double[::1],
                index: cython.Py_ssize_t[::1], algebra: DenseAlgebra, gram: cython.double[::1]) -> cython.void:
    """One pass over the n samples (rows x[xo:], outcomes y[yo:]) at θ = theta[to:]:
    the Hessian h = Σ μ̇_i x_i x_iᵀ + λ₀I of the regularised log-loss and, if
    ``with_grad``, its gradient Σ (μ_i − y_i) x_i + λ₀θ into grad; each row
    over its non-zero entries only. Where ``algebra.batches_gram``, the dense
    rows go scaled by √μ̇_i into gram and into h in one algebra.add_gram."""
    g: cython.Py_ssize_t = 0
    s: cython.double
    i: cython.Py_ssize_t
    a: cython.Py_ssize_t
    b: cython.Py_ssize_t
    p: cython.Py_ssize_t
    q: cython.Py_ssize_t
    m: cython.Py_ssize_t
    row: cython.Py_ssize_t
    linear: cython.double
    mu: cython.double
    wi: cython.double
    wa: cython.double
    r: cython.double
    for a in range(d * d):
        h[a] = 0.0
    if with_grad:
        for a in range(d):
            grad[a] = reg * theta[to + a]
    for i in range(n):
        row = xo + i * d
        m = nonzeros(x, row, d, index)
        linear = dot(x, row, theta, to, d) if 2 * m > d else sparse_dot(x, row, theta, to, index, m)
        mu = logistic(linear)
        wi = mu * (1.0 - mu)
        if with_grad:
            r = mu - y[yo + i]
            for p in range(m):
                grad[index[p]] += r * x[row + index[p]]
        if m == d and algebra.batches_gram:
            s = sqrt(wi)
            for a in range(d):
                gram[g * d + a] = s * x[row + a]
            g += 1
        elif m == d:
            for a in range(d):
                wa = wi * x[row + a]
                for b in range(a, d):
                    h[a * d + b] += wa * x[row + b]
        else:
            for p in range(m):
                a = index[p]
                wa = wi * x[row + a]
                for q in range(p, m):
                    h[a * d + index[q]] += wa * x[row + index[q]]
    if g > 0:
        algebra.add_gram(gram, g, d, h)
    for a in range(d):
        h[a * d + a] += reg
        for b in range(a + 1, d):
            h[b * d + a] = h[a * d + b]


@cython.cfunc
@cython.exceptval(check=False)
def subtract_outer(mat: cython.double[::1], mo: cython.Py_ssize_t, u: cython.double[::1],
                   d: cython.Py_ssize_t) -> cython.void:
    """M −= u uᵀ for the d×d M at mat[mo:]: both triangles from the same
    products, so a symmetric M stays exactly symmetric."""
    a: cython.Py_ssize_t
    b: cython.Py_ssize_t
    ua: cython.double
    for a in range(d):
        ua = u[a]
        for b in range(d):
            mat[mo + a * d + b] -= ua * u[b]


@cython.cfunc
@cython.exceptval(check=False)
def cholesky(a: cython.double[::1], l: cython.double[::1], d: cython.Py_ssize_t) -> cython.bint:
    """L (lower, row-major, in l) with L Lᵀ = a for a symmetric positive
    definite d×d a; False if a is not (numerically) positive definite."""
    i: cython.Py_ssize_t
    j: cython.Py_ssize_t
    s: cython.double
    for i in range(d):
        for j in range(i + 1):
            s = a[i * d + j] - dot(l, i * d, l, j * d, j)
            if i == j:
                if not s > 0.0:
                    return False
                l[i * d + i] = sqrt(s)
            else:
                l[i * d + j] = s / l[j * d + j]
        for j in range(i + 1, d):
            l[i * d + j] = 0.0
    return True


@cython.cfunc
@cython.exceptval(check=False)
def cholesky_solve(l: cython.double[::1], b: cython.double[::1], d: cython.Py_ssize_t) -> cython.void:
    """b ← (L Lᵀ)⁻¹ b."""
    i: cython.Py_ssize_t
    m: cython.Py_ssize_t
    s: cython.double
    for i in range(d):
        b[i] = (b[i] - dot(l, i * d, b, 0, i)) / l[i * d + i]
    for i in range(d - 1, -1, -1):
        s = b[i]
        for m in range(i + 1, d):
            s -= l[m * d + i] * b[m]
        b[i] = s / l[i * d + i]


@cython.cfunc
@cython.exceptval(check=False)
def spd_inverse(a: cython.double[::1], out: cython.double[::1], oo: cython.Py_ssize_t, l: cython.double[::1],
                y: cython.double[::1], d: cython.Py_ssize_t) -> cython.bint:
    """out[oo:oo + d²] = a⁻¹ for a symmetric positive definite a, by Cholesky:
    y holds L⁻¹ transposed (row j is column j of L⁻¹), and each entry of
    a⁻¹ = L⁻ᵀL⁻¹ is computed once for both triangles, so it is exactly symmetric."""
    i: cython.Py_ssize_t
    j: cython.Py_ssize_t
    m: cython.Py_ssize_t
    s: cython.double
    if not cholesky(a, l, d):
        return False
    for j in range(d):
        for i in range(d):
            y[j * d + i] = 0.0
        y[j * d + j] = 1.0 / l[j * d + j]
        for i in range(j + 1, d):
            s = 0.0
            for m in range(j, i):
                s -= l[i * d + m] * y[j * d + m]
            y[j * d + i] = s / l[i * d + i]
    for i in range(d):
        for j in range(i, d):
            # column i of L⁻¹ is zero above i: start at the later of the two columns
            s = dot(y, i * d + j, y, j * d + j, d - j)
            out[oo + i * d + j] = s
            out[oo + j * d + i] = s
    return True


# ---------------------------------------------------------------- Filippi's projection

@cython.cclass
class Projection:
    """Work space of :func:`filippi_solve` for up to d dimensions."""

    d: cython.Py_ssize_t
    prob: cython.double[::1]      # μ(Xθ) per row
    target: cython.double[::1]    # g(θ̂)
    residual: cython.double[::1]  # g(θ) − g(θ̂)
    wres: cython.double[::1]      # V⁻¹ r
    grad: cython.double[::1]
    rhs: cython.double[::1]
    z: cython.double[::1]
    trial: cython.double[::1]
    jac: cython.double[::1]       # J = Σ μ̇ x xᵀ + λI
    wj: cython.double[::1]        # V⁻¹ J
    hess: cython.double[::1]      # 2 JᵀV⁻¹J (+ the second-order term)
    second: cython.double[::1]
    shifted: cython.double[::1]
    chol: cython.double[::1]
    index: cython.Py_ssize_t[::1]

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
    b: cython.Py_ssize_t
    q: cython.Py_ssize_t
    r: cython.Py_ssize_t
    m: cython.Py_ssize_t
    row: cython.Py_ssize_t
    mu: cython.double
    first: cython.double
    second: cython.double
    along: cython.double
    first_a: cython.double   # (μ̇ x_a): the product's left operand as written, so the same bits
    second_a: cython.double
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
        first = mu * (1.0 - mu)
        along = sparse_dot(x, row, p.wres, 0, index, m)
        second = 2.0 * first * (1.0 - 2.0 * mu) * along
        for q in range(m):
            a = index[q]
            first_a = first * x[row + a]
            second_a = second * x[row + a]
            for r in range(q, m):
                b = index[r]
                jac[a * d + b] += first_a * x[row + b]
                sec[a * d + b] += second_a * x[row + b]
    for a in range(d):
        jac[a * d + a] += reg
        for b in range(a + 1, d):
            jac[b * d + a] = jac[a * d + b]
            sec[b * d + a] = sec[a * d + b]


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
        for inner in range(60):
            for a in range(d * d):
                p.shifted[a] = p.hess[a]
            for a in range(d):
                p.shifted[a * d + a] += nu
            if not cholesky(p.shifted, p.chol, d):
                # H + νI not positive definite: ν must grow
                lo = nu
                nu = 2.0 * nu + 1e-8 * (1.0 + fabs(p.hess[0]))
                continue
            for a in range(d):
                p.z[a] = p.rhs[a]
            cholesky_solve(p.chol, p.z, d)
            norm = sqrt(dot(p.z, 0, p.z, 0, d))
            if norm <= bound * (1.0 + 1e-12) and (nu == 0.0 or norm >= bound * (1.0 - 1e-12)):
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
                nu = 0.5 * (lo + hi) if hi < INFINITY else 2.0 * lo + 1e-12
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
        for inner in range(40):
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


# ---------------------------------------------------------------- the estimator

@cython.cclass
class Estimator:
    """The K per-server estimators of one CQB policy (SPEC §2).

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

    # the numpy arrays (the Python side reads these)
    features = cython.declare(object, visibility="readonly")   # (K, capacity, d)
    outcomes = cython.declare(object, visibility="readonly")   # (K, capacity)
    counts = cython.declare(object, visibility="readonly")     # (K,) int64
    mle = cython.declare(object, visibility="readonly")        # (K, d): θ̂_k
    theta = cython.declare(object, visibility="readonly")      # (K, d): projected θ_k
    inverses = cython.declare(object, visibility="readonly")   # (K, 2, d, d): V_k⁻¹, H_k⁻¹
    design_inv = cython.declare(object, visibility="readonly")  # view of inverses[:, 0]
    next_refit = cython.declare(object, visibility="readonly")  # (K,) int64
    widths = cython.declare(object, visibility="readonly")     # (K,) β_k
    norm_bounds = cython.declare(object, visibility="readonly")  # (K,) S_k
    params = cython.declare(object, visibility="readonly")
    n_servers = cython.declare(cython.Py_ssize_t, visibility="readonly")
    dim = cython.declare(cython.Py_ssize_t, visibility="readonly")
    capacity = cython.declare(cython.Py_ssize_t, visibility="readonly")
    ridge = cython.declare(cython.double, visibility="readonly")
    refits = cython.declare(cython.Py_ssize_t, visibility="public")
    projections = cython.declare(cython.Py_ssize_t, visibility="public")  # how often the projection was active
    projection_steps = cython.declare(cython.Py_ssize_t, visibility="public")  # Filippi solver steps in all

    reg: cython.double
    kappa: cython.double
    delta: cython.double
    newton_tol: cython.double
    refit_growth: cython.double
    newton_max_iter: cython.Py_ssize_t
    refit_min_samples: cython.Py_ssize_t
    filippi: cython.bint
    _x: cython.double[::1]
    _y: cython.double[::1]
    _n: cython.longlong[::1]
    _mle: cython.double[::1]
    _theta: cython.double[::1]
    _inv: cython.double[::1]
    _next: cython.longlong[::1]
    _widths: cython.double[::1]
    _bounds: cython.double[::1]
    _grad: cython.double[::1]
    _u: cython.double[::1]
    _uh: cython.double[::1]
    _hx: cython.double[::1]
    _h: cython.double[::1]
    _l: cython.double[::1]
    _y_inv: cython.double[::1]
    _w: cython.double[::1]
    _index: cython.Py_ssize_t[::1]
    _projection: Projection
    _algebra: DenseAlgebra
    _gram: cython.double[::1]      # the refit's dense rows scaled by √μ̇ (BLAS only)
    _versions: cython.longlong[::1]  # rank-one updates of V_k⁻¹ so far
    _last_u: cython.double[::1]      # (K, d): the last one's u, V_k⁻¹ −= u uᵀ

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
        self._projection = Projection(d, capacity)
        self._algebra = dense_algebra(d) if algebra is None else algebra  # tests pass the loops at any d
        self._gram = np.zeros(max(capacity, 1) * d if self._algebra.batches_gram else 1)
        self._versions = np.zeros(n_servers, dtype=np.int64)
        self._last_u = np.zeros(n_servers * d)
        self.refits = 0
        self.projections = 0
        self.projection_steps = 0
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
        base: cython.Py_ssize_t = (k * self.capacity + (n - 1)) * d
        for a in range(d):
            self._x[base + a] = xs[xo + a]
        self._y[k * self.capacity + n - 1] = outcome
        self._n[k] = n
        refitted: cython.bint = n >= self._next[k]
        if refitted:
            self.rank_one(k, xs, xo, 0.0)  # V⁻¹ only: the refit rebuilds H⁻¹
            self.refit(k)
            growth = cython.cast(cython.longlong, ceil(n * self.refit_growth))
            self._next[k] = n + 1 if n < self.refit_min_samples else n + max(growth, 1)
        else:
            # one Newton step on (quadratic model of the old data) + the new sample;
            # e^709.8 overflows a float, where μ is 0 to double precision
            exponent: cython.double = -dot(xs, xo, self._mle, k * d, d)
            prob: cython.double = 1.0 / (1.0 + exp(exponent)) if exponent < 709.0 else 0.0
            self.rank_one(k, xs, xo, prob * (1.0 - prob))
            for a in range(d):
                self._mle[k * d + a] -= (prob - outcome) * self._hx[a]
        bound: cython.double = self._bounds[k]
        norm: cython.double = sqrt(dot(self._mle, k * d, self._mle, k * d, d))
        if norm > bound:
            self.project(k, norm, bound)
        else:
            for a in range(d):
                self._theta[k * d + a] = self._mle[k * d + a]
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
                        self._index, self._algebra, self._gram)
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
                    self._index, self._algebra, self._gram)
        if not self._algebra.inverse(self._h, self._inv, vo + d * d, self._l, self._y_inv, d):
            raise ArithmeticError(f"server {k}'s Hessian is not positive definite")
        self.refits += 1

    @cython.cfunc
    def rank_one(self, k: cython.Py_ssize_t, xs: cython.double[::1], xo: cython.Py_ssize_t,
                 weight: cython.double) -> cython.void:
        """Sherman–Morrison on V⁻¹ (weight 1) and, when weight > 0, on H⁻¹
        (weight μ̇); leaves H⁻¹x in _hx. With u = Mx/√(1/w + xᵀMx), outer(u, u)
        is exactly symmetric, so both inverses stay symmetric."""
        d: cython.Py_ssize_t = self.dim
        vo: cython.Py_ssize_t = k * 2 * d * d
        ho: cython.Py_ssize_t = vo + d * d
        a: cython.Py_ssize_t
        b: cython.Py_ssize_t
        m: cython.Py_ssize_t = nonzeros(xs, xo, d, self._index)
        if 2 * m > d:
            m = d  # dense: the plain sums beat the gather
            for a in range(d):
                self._index[a] = a
        algebra: DenseAlgebra = self._algebra
        algebra.matvec(self._inv, vo, xs, xo, self._u, d, self._index, m)
        scale: cython.double = 1.0 / sqrt(1.0 + quad_or_dot(self._u, xs, xo, d, self._index, m))
        if weight > 0.0:
            algebra.matvec(self._inv, ho, xs, xo, self._uh, d, self._index, m)
            scale_h: cython.double = 1.0 / sqrt(1.0 / weight + quad_or_dot(self._uh, xs, xo, d, self._index, m))
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
        """θ_k: the radial projection of θ̂_k onto the ball, then (Filippi) the
        solver from there."""
        d: cython.Py_ssize_t = self.dim
        a: cython.Py_ssize_t
        self.projections += 1
        for a in range(d):
            self._theta[k * d + a] = self._mle[k * d + a] * (bound / norm)
        if self.filippi:
            self.projection_steps += filippi_solve(self._projection, self._x, k * self.capacity * d, self._n[k], self._mle, k * d,
                          self._inv, k * 2 * d * d, self.reg, bound, self._theta, k * d)

    def design(self, server: int):
        """V_k, rebuilt from the data (the estimator itself keeps only V_k⁻¹)."""
        X = self.features[server, :self.counts[server]]
        return self.ridge * np.eye(self.dim) + X.T @ X

    def width_column(self, server: int, contexts):
        """‖x‖_{V_k⁻¹} for every row x of ``contexts`` (numpy)."""
        return np.sqrt(((contexts @ self.design_inv[server]) * contexts).sum(axis=1))

    def mean_column(self, server: int, contexts):
        """μ(xᵀθ_k) for every row x of ``contexts`` (numpy)."""
        return 0.5 * (1.0 + np.tanh(0.5 * (contexts @ self.theta[server])))


@cython.cfunc
@cython.exceptval(check=False)
def quad_or_dot(u: cython.double[::1], xs: cython.double[::1], xo: cython.Py_ssize_t, d: cython.Py_ssize_t,
                index: cython.Py_ssize_t[::1], m: cython.Py_ssize_t) -> cython.double:
    """uᵀx over x's non-zeros in index[:m] (m = d: dense)."""
    return dot(u, 0, xs, xo, d) if m == d else sparse_dot(u, 0, xs, xo, index, m)


# ---------------------------------------------------------------- the cached scores

MASK64 = 0xFFFFFFFFFFFFFFFF  # unsigned 64-bit arithmetic wraps by itself in C; as plain Python it is masked


def row_keys(rows):
    """A key per row of the (n, d) float64 ``rows``, equal for rows equal bit
    for bit (so −0.0 and 0.0 differ, as in a comparison of their bytes) and
    only for them: 0, 1, … in order of first appearance, by a hash table of
    the rows' 64-bit words, O(n·d) (a sort of the rows' bytes costs
    O(n log n) comparisons)."""
    array = np.ascontiguousarray(rows, dtype=np.float64)
    if array.ndim != 2:
        raise ValueError(f"row_keys: rows must be (n, d), got shape {array.shape}")
    n: cython.Py_ssize_t = array.shape[0]
    d: cython.Py_ssize_t = array.shape[1]
    words: cython.ulonglong[::1] = array.view(np.uint64).reshape(-1)
    size: cython.Py_ssize_t = 1
    while size < 2 * n:
        size *= 2
    first_array = np.full(size, -1, dtype=np.intp)  # per slot, the first row of its content
    first: cython.Py_ssize_t[::1] = first_array
    keys_array = np.empty(n, dtype=np.intp)
    keys: cython.Py_ssize_t[::1] = keys_array
    i: cython.Py_ssize_t
    j: cython.Py_ssize_t
    row: cython.Py_ssize_t
    slot: cython.Py_ssize_t
    equal: cython.bint
    next_key: cython.Py_ssize_t = 0
    h: cython.ulonglong
    MIX: cython.ulonglong = 0xFF51AFD7ED558CCD
    for i in range(n):
        h = 0x9E3779B97F4A7C15
        for j in range(d):  # a multiply-xorshift mix of each word
            h = (h ^ words[i * d + j]) * MIX
            if not cython.compiled:
                h &= MASK64
            h ^= h >> 29
        slot = cython.cast(cython.Py_ssize_t, h & (size - 1))
        while True:
            row = first[slot]
            if row < 0:
                first[slot] = i
                keys[i] = next_key
                next_key += 1
                break
            equal = True
            for j in range(d):
                if words[row * d + j] != words[i * d + j]:
                    equal = False
                    break
            if equal:
                keys[i] = keys[row]
                break
            slot = (slot + 1) & (size - 1)
    return keys_array


@cython.cclass
class Scorer:
    """μ(xᵀθ_k), the bonus c_β·β_k·‖x‖_{V_k⁻¹} and their sum (the UCB index) of
    queued jobs, cached by arrival id: a round recomputes only the stale
    servers' columns and the rows of new arrivals. The quadratic forms
    q = xᵀV_k⁻¹x are cached per distinct context (identical contexts, frequent
    in a pool, share one entry, so their scores stay exactly equal and an exact
    tie goes to the earliest job) with the version of V_k⁻¹ they hold: one
    Sherman–Morrison update V_k⁻¹ −= u uᵀ behind, q −= (uᵀx)², O(d) instead
    of O(d²); further behind, q from V_k⁻¹ itself."""

    estimator = cython.declare(Estimator, visibility="readonly")
    contexts = cython.declare(object, visibility="readonly")  # (N, d)
    means = cython.declare(object, visibility="readonly")     # (N, K)
    bonuses = cython.declare(object, visibility="readonly")
    ucb = cython.declare(object, visibility="readonly")
    stale = cython.declare(object, visibility="readonly")     # (K,) bool: columns to refresh
    bonus_scale = cython.declare(cython.double, visibility="readonly")
    scored_until = cython.declare(cython.Py_ssize_t, visibility="readonly")  # ids below have full rows
    n_contexts: cython.Py_ssize_t
    _c: cython.double[::1]
    _means: cython.double[::1]
    _bonuses: cython.double[::1]
    _ucb: cython.double[::1]
    _key: cython.Py_ssize_t[::1]           # (N,): each arrival's distinct context
    _quads: cython.double[::1]             # (distinct contexts, K): xᵀV_k⁻¹x
    _quad_version: cython.longlong[::1]    # the version of V_k⁻¹ it is for (−1: none)
    _stale: cython.uchar[::1]
    _index: cython.Py_ssize_t[::1]

    def __init__(self, estimator: Estimator, contexts, bonus_scale: cython.double):
        self.estimator = estimator
        self.contexts = np.ascontiguousarray(contexts, dtype=np.float64)
        if self.contexts.ndim != 2 or self.contexts.shape[1] != estimator.dim:
            raise ValueError(f"contexts must be (N, {estimator.dim}), got shape {self.contexts.shape}")
        self.n_contexts = self.contexts.shape[0]
        K = estimator.n_servers
        self.means = np.zeros((self.n_contexts, K))
        self.bonuses = np.zeros((self.n_contexts, K))
        self.ucb = np.zeros((self.n_contexts, K))
        self.stale = np.zeros(K, dtype=bool)
        self.bonus_scale = bonus_scale
        self.scored_until = 0
        self._c = self.contexts.reshape(-1)
        self._means = self.means.reshape(-1)
        self._bonuses = self.bonuses.reshape(-1)
        self._ucb = self.ucb.reshape(-1)
        self._stale = self.stale.view(np.uint8)
        # one key per row content, bit for bit: a pool's repeated rows share their cached quadratic forms
        key = row_keys(self.contexts)
        self._key = key
        n_keys = int(key.max()) + 1 if self.n_contexts else 0
        self._quads = np.zeros(n_keys * K)
        self._quad_version = np.full(n_keys * K, -1, dtype=np.int64)
        self._index = np.zeros(estimator.dim, dtype=np.intp)

    @cython.cfunc
    @cython.exceptval(check=False)
    def score(self, job: cython.Py_ssize_t, k: cython.Py_ssize_t) -> cython.void:
        """Job's cell of column k, its q from the cache where it is current or
        one update behind."""
        est: Estimator = self.estimator
        d: cython.Py_ssize_t = est.dim
        K: cython.Py_ssize_t = est.n_servers
        xo: cython.Py_ssize_t = job * d
        cell: cython.Py_ssize_t = job * K + k
        entry: cython.Py_ssize_t = self._key[job] * K + k
        version: cython.longlong = est._versions[k]
        inner: cython.double
        linear: cython.double
        quad: cython.double
        m: cython.Py_ssize_t = nonzeros(self._c, xo, d, self._index)
        dense: cython.bint = 2 * m > d
        linear = dot(self._c, xo, est._theta, k * d, d) if dense else sparse_dot(self._c, xo, est._theta, k * d,
                                                                                    self._index, m)
        if self._quad_version[entry] == version:
            quad = self._quads[entry]
        elif self._quad_version[entry] == version - 1 and version > 0:
            inner = dot(self._c, xo, est._last_u, k * d, d) if dense else sparse_dot(self._c, xo, est._last_u, k * d,
                                                                                      self._index, m)
            quad = max(self._quads[entry] - inner * inner, 0.0)
        else:
            quad = quad_form(est._inv, k * 2 * d * d, self._c, xo, d, self._index, d if dense else m)
        self._quads[entry] = quad
        self._quad_version[entry] = version
        mean: cython.double = logistic(linear)
        bonus: cython.double = (self.bonus_scale * est._widths[k]) * sqrt(quad)
        self._means[cell] = mean
        self._bonuses[cell] = bonus
        self._ucb[cell] = mean + bonus

    @cython.ccall
    def refresh(self, queue: cython.longlong[::1], length: cython.Py_ssize_t):
        """The stale columns of the queued jobs, then the rows of new arrivals."""
        K: cython.Py_ssize_t = self.estimator.n_servers
        i: cython.Py_ssize_t
        k: cython.Py_ssize_t
        job: cython.Py_ssize_t
        lo: cython.Py_ssize_t
        hi: cython.Py_ssize_t
        mid: cython.Py_ssize_t
        if length <= 0:
            raise ValueError("the queue is empty")
        for i in range(length):
            if not 0 <= queue[i] < self.n_contexts:
                raise IndexError(f"arrival id {queue[i]} out of range ({self.n_contexts} contexts)")
        newest: cython.Py_ssize_t = queue[length - 1] + 1
        fresh: cython.Py_ssize_t = max(newest - self.scored_until, 0)
        n_old: cython.Py_ssize_t
        # new ids sit at the tail of the id-sorted queue; an explored newcomer
        # may have left unscored: then a binary search for the first unscored id
        if fresh == 0:
            n_old = length
        elif fresh <= length and queue[length - fresh] == self.scored_until:
            n_old = length - fresh
        else:
            lo, hi = 0, length
            while lo < hi:
                mid = (lo + hi) // 2
                if queue[mid] < self.scored_until:
                    lo = mid + 1
                else:
                    hi = mid
            n_old = lo
        for k in range(K):
            if self._stale[k]:
                for i in range(n_old):
                    self.score(queue[i], k)
                self._stale[k] = 0
        for job in range(self.scored_until, newest):
            for k in range(K):
                self.score(job, k)
        if newest > self.scored_until:
            self.scored_until = newest

    @cython.ccall
    def learn(self, job: cython.Py_ssize_t, server: cython.Py_ssize_t, success: cython.bint):
        """The outcome of serving arrival ``job`` at ``server``: the estimator's
        update with the job's context, and server's column goes stale."""
        if not 0 <= job < self.n_contexts:
            raise IndexError(f"job {job} out of range ({self.n_contexts} contexts)")
        if not 0 <= server < self.estimator.n_servers:
            raise IndexError(f"server {server} out of range (K = {self.estimator.n_servers})")
        self.estimator.add(server, self._c, job * self.estimator.dim, 1.0 if success else 0.0)
        self._stale[server] = 1


# ---------------------------------------------------------------- the policies' decisions

@cython.cclass
class Chooser:
    """A policy's per-round decision and learning. :meth:`choose` sets
    ``position`` (in the queue), ``server`` and ``explored``; :meth:`observe`
    takes the outcome. ``queue`` holds the waiting arrival ids, oldest first,
    in its first ``length`` entries."""

    position = cython.declare(cython.Py_ssize_t, visibility="readonly")
    server = cython.declare(cython.Py_ssize_t, visibility="readonly")
    explored = cython.declare(cython.bint, visibility="readonly")

    @cython.ccall
    def choose(self, t: cython.Py_ssize_t, queue: cython.longlong[::1], length: cython.Py_ssize_t,
               new_arrival: cython.bint):
        raise NotImplementedError

    @cython.ccall
    def observe(self, t: cython.Py_ssize_t, job: cython.Py_ssize_t, server: cython.Py_ssize_t,
                success: cython.bint):
        pass


@cython.cfunc
@cython.exceptval(check=False)
def ucb_argmax(scorer: Scorer, queue: cython.longlong[::1], length: cython.Py_ssize_t,
               chooser: Chooser) -> cython.void:
    """The (position, server) of the largest UCB index: the row-major first
    maximum (earliest job, then lowest server), a NaN winning as in numpy's argmax."""
    K: cython.Py_ssize_t = scorer.estimator.n_servers
    i: cython.Py_ssize_t
    k: cython.Py_ssize_t
    value: cython.double
    best: cython.double = scorer._ucb[queue[0] * K]
    chooser.position = 0
    chooser.server = 0
    chooser.explored = False
    if isnan(best):
        return
    for i in range(length):
        for k in range(K):
            value = scorer._ucb[queue[i] * K + k]
            if isnan(value):
                chooser.position, chooser.server = i, k
                return
            if value > best:
                best = value
                chooser.position, chooser.server = i, k


@cython.cclass
class OptimisticChooser(Chooser):
    """CQB-Opt: the UCB pair in every round. With ``explore_until`` > 0, the
    forced exploration of CQB-ε, CQB-ε-Opt and CQB-η-2 first: rounds t ≤ tau
    explore every fresh arrival (server round-robin or uniform); rounds
    tau < t ≤ explore_until explore a fresh arrival with probability
    explore_prob (uniform server)."""

    scorer = cython.declare(Scorer, visibility="readonly")
    rng = cython.declare(object, visibility="readonly")
    tau = cython.declare(cython.double, visibility="readonly")
    explore_prob = cython.declare(cython.double, visibility="readonly")
    explore_until = cython.declare(cython.double, visibility="readonly")
    round_robin = cython.declare(cython.bint, visibility="readonly")
    phase1_visits = cython.declare(cython.Py_ssize_t, visibility="readonly")

    def __init__(self, scorer: Scorer, rng=None, tau: cython.double = 0.0, explore_prob: cython.double = 0.0,
                 explore_until: cython.double = 0.0, round_robin: cython.bint = False):
        self.scorer = scorer
        self.rng = rng
        self.tau, self.explore_prob, self.explore_until = tau, explore_prob, explore_until
        self.round_robin = round_robin
        self.phase1_visits = 0

    @cython.ccall
    def choose(self, t: cython.Py_ssize_t, queue: cython.longlong[::1], length: cython.Py_ssize_t,
               new_arrival: cython.bint):
        K: cython.Py_ssize_t = self.scorer.estimator.n_servers
        if new_arrival and t <= self.explore_until:
            if t <= self.tau:
                if self.round_robin:
                    self.server = self.phase1_visits % K
                    self.phase1_visits += 1
                else:
                    self.server = self.rng.integers(K)
                self.position = length - 1
                self.explored = True
                return
            if self.rng.random() < self.explore_prob:
                self.server = self.rng.integers(K)
                self.position = length - 1
                self.explored = True
                return
        self.scorer.refresh(queue, length)
        ucb_argmax(self.scorer, queue, length, self)

    @cython.ccall
    def observe(self, t: cython.Py_ssize_t, job: cython.Py_ssize_t, server: cython.Py_ssize_t,
                success: cython.bint):
        self.scorer.learn(job, server, success)


@cython.cclass
class ThompsonChooser(Chooser):
    """CQB-TS, score mode: a standard normal z per queued (job, server) pair
    (rng.standard_normal((length, K))), the score mean + bonus·z, and its
    row-major first maximum, a NaN winning."""

    scorer = cython.declare(Scorer, visibility="readonly")
    rng = cython.declare(object, visibility="readonly")

    def __init__(self, scorer: Scorer, rng):
        self.scorer = scorer
        self.rng = rng

    @cython.ccall
    def choose(self, t: cython.Py_ssize_t, queue: cython.longlong[::1], length: cython.Py_ssize_t,
               new_arrival: cython.bint):
        scorer: Scorer = self.scorer
        K: cython.Py_ssize_t = scorer.estimator.n_servers
        i: cython.Py_ssize_t
        k: cython.Py_ssize_t
        cell: cython.Py_ssize_t
        score: cython.double
        best: cython.double = 0.0
        scorer.refresh(queue, length)
        noise: cython.double[::1] = self.rng.standard_normal((length, K)).reshape(-1)
        self.position, self.server, self.explored = 0, 0, False
        for i in range(length):
            for k in range(K):
                cell = queue[i] * K + k
                score = scorer._means[cell] + scorer._bonuses[cell] * noise[i * K + k]
                if isnan(score):
                    self.position, self.server = i, k
                    return
                if (i == 0 and k == 0) or score > best:
                    best = score
                    self.position, self.server = i, k

    @cython.ccall
    def observe(self, t: cython.Py_ssize_t, job: cython.Py_ssize_t, server: cython.Py_ssize_t,
                success: cython.bint):
        self.scorer.learn(job, server, success)


@cython.cclass
class QueueBanditChooser(Chooser):
    """Q-UCB and Q-ThS (Krishnasamy et al. 2021), context-blind, the oldest job:
    a uniform server with probability min(1, c·K·ln²t/t), else the server of
    the largest index: ŝ_k + √(ln²t/(2n_k)) (∞ untried), or (``sampling``) a
    Beta(s_k + 1, n_k − s_k + 1) draw."""

    successes = cython.declare(object, visibility="readonly")  # (K,) float64
    trials = cython.declare(object, visibility="readonly")
    rng = cython.declare(object, visibility="readonly")
    sampling = cython.declare(cython.bint, visibility="readonly")
    explore_constant = cython.declare(cython.double, visibility="readonly")
    n_servers: cython.Py_ssize_t
    _s: cython.double[::1]
    _n: cython.double[::1]

    def __init__(self, n_servers: cython.Py_ssize_t, rng, sampling: cython.bint, explore_constant: cython.double):
        self.n_servers = n_servers
        self.rng = rng
        self.sampling = sampling
        self.explore_constant = explore_constant
        self.successes = np.zeros(n_servers)
        self.trials = np.zeros(n_servers)
        self._s = self.successes
        self._n = self.trials

    @cython.ccall
    def choose(self, t: cython.Py_ssize_t, queue: cython.longlong[::1], length: cython.Py_ssize_t,
               new_arrival: cython.bint):
        K: cython.Py_ssize_t = self.n_servers
        k: cython.Py_ssize_t
        value: cython.double
        best: cython.double = 0.0
        log_t: cython.double = log(t)
        squared_log: cython.double = log_t * log_t
        explore_prob: cython.double = min(1.0, self.explore_constant * K * squared_log / t)
        self.position = 0
        self.explored = False
        if self.rng.random() < explore_prob:
            self.server = self.rng.integers(K)
            self.explored = True
            return
        self.server = 0
        if self.sampling:
            index: cython.double[::1] = self.rng.beta(self.successes + 1.0, self.trials - self.successes + 1.0)
            best = index[0]
            for k in range(K):
                if isnan(index[k]):
                    self.server = k
                    return
                if index[k] > best:
                    best = index[k]
                    self.server = k
            return
        for k in range(K):
            value = self._s[k] / self._n[k] + sqrt(squared_log / (2.0 * self._n[k])) if self._n[k] > 0 else INFINITY
            if k == 0 or value > best:
                best = value
                self.server = k

    @cython.ccall
    def observe(self, t: cython.Py_ssize_t, job: cython.Py_ssize_t, server: cython.Py_ssize_t,
                success: cython.bint):
        self._n[server] += 1.0
        if success:
            self._s[server] += 1.0


@cython.cclass
class RandomChooser(Chooser):
    """A uniform job and an independent uniform server (rng.integers twice)."""

    rng = cython.declare(object, visibility="readonly")
    n_servers: cython.Py_ssize_t

    def __init__(self, n_servers: cython.Py_ssize_t, rng):
        self.n_servers = n_servers
        self.rng = rng

    @cython.ccall
    def choose(self, t: cython.Py_ssize_t, queue: cython.longlong[::1], length: cython.Py_ssize_t,
               new_arrival: cython.bint):
        self.position = self.rng.integers(length)
        self.server = self.rng.integers(self.n_servers)
        self.explored = True


@cython.cclass
class OracleChooser(Chooser):
    """π*: the waiting job of highest best true mean (the earliest on ties) at
    its best server (the lowest index on ties)."""

    _best_mean: cython.double[::1]
    _best_server: cython.longlong[::1]

    def __init__(self, true_means):
        true_means = np.asarray(true_means, dtype=np.float64)
        self._best_mean = np.ascontiguousarray(true_means.max(axis=1)) if true_means.shape[0] else np.zeros(0)
        self._best_server = np.ascontiguousarray(true_means.argmax(axis=1), dtype=np.longlong) \
            if true_means.shape[0] else np.zeros(0, dtype=np.longlong)

    @cython.ccall
    def choose(self, t: cython.Py_ssize_t, queue: cython.longlong[::1], length: cython.Py_ssize_t,
               new_arrival: cython.bint):
        i: cython.Py_ssize_t
        best_position: cython.Py_ssize_t = 0
        best: cython.double = self._best_mean[queue[0]]
        for i in range(1, length):
            if self._best_mean[queue[i]] > best:
                best = self._best_mean[queue[i]]
                best_position = i
        self.position = best_position
        self.server = self._best_server[queue[best_position]]
        self.explored = False


@cython.cclass
class PolicyChooser(Chooser):
    """A plugin policy (any object with choose(t, queue, new_arrival) →
    (position, server, explored) and observe(t, job, server, success)) called
    through Python, so it runs through the same round loop. With ``record``
    (a dict), what the loop gave it: "rounds", "new_arrival", "jobs"."""

    policy = cython.declare(object, visibility="readonly")
    queue_array = cython.declare(object, visibility="public")  # the loop's queue, as numpy
    record = cython.declare(object, visibility="readonly")

    def __init__(self, policy, record=None):
        self.policy = policy
        self.record = record

    @cython.ccall
    def choose(self, t: cython.Py_ssize_t, queue: cython.longlong[::1], length: cython.Py_ssize_t,
               new_arrival: cython.bint):
        position, server, explored = self.policy.choose(t, self.queue_array[:length], bool(new_arrival))
        self.position, self.server, self.explored = position, server, explored
        if self.record is not None:
            self.record["rounds"].append(t)
            self.record["new_arrival"].append(bool(new_arrival))

    @cython.ccall
    def observe(self, t: cython.Py_ssize_t, job: cython.Py_ssize_t, server: cython.Py_ssize_t,
                success: cython.bint):
        if self.record is not None:
            self.record["jobs"].append(job)
        self.policy.observe(t, job, server, bool(success))


# ---------------------------------------------------------------- the round loop

@cython.cfunc
@cython.exceptval(check=False)
def heap_push(keys: cython.double[::1], ids: cython.longlong[::1], size: cython.Py_ssize_t, key: cython.double,
              job: cython.longlong) -> cython.Py_ssize_t:
    """Push (key, job) on the max-heap of ``size`` entries; the new size."""
    i: cython.Py_ssize_t = size
    parent: cython.Py_ssize_t
    while i > 0:
        parent = (i - 1) // 2
        if not keys[parent] < key:
            break
        keys[i] = keys[parent]
        ids[i] = ids[parent]
        i = parent
    keys[i] = key
    ids[i] = job
    return size + 1


@cython.cfunc
@cython.exceptval(check=False)
def heap_pop(keys: cython.double[::1], ids: cython.longlong[::1], size: cython.Py_ssize_t) -> cython.Py_ssize_t:
    """Drop the top of the max-heap; the new size."""
    size -= 1
    key: cython.double = keys[size]
    job: cython.longlong = ids[size]
    i: cython.Py_ssize_t = 0
    child: cython.Py_ssize_t
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and keys[child + 1] > keys[child]:
            child += 1
        if not keys[child] > key:
            break
        keys[i] = keys[child]
        ids[i] = ids[child]
        i = child
    keys[i] = key
    ids[i] = job
    return size


def loop_inputs(arrivals, service, means, means_name: str):
    """A trace's arrays as the loops read them (C-contiguous, typed), after
    the check that they belong together: one service uniform per round, a
    row of ``means`` per arriving job."""
    arrivals_array = np.ascontiguousarray(arrivals, dtype=np.uint8)
    service_array = np.ascontiguousarray(service, dtype=np.float64)
    means_array = np.ascontiguousarray(means, dtype=np.float64)
    if service_array.shape[0] != arrivals_array.shape[0] or int(arrivals_array.sum()) > means_array.shape[0]:
        raise ValueError(f"the trace's arrivals, service uniforms and {means_name} do not match")
    return arrivals_array, service_array, means_array


def play_rounds(chooser: Chooser, arrivals, service, true_means):
    """SPEC §1's round loop for one policy on a trace: Q(t) before the
    decision; with a queue, the chooser's pair, the gap to the best waiting
    job's mean (a max-heap of the queued jobs' best true means, departed jobs
    dropped when they reach the top), the service coin U₂(t) ≤ μ of the pair,
    the outcome to the chooser, the departure; then the arrival, which waits
    from round t + 1. Returns (queue length, gap, explored, departures), each (T,)."""
    arrivals_array, service_array, means_array = loop_inputs(arrivals, service, true_means, "true means")
    horizon: cython.Py_ssize_t = arrivals_array.shape[0]
    n_jobs: cython.Py_ssize_t = means_array.shape[0]
    K: cython.Py_ssize_t = means_array.shape[1] if means_array.ndim == 2 else 0
    queue_length_out = np.zeros(horizon, dtype=np.int64)
    gap_out = np.full(horizon, np.nan)
    explored_out = np.zeros(horizon, dtype=bool)
    departures_out = np.zeros(horizon, dtype=bool)
    queue_array = np.zeros(horizon + 1, dtype=np.longlong)  # arrival ids, oldest first
    if isinstance(chooser, PolicyChooser):
        chooser.queue_array = queue_array
    best_mean_array = np.ascontiguousarray(means_array.max(axis=1)) if n_jobs else np.zeros(0)
    a_in: cython.uchar[::1] = arrivals_array
    u_in: cython.double[::1] = service_array
    mu_in: cython.double[::1] = means_array.reshape(-1)
    best_mean: cython.double[::1] = best_mean_array
    q_out: cython.longlong[::1] = queue_length_out
    gap: cython.double[::1] = gap_out
    explored: cython.uchar[::1] = explored_out.view(np.uint8)
    departures: cython.uchar[::1] = departures_out.view(np.uint8)
    queue: cython.longlong[::1] = queue_array
    departed: cython.uchar[::1] = np.zeros(n_jobs + 1, dtype=np.uint8)
    heap_keys: cython.double[::1] = np.zeros(n_jobs + 1)
    heap_ids: cython.longlong[::1] = np.zeros(n_jobs + 1, dtype=np.longlong)
    heap_size: cython.Py_ssize_t = 0
    length: cython.Py_ssize_t = 0
    next_id: cython.longlong = 0
    t: cython.Py_ssize_t
    position: cython.Py_ssize_t
    server: cython.Py_ssize_t
    job: cython.longlong
    chosen_mean: cython.double
    success: cython.bint
    for t in range(1, horizon + 1):
        if cython.compiled and t % SIGNAL_CHECK_ROUNDS == 0:
            PyErr_CheckSignals()  # raises the handler's exception (KeyboardInterrupt) here
        q_out[t - 1] = length
        if length:
            chooser.choose(t, queue, length, t >= 2 and a_in[t - 2] != 0)
            position, server = chooser.position, chooser.server
            if not (0 <= position < length and 0 <= server < K):
                raise IndexError(f"the policy chose (position {position}, server {server}) out of range "
                                 f"(queue of {length}, K = {K})")
            explored[t - 1] = chooser.explored
            job = queue[position]
            chosen_mean = mu_in[job * K + server]
            while departed[heap_ids[0]]:
                heap_size = heap_pop(heap_keys, heap_ids, heap_size)
            gap[t - 1] = heap_keys[0] - chosen_mean
            success = u_in[t - 1] <= chosen_mean
            chooser.observe(t, job, server, success)
            if success:
                departures[t - 1] = 1
                departed[job] = 1
                for position in range(position, length - 1):
                    queue[position] = queue[position + 1]
                length -= 1
        if a_in[t - 1]:
            queue[length] = next_id
            length += 1
            heap_size = heap_push(heap_keys, heap_ids, heap_size, best_mean[next_id], next_id)
            next_id += 1
    return queue_length_out, gap_out, explored_out, departures_out


def oracle_queue_lengths(arrivals, service, best_means):
    """Q*(t), t = 1..T, of π* on a trace, by a max-heap of the waiting jobs'
    best true means instead of a scan of the queue: a round serves the top job
    when U₂(t) ≤ its mean. Which of several jobs of equal mean is served leaves
    the same multiset of means waiting, so the path is π*'s (the earliest job
    on ties) whatever the heap's order among ties (tests/test_sim_simulate.py
    plays the oracle policy through :func:`play_rounds` against it)."""
    arrivals_array, service_array, means_array = loop_inputs(arrivals, service, best_means, "best means")
    horizon: cython.Py_ssize_t = arrivals_array.shape[0]
    n_jobs: cython.Py_ssize_t = means_array.shape[0]
    queue_length_out = np.zeros(horizon, dtype=np.int64)
    a_in: cython.uchar[::1] = arrivals_array
    u_in: cython.double[::1] = service_array
    best_mean: cython.double[::1] = means_array
    q_out: cython.longlong[::1] = queue_length_out
    heap_keys: cython.double[::1] = np.zeros(n_jobs + 1)
    heap_ids: cython.longlong[::1] = np.zeros(n_jobs + 1, dtype=np.longlong)
    size: cython.Py_ssize_t = 0
    next_id: cython.longlong = 0
    t: cython.Py_ssize_t
    for t in range(horizon):
        q_out[t] = size
        if size and u_in[t] <= heap_keys[0]:
            size = heap_pop(heap_keys, heap_ids, size)
        if a_in[t]:
            size = heap_push(heap_keys, heap_ids, size, best_mean[next_id], next_id)
            next_id += 1
    return queue_length_out


# ---------------------------------------------------------------- the sampler's screen

def draw_screened(rng, n_rows: cython.Py_ssize_t, theta, low: cython.double, high: cython.double):
    """The rejection sampler's draws and its screen in one pass: ``n_rows`` raw
    draws from U(−1, 1)^d, the very doubles ``rng.uniform(-1, 1, (n_rows, d))``
    returns (−1 + 2u for each of the Generator's next uniforms u, row by row),
    each coded by its largest score max_k (x·θ_k)/‖x‖ (x not yet scaled to
    unit length): 1 if ≥ ``high``, 0 if ≤ ``low``, 2 (undecided) in between;
    returns the rows coded 1 or 2, in draw order, and their codes. Compiled, the uniforms come one at a time from the
    Generator's bit generator (numpy's documented ``bitgen_t`` of its
    capsule), so the 10⁵–10⁶ draws of a run are never held in memory; as
    plain Python, from ``rng.random``."""
    theta_array = np.ascontiguousarray(theta, dtype=np.float64)
    if theta_array.ndim != 2 or n_rows < 0:
        raise ValueError("draw_screened: theta (K, d) and n_rows ≥ 0")
    K: cython.Py_ssize_t = theta_array.shape[0]
    d: cython.Py_ssize_t = theta_array.shape[1]
    th: cython.double[::1] = theta_array.reshape(-1)
    capacity: cython.Py_ssize_t = n_rows // 16 + 16
    kept_array = np.empty((capacity, d))
    codes_array = np.empty(capacity, dtype=np.uint8)
    kept: cython.double[::1] = kept_array.reshape(-1)
    codes: cython.uchar[::1] = codes_array
    row: cython.double[::1] = np.empty(d)
    i: cython.Py_ssize_t
    j: cython.Py_ssize_t
    k: cython.Py_ssize_t
    m: cython.Py_ssize_t = 0
    code: cython.int
    squares: cython.double
    best: cython.double
    score: cython.double
    bits: cython.pointer(bitgen_t)
    uniforms: cython.double[::1]
    if not cython.compiled:
        uniforms = rng.random(n_rows * d)
    with rng.bit_generator.lock:  # as the Generator's own methods hold it
        if cython.compiled:
            bits = cython.cast(cython.pointer(bitgen_t),
                               PyCapsule_GetPointer(rng.bit_generator.capsule, b"BitGenerator"))
        for i in range(n_rows):
            for j in range(d):
                if cython.compiled:
                    row[j] = -1.0 + 2.0 * bits.next_double(bits.state)
                else:
                    row[j] = -1.0 + 2.0 * uniforms[i * d + j]
            # the screen: the largest score max_k (x·θ_k)/‖x‖ against the cuts
            squares = 0.0
            for j in range(d):
                squares += row[j] * row[j]
            best = -INFINITY
            for k in range(K):
                score = 0.0
                for j in range(d):
                    score += row[j] * th[k * d + j]
                best = score if score > best else best  # a max instruction, not a branch
            best = best / sqrt(squares)  # μ and 1/‖x‖ > 0 keep the order: scale the best score only
            code = 1 if best >= high else 0 if best <= low else 2
            if code:
                if m == capacity:  # grows as a list does: rare, accept rates are a few percent
                    capacity *= 2
                    kept_array = np.resize(kept_array, (capacity, d))
                    codes_array = np.resize(codes_array, capacity)
                    kept = kept_array.reshape(-1)
                    codes = codes_array
                for j in range(d):
                    kept[m * d + j] = row[j]
                codes[m] = code
                m += 1
    return kept_array[:m].copy(), codes_array[:m].copy()


COMPILED = cython.compiled
