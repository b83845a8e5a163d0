"""Small dense algebra of the simulation kernels, on flat C-contiguous double
arrays read from an offset: μ, dot products (dense, or over a row's non-zero
entries), M·x and xᵀMx, the regularised logistic log-loss's Newton pass,
Cholesky, and the inverse of a symmetric positive definite matrix; and
:class:`DenseAlgebra`, the estimator's O(d²) and O(d³) steps, by these loops
or (cqb.sim._blas, for large d) by BLAS/LAPACK. Declared in _algebra.pxd,
which the other kernels cimport."""

import cython
import numpy as np

if cython.compiled:
    from cython.cimports.libc.math import exp, fabs, sqrt
else:
    from math import exp, fabs, sqrt

    def at(array):
        """Uncompiled, an array stands for the pointer to its start (at() in _algebra.pxd)."""
        return array

    index_at = at

    def index_from(array, offset):
        """Uncompiled, a view from offset stands for the pointer there (index_from() in _algebra.pxd)."""
        return array[offset:]


@cython.cfunc
@cython.exceptval(check=False)
def logistic(z: cython.double) -> cython.double:
    """μ(z) = 1/(1 + e^(−z)) by one exp of −|z| (never overflows; a tanh costs
    about twice as much), μ(−|z|) = e^(−|z|)·μ(|z|) for z < 0. The
    simulation's one μ: the estimators, the scores, the projection and (by
    :func:`logistic_values`) the true means all take it from here."""
    e: cython.double = exp(-fabs(z))
    p: cython.double = 1.0 / (1.0 + e)
    return p if z >= 0.0 else e * p


def logistic_values(z):
    """:func:`logistic` of every entry of ``z`` (an array of any shape), for the
    numpy side (numpy's own exp may round differently from the C library's)."""
    values = np.array(z, dtype=np.float64, order="C")  # a copy, in the shape of z
    flat: cython.double[::1] = values.reshape(-1)
    i: cython.Py_ssize_t
    for i in range(flat.shape[0]):
        flat[i] = logistic(flat[i])
    return values


@cython.cfunc
@cython.exceptval(check=False)
def dot(a: cython.p_double, ao: cython.Py_ssize_t, b: cython.p_double, bo: cython.Py_ssize_t,
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
def nonzeros(x: cython.p_double, xo: cython.Py_ssize_t, d: cython.Py_ssize_t,
             index: cython.pointer(cython.Py_ssize_t)) -> cython.Py_ssize_t:
    """The positions of x's non-zero entries, into index; their count."""
    m: cython.Py_ssize_t = 0
    a: cython.Py_ssize_t
    for a in range(d):
        if x[xo + a] != 0.0:
            index[m] = a
            m += 1
    return m


@cython.cfunc
@cython.exceptval(check=False)
def row_support(x: cython.p_double, xo: cython.Py_ssize_t, d: cython.Py_ssize_t,
                index: cython.pointer(cython.Py_ssize_t)) -> cython.Py_ssize_t:
    """The one rule for dense or sparse rows: the entries of x[xo:xo + d] a sum
    over the row takes, into index, and their count m: every entry (m = d,
    dense) if more than half are non-zero, where the plain sums beat the
    gather; else the non-zeros. The sums below read m = d as dense."""
    a: cython.Py_ssize_t
    m: cython.Py_ssize_t = nonzeros(x, xo, d, index)
    if 2 * m > d:
        for a in range(d):
            index[a] = a
        return d
    return m


@cython.cfunc
@cython.exceptval(check=False)
def row_dot(a: cython.p_double, ao: cython.Py_ssize_t, x: cython.p_double, xo: cython.Py_ssize_t,
            d: cython.Py_ssize_t, index: cython.pointer(cython.Py_ssize_t), m: cython.Py_ssize_t) -> cython.double:
    """aᵀx over the row x's entries in index[:m] (m = d: dense, by :func:`dot`)."""
    return dot(a, ao, x, xo, d) if m == d else sparse_dot(a, ao, x, xo, index, m)


@cython.cfunc
@cython.exceptval(check=False)
def sparse_dot(a: cython.p_double, ao: cython.Py_ssize_t, b: cython.p_double, bo: cython.Py_ssize_t,
               index: cython.pointer(cython.Py_ssize_t), m: cython.Py_ssize_t) -> cython.double:
    """Σ a[ao + i] b[bo + i] over i in index[:m], in that order, one sum."""
    p: cython.Py_ssize_t
    s: cython.double = 0.0
    for p in range(m):
        s += a[ao + index[p]] * b[bo + index[p]]
    return s


@cython.cfunc
@cython.exceptval(check=False)
def sym_matvec(mat: cython.p_double, mo: cython.Py_ssize_t, x: cython.p_double, xo: cython.Py_ssize_t,
               out: cython.p_double, d: cython.Py_ssize_t, index: cython.pointer(cython.Py_ssize_t),
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
def quad_form(mat: cython.p_double, mo: cython.Py_ssize_t, x: cython.p_double, xo: cython.Py_ssize_t,
              d: cython.Py_ssize_t, index: cython.pointer(cython.Py_ssize_t), m: cython.Py_ssize_t) -> cython.double:
    """xᵀ M x over x's non-zeros in index[:m] (m = d: dense)."""
    total: cython.double = 0.0
    a: cython.Py_ssize_t
    if m == d:
        for a in range(d):
            total += dot(mat, mo + a * d, x, xo, d) * x[xo + a]
        return total
    inner: cython.double
    p: cython.Py_ssize_t
    q: cython.Py_ssize_t
    for p in range(m):
        inner = 0.0
        for q in range(m):
            inner += mat[mo + index[p] * d + index[q]] * x[xo + index[q]]
        total += inner * x[xo + index[p]]
    return total


# From this dimension up, the estimator's refits and rank-one updates call
# BLAS/LAPACK (cqb.sim._blas) instead of the loops. Side by side (two
# estimators, BLAS and the loops, on the same 2500 updates, alternating, one
# BLAS thread, under load), BLAS/loops: dense contexts 0.80 at d = 15-25,
# 0.70 at 40; sparse ones (3-4 non-zeros) 0.97-1.03 at d = 15-25, 0.92 at 40.
# Lower, the gain would not repay the ~0.2 s a process pays to load
# scipy.linalg (a run at d = 20 takes ~30 ms): the instances at d = 5 and 20
# keep the loops (and their bits), those at d = 49, 60 and 120 use BLAS.
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
        """h's upper triangle += Σ_i r_i r_iᵀ over the n rows r_i of rows (n × d)."""
        i: cython.Py_ssize_t
        every: cython.Py_ssize_t[::1] = np.arange(d, dtype=np.intp)  # the reference only: never on a hot path
        for i in range(n):
            add_gram_row(at(h), d, at(rows), i * d, index_at(every), d, 1.0)

    @cython.cfunc
    @cython.exceptval(check=False)
    def matvec(self, mat: cython.double[::1], mo: cython.Py_ssize_t, x: cython.double[::1], xo: cython.Py_ssize_t,
               out: cython.double[::1], d: cython.Py_ssize_t, index: cython.Py_ssize_t[::1],
               m: cython.Py_ssize_t) -> cython.void:
        sym_matvec(at(mat), mo, at(x), xo, at(out), d, index_at(index), m)

    @cython.cfunc
    @cython.exceptval(check=False)
    def subtract_outer(self, mat: cython.double[::1], mo: cython.Py_ssize_t, u: cython.double[::1],
                       d: cython.Py_ssize_t) -> cython.void:
        subtract_outer(at(mat), mo, at(u), d)


def dense_algebra(d: cython.Py_ssize_t) -> DenseAlgebra:
    """The loops below BLAS_MIN_DIM (and when running uncompiled), else
    cqb.sim._blas's BLAS/LAPACK calls: imported here, at the first estimator
    that needs it, so that the processes of smaller instances never load
    scipy.linalg (~0.2 s)."""
    if d < BLAS_MIN_DIM or not cython.compiled:
        return DenseAlgebra()
    from .core import blas_module  # checked to be built from its source, like the kernels

    return blas_module().BlasAlgebra()


@cython.cfunc
@cython.exceptval(check=False)
def newton_pass(x: cython.double[::1], xo: cython.Py_ssize_t, y: cython.double[::1], yo: cython.Py_ssize_t,
                n: cython.Py_ssize_t, d: cython.Py_ssize_t, theta: cython.double[::1], to: cython.Py_ssize_t,
                reg: cython.double, grad: cython.double[::1], with_grad: cython.bint, h: cython.double[::1],
                support: cython.Py_ssize_t[::1], support_len: cython.Py_ssize_t[::1], so: cython.Py_ssize_t,
                algebra: DenseAlgebra, gram: cython.double[::1]) -> cython.void:
    """One pass over the n samples (rows x[xo:], outcomes y[yo:]) at θ = theta[to:]:
    the Hessian h = Σ μ̇_i x_i x_iᵀ + λ₀I of the regularised log-loss and, if
    ``with_grad``, its gradient Σ (μ_i − y_i) x_i + λ₀θ into grad; each row
    over its :func:`row_support`, kept from when it was stored (sample i's at
    support[(so + i)*d], support_len[so + i] entries). Where
    ``algebra.batches_gram``, the dense rows go scaled by √μ̇_i into gram and
    into h in one algebra.add_gram."""
    g: cython.Py_ssize_t = 0
    s: cython.double
    i: cython.Py_ssize_t
    a: cython.Py_ssize_t
    p: cython.Py_ssize_t
    m: cython.Py_ssize_t
    row: cython.Py_ssize_t
    mu: cython.double
    r: cython.double
    for a in range(d * d):
        h[a] = 0.0
    if with_grad:
        for a in range(d):
            grad[a] = reg * theta[to + a]
    index: cython.pointer(cython.Py_ssize_t)
    for i in range(n):
        row = xo + i * d
        m = support_len[so + i]
        index = index_from(support, (so + i) * d)
        mu = logistic(row_dot(at(theta), to, at(x), row, d, index, m))
        if with_grad:
            r = mu - y[yo + i]
            for p in range(m):
                grad[index[p]] += r * x[row + index[p]]
        if m == d and algebra.batches_gram:
            s = sqrt(logistic_slope(mu))
            for a in range(d):
                gram[g * d + a] = s * x[row + a]
            g += 1
        else:
            add_gram_row(at(h), d, at(x), row, index, m, logistic_slope(mu))
    if g > 0:
        algebra.add_gram(gram, g, d, h)
    for a in range(d):
        h[a * d + a] += reg
    mirror_upper(h, d)


@cython.cfunc
@cython.exceptval(check=False)
def logistic_slope(mu: cython.double) -> cython.double:
    """μ̇ = μ(1 − μ) at μ = μ(z): the weight of a row in the logistic log-loss's Hessian."""
    return mu * (1.0 - mu)


@cython.cfunc
@cython.exceptval(check=False)
def add_gram_row(mat: cython.p_double, d: cython.Py_ssize_t, x: cython.p_double, row: cython.Py_ssize_t,
                 index: cython.pointer(cython.Py_ssize_t), m: cython.Py_ssize_t, weight: cython.double) -> cython.void:
    """The upper triangle of the d×d mat += weight · x xᵀ, over the row x's
    entries in index[:m]: a term of the logistic Hessian Σ μ̇_i x_i x_iᵀ
    (weight μ̇_i), and of the projection's second-order term."""
    p: cython.Py_ssize_t
    q: cython.Py_ssize_t
    a: cython.Py_ssize_t
    wa: cython.double
    if m == d:  # contiguous, which the compiler vectorises; the gather below would not be
        for a in range(d):
            wa = weight * x[row + a]  # (w x_a) x_b: the product's left operand as written, so the same bits
            for q in range(a, d):
                mat[a * d + q] += wa * x[row + q]
        return
    for p in range(m):
        a = index[p]
        wa = weight * x[row + a]
        for q in range(p, m):
            mat[a * d + index[q]] += wa * x[row + index[q]]


@cython.cfunc
@cython.exceptval(check=False)
def mirror_upper(mat: cython.double[::1], d: cython.Py_ssize_t) -> cython.void:
    """The lower triangle of the d×d mat from its upper one."""
    a: cython.Py_ssize_t
    b: cython.Py_ssize_t
    for a in range(d):
        for b in range(a + 1, d):
            mat[b * d + a] = mat[a * d + b]


@cython.cfunc
@cython.exceptval(check=False)
def subtract_outer(mat: cython.p_double, mo: cython.Py_ssize_t, u: cython.p_double,
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
            s = a[i * d + j] - dot(at(l), i * d, at(l), j * d, j)
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
        b[i] = (b[i] - dot(at(l), i * d, at(b), 0, i)) / l[i * d + i]
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
            s = dot(at(y), i * d + j, at(y), j * d + j, d - j)
            out[oo + i * d + j] = s
            out[oo + j * d + i] = s
    return True
