"""Small dense algebra of the simulation kernels, on flat C-contiguous double
arrays read from an offset: μ, dot products (dense, or over a row's non-zero
entries), M·x and xᵀMx, the regularised logistic log-loss's Newton pass,
Cholesky, and the inverse of a symmetric positive definite matrix. Declared
in _algebra.pxd, which the other kernels cimport."""

import cython
import numpy as np

if cython.compiled:
    from cython.cimports.libc.math import sqrt, tanh
else:
    from math import sqrt, tanh

    def at(array):
        """Uncompiled: an array stands for the pointer to its start (the
        compiled at(), inline in _algebra.pxd, takes its address), so the
        helpers that take pointers read p[offset + j] either way."""
        return array

    index_at = at


@cython.cfunc
@cython.exceptval(check=False)
def logistic(z: cython.double) -> cython.double:
    """μ(z) = 1/(1 + e^(−z)), as (1 + tanh(z/2))/2: stable for any z. The
    simulation's one μ: the estimators, the scores, the projection and (by
    :func:`logistic_values`) the true means all take it from here."""
    return 0.5 * (1.0 + tanh(0.5 * z))


def logistic_values(z):
    """:func:`logistic` of every entry of ``z`` (an array of any shape), for the
    numpy side (numpy's own tanh rounds differently from the C library's)."""
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
    """out = M x for a d×d M at mat[mo:], x's non-zeros in index[:m] (m = d: dense)."""
    a: cython.Py_ssize_t
    row: cython.Py_ssize_t
    for a in range(d):
        row = mo + a * d
        out[a] = row_dot(mat, row, x, xo, d, index, m)


@cython.cfunc
@cython.exceptval(check=False)
def quad_form(mat: cython.p_double, mo: cython.Py_ssize_t, x: cython.p_double, xo: cython.Py_ssize_t,
              d: cython.Py_ssize_t, index: cython.pointer(cython.Py_ssize_t), m: cython.Py_ssize_t) -> cython.double:
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


@cython.cfunc
@cython.exceptval(check=False)
def newton_pass(x: cython.double[::1], xo: cython.Py_ssize_t, y: cython.double[::1], yo: cython.Py_ssize_t,
                n: cython.Py_ssize_t, d: cython.Py_ssize_t, theta: cython.double[::1], to: cython.Py_ssize_t,
                reg: cython.double, grad: cython.double[::1], with_grad: cython.bint, h: cython.double[::1],
                index: cython.Py_ssize_t[::1]) -> cython.void:
    """One pass over the n samples (rows x[xo:], outcomes y[yo:]) at θ = theta[to:]:
    the Hessian h = Σ μ̇_i x_i x_iᵀ + λ₀I of the regularised log-loss and, if
    ``with_grad``, its gradient Σ (μ_i − y_i) x_i + λ₀θ into grad; each row
    over its non-zero entries only."""
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
    for i in range(n):
        row = xo + i * d
        m = row_support(at(x), row, d, index_at(index))
        mu = logistic(row_dot(at(theta), to, at(x), row, d, index_at(index), m))
        if with_grad:
            r = mu - y[yo + i]
            for p in range(m):
                grad[index[p]] += r * x[row + index[p]]
        add_gram_row(at(h), d, at(x), row, index_at(index), m, logistic_slope(mu))
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
    for p in range(m):
        a = index[p]
        wa = weight * x[row + a]  # (w x_a) x_b: the product's left operand as written, so the same bits
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
