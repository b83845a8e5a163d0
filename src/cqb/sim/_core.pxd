# Declarations of cqb.sim._core (src/cqb/sim/_core.py) that another compiled
# module cimports: cqb.sim._blas subclasses DenseAlgebra.

cdef class DenseAlgebra:
    cdef public bint batches_gram
    cdef bint factor(self, double[::1] a, double[::1] l, Py_ssize_t d) noexcept
    cdef void solve(self, double[::1] l, double[::1] b, Py_ssize_t d) noexcept
    cdef bint inverse(self, double[::1] a, double[::1] out, Py_ssize_t oo, double[::1] l, double[::1] y,
                      Py_ssize_t d) noexcept
    cdef void add_gram(self, double[::1] rows, Py_ssize_t n, Py_ssize_t d, double[::1] h) noexcept
    cdef void matvec(self, double[::1] mat, Py_ssize_t mo, double[::1] x, Py_ssize_t xo, double[::1] out,
                     Py_ssize_t d, Py_ssize_t[::1] index, Py_ssize_t m) noexcept
    cdef void subtract_outer(self, double[::1] mat, Py_ssize_t mo, double[::1] u, Py_ssize_t d) noexcept
