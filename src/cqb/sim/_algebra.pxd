# The small dense algebra of _algebra.py, for the kernels that cimport it.

cdef double logistic(double z) noexcept
cdef double dot(double[::1] a, Py_ssize_t ao, double[::1] b, Py_ssize_t bo, Py_ssize_t n) noexcept
cdef Py_ssize_t nonzeros(double[::1] x, Py_ssize_t xo, Py_ssize_t d, Py_ssize_t[::1] index) noexcept
cdef Py_ssize_t row_support(double[::1] x, Py_ssize_t xo, Py_ssize_t d, Py_ssize_t[::1] index) noexcept
cdef double row_dot(double[::1] a, Py_ssize_t ao, double[::1] x, Py_ssize_t xo, Py_ssize_t d, Py_ssize_t[::1] index,
                    Py_ssize_t m) noexcept
cdef double sparse_dot(double[::1] a, Py_ssize_t ao, double[::1] b, Py_ssize_t bo, Py_ssize_t[::1] index,
                       Py_ssize_t m) noexcept
cdef void sym_matvec(double[::1] mat, Py_ssize_t mo, double[::1] x, Py_ssize_t xo, double[::1] out, Py_ssize_t d,
                     Py_ssize_t[::1] index, Py_ssize_t m) noexcept
cdef double quad_form(double[::1] mat, Py_ssize_t mo, double[::1] x, Py_ssize_t xo, Py_ssize_t d,
                      Py_ssize_t[::1] index, Py_ssize_t m) noexcept

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

cdef void newton_pass(double[::1] x, Py_ssize_t xo, double[::1] y, Py_ssize_t yo, Py_ssize_t n, Py_ssize_t d,
                      double[::1] theta, Py_ssize_t to, double reg, double[::1] grad, bint with_grad, double[::1] h,
                      Py_ssize_t[::1] index, DenseAlgebra algebra, double[::1] gram) noexcept
cdef double logistic_slope(double mu) noexcept
cdef void add_gram_row(double[::1] mat, Py_ssize_t d, double[::1] x, Py_ssize_t row, Py_ssize_t[::1] index,
                       Py_ssize_t m, double weight) noexcept
cdef void mirror_upper(double[::1] mat, Py_ssize_t d) noexcept
cdef void subtract_outer(double[::1] mat, Py_ssize_t mo, double[::1] u, Py_ssize_t d) noexcept
cdef bint cholesky(double[::1] a, double[::1] l, Py_ssize_t d) noexcept
cdef void cholesky_solve(double[::1] l, double[::1] b, Py_ssize_t d) noexcept
cdef bint spd_inverse(double[::1] a, double[::1] out, Py_ssize_t oo, double[::1] l, double[::1] y,
                      Py_ssize_t d) noexcept
