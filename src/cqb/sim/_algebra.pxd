# The small dense algebra of _algebra.py, for the kernels that cimport it. The hot
# helpers take raw pointers (from at(), inline here), not memoryview slices: a call
# into another module cannot be inlined, and a slice is a ~200-byte struct copied
# by value per argument, more than the arithmetic for d = 5.

cdef inline double* at(double[::1] array) noexcept:
    return &array[0]

cdef inline Py_ssize_t* index_at(Py_ssize_t[::1] array) noexcept:
    return &array[0]

cdef inline Py_ssize_t* index_from(Py_ssize_t[::1] array, Py_ssize_t offset) noexcept:
    return &array[offset]


cdef double logistic(double z) noexcept
cdef double dot(double* a, Py_ssize_t ao, double* b, Py_ssize_t bo, Py_ssize_t n) noexcept
cdef Py_ssize_t nonzeros(double* x, Py_ssize_t xo, Py_ssize_t d, Py_ssize_t* index) noexcept
cdef Py_ssize_t row_support(double* x, Py_ssize_t xo, Py_ssize_t d, Py_ssize_t* index) noexcept
cdef double row_dot(double* a, Py_ssize_t ao, double* x, Py_ssize_t xo, Py_ssize_t d, Py_ssize_t* index,
                    Py_ssize_t m) noexcept
cdef double sparse_dot(double* a, Py_ssize_t ao, double* b, Py_ssize_t bo, Py_ssize_t* index,
                       Py_ssize_t m) noexcept
cdef void sym_matvec(double* mat, Py_ssize_t mo, double* x, Py_ssize_t xo, double* out, Py_ssize_t d,
                     Py_ssize_t* index, Py_ssize_t m) noexcept
cdef double quad_form(double* mat, Py_ssize_t mo, double* x, Py_ssize_t xo, Py_ssize_t d,
                      Py_ssize_t* index, Py_ssize_t m) noexcept

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
                      Py_ssize_t[::1] support, Py_ssize_t[::1] support_len, Py_ssize_t so, DenseAlgebra algebra,
                      double[::1] gram) noexcept
cdef double logistic_slope(double mu) noexcept
cdef void add_gram_row(double* mat, Py_ssize_t d, double* x, Py_ssize_t row, Py_ssize_t* index,
                       Py_ssize_t m, double weight) noexcept
cdef void mirror_upper(double[::1] mat, Py_ssize_t d) noexcept
cdef void subtract_outer(double* mat, Py_ssize_t mo, double* u, Py_ssize_t d) noexcept
cdef bint cholesky(double[::1] a, double[::1] l, Py_ssize_t d) noexcept
cdef void cholesky_solve(double[::1] l, double[::1] b, Py_ssize_t d) noexcept
cdef bint spd_inverse(double[::1] a, double[::1] out, Py_ssize_t oo, double[::1] l, double[::1] y,
                      Py_ssize_t d) noexcept
