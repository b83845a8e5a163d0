# Filippi's projection (_projection.py), for the estimator that cimports it.

cdef class Projection:
    """Work space of filippi_solve for up to d dimensions."""
    cdef Py_ssize_t d
    cdef double[::1] prob      # μ(Xθ) per row
    cdef double[::1] target    # g(θ̂)
    cdef double[::1] residual  # g(θ) − g(θ̂)
    cdef double[::1] wres      # V⁻¹ r
    cdef double[::1] grad
    cdef double[::1] rhs
    cdef double[::1] z
    cdef double[::1] trial
    cdef double[::1] jac       # J = Σ μ̇ x xᵀ + λI
    cdef double[::1] wj        # V⁻¹ J
    cdef double[::1] hess      # 2 JᵀV⁻¹J (+ the second-order term)
    cdef double[::1] second
    cdef double[::1] shifted
    cdef double[::1] chol
    cdef Py_ssize_t[::1] index
    cdef Py_ssize_t steps      # the last solve's steps
    cdef double kkt            # and its last KKT residual

cdef bint filippi_solve(Projection p, double[::1] x, Py_ssize_t xo, Py_ssize_t n, double[::1] mle,
                        Py_ssize_t mo, double[::1] design_inv, Py_ssize_t vo, double reg, double bound,
                        double[::1] theta, Py_ssize_t to, Py_ssize_t max_iter)
