"""The estimator's dense algebra by BLAS/LAPACK (scipy.linalg.cython_blas and
cython_lapack: direct C calls), for d ≥ BLAS_MIN_DIM (cqb.sim._algebra).

Imported only by cqb.sim._algebra.dense_algebra (through cqb.sim.core.blas_module), at the first estimator that
needs it: loading it loads scipy.linalg (~0.2 s), which smaller instances
never pay. Compiled only: uncompiled, the core keeps its loops at every d.

The matrices are row-major and symmetric, so BLAS (column-major) sees each
transposed: a row-major lower triangle is its upper one. Bits: BLAS's sums
run in another order than the loops' (and may fuse multiply-adds), so the
last bits differ from the loops' and may differ between CPU models (the
kernels OpenBLAS picks); they are the same for any number of threads, as
loading this module (cqb.sim.core.blas_module) pins BLAS to one thread
(tests/test_sim_blas.py runs one run under 1, 2 and 4 threads).
"""

import cython

if cython.compiled:
    from cython.cimports.cqb.sim._algebra import DenseAlgebra
    from cython.cimports.scipy.linalg.cython_blas import dger, dsymv, dsyrk
    from cython.cimports.scipy.linalg.cython_lapack import dpotrf, dpotri, dpotrs
else:  # pragma: no cover - the core never picks this class uncompiled
    raise ImportError("cqb.sim._blas runs compiled only")


@cython.cclass
class BlasAlgebra(DenseAlgebra):
    """cqb.sim._algebra.DenseAlgebra's steps by BLAS/LAPACK; M x by dsymv for a
    dense x only (a sparse x keeps the loops' gather)."""

    def __init__(self):
        self.batches_gram = True

    @cython.cfunc
    @cython.exceptval(check=False)
    def factor(self, a: cython.double[::1], l: cython.double[::1], d: cython.Py_ssize_t) -> cython.bint:
        """L (lower, row-major, upper part zero) with L Lᵀ = a: LAPACK's upper
        factor U = Lᵀ of the column-major a."""
        n: cython.int = d
        info: cython.int = 0
        i: cython.Py_ssize_t
        j: cython.Py_ssize_t
        for i in range(d * d):
            l[i] = a[i]
        dpotrf(b"U", cython.address(n), cython.address(l[0]), cython.address(n), cython.address(info))
        if info != 0:
            return False
        for i in range(d):
            for j in range(i + 1, d):
                l[i * d + j] = 0.0
        return True

    @cython.cfunc
    @cython.exceptval(check=False)
    def solve(self, l: cython.double[::1], b: cython.double[::1], d: cython.Py_ssize_t) -> cython.void:
        n: cython.int = d
        one: cython.int = 1
        info: cython.int = 0
        dpotrs(b"U", cython.address(n), cython.address(one), cython.address(l[0]), cython.address(n),
               cython.address(b[0]), cython.address(n), cython.address(info))

    @cython.cfunc
    @cython.exceptval(check=False)
    def inverse(self, a: cython.double[::1], out: cython.double[::1], oo: cython.Py_ssize_t, l: cython.double[::1],
                y: cython.double[::1], d: cython.Py_ssize_t) -> cython.bint:
        """out[oo:oo + d²] = a⁻¹ by dpotrf and dpotri (into y); each entry is
        written to both triangles from the one LAPACK computed, so a⁻¹ is
        exactly symmetric."""
        n: cython.int = d
        info: cython.int = 0
        i: cython.Py_ssize_t
        j: cython.Py_ssize_t
        s: cython.double
        if not self.factor(a, y, d):  # dpotri reads only the factor's triangle
            return False
        dpotri(b"U", cython.address(n), cython.address(y[0]), cython.address(n), cython.address(info))
        if info != 0:
            return False
        for i in range(d):  # column-major upper = row-major lower: y[i, j] for j ≤ i
            for j in range(i + 1):
                s = y[i * d + j]
                out[oo + i * d + j] = s
                out[oo + j * d + i] = s
        return True

    @cython.cfunc
    @cython.exceptval(check=False)
    def add_gram(self, rows: cython.double[::1], n: cython.Py_ssize_t, d: cython.Py_ssize_t,
                 h: cython.double[::1]) -> cython.void:
        """h's row-major upper triangle += rowsᵀ rows: dsyrk on the column-major
        d × n matrix whose columns are the rows, into its lower triangle."""
        dn: cython.int = d
        k: cython.int = n
        one: cython.double = 1.0
        dsyrk(b"L", b"N", cython.address(dn), cython.address(k), cython.address(one), cython.address(rows[0]),
              cython.address(dn), cython.address(one), cython.address(h[0]), cython.address(dn))

    @cython.cfunc
    @cython.exceptval(check=False)
    def matvec(self, mat: cython.double[::1], mo: cython.Py_ssize_t, x: cython.double[::1], xo: cython.Py_ssize_t,
               out: cython.double[::1], d: cython.Py_ssize_t, index: cython.Py_ssize_t[::1],
               m: cython.Py_ssize_t) -> cython.void:
        n: cython.int = d
        inc: cython.int = 1
        one: cython.double = 1.0
        zero: cython.double = 0.0
        if m != d:
            DenseAlgebra.matvec(self, mat, mo, x, xo, out, d, index, m)  # the loops' gather
            return
        dsymv(b"L", cython.address(n), cython.address(one), cython.address(mat[mo]), cython.address(n),
              cython.address(x[xo]), cython.address(inc), cython.address(zero), cython.address(out[0]),
              cython.address(inc))

    @cython.cfunc
    @cython.exceptval(check=False)
    def subtract_outer(self, mat: cython.double[::1], mo: cython.Py_ssize_t, u: cython.double[::1],
                       d: cython.Py_ssize_t) -> cython.void:
        """M −= u uᵀ by dger: entry (a, b) and (b, a) get the same product, so
        M stays exactly symmetric."""
        n: cython.int = d
        inc: cython.int = 1
        minus: cython.double = -1.0
        dger(cython.address(n), cython.address(n), cython.address(minus), cython.address(u[0]), cython.address(inc),
             cython.address(u[0]), cython.address(inc), cython.address(mat[mo]), cython.address(n))
