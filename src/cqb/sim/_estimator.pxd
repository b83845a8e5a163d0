# The estimator (_estimator.py), for the scorer that cimports it.

from cqb.sim._algebra cimport DenseAlgebra
from cqb.sim._projection cimport Projection


cdef class Estimator:
    # the numpy arrays (the Python side reads these)
    cdef readonly object features     # (K, capacity, d)
    cdef readonly object outcomes     # (K, capacity)
    cdef readonly object counts       # (K,) int64
    cdef readonly object mle          # (K, d): θ̂_k
    cdef readonly object theta        # (K, d): projected θ_k
    cdef readonly object inverses     # (K, 2, d, d): V_k⁻¹, H_k⁻¹
    cdef readonly object design_inv   # view of inverses[:, 0]
    cdef readonly object next_refit   # (K,) int64
    cdef readonly object widths       # (K,) β_k
    cdef readonly object norm_bounds  # (K,) S_k
    cdef readonly object params
    cdef readonly Py_ssize_t n_servers
    cdef readonly Py_ssize_t dim
    cdef readonly Py_ssize_t capacity
    cdef readonly double ridge
    cdef public Py_ssize_t refits
    cdef public Py_ssize_t projections       # how often the projection was active
    cdef public Py_ssize_t projection_steps  # Filippi solver steps in all
    # Filippi solves that ended without a certified KKT point (PROJECTION_KKT_TOL)
    cdef public Py_ssize_t projection_unconverged
    cdef public Py_ssize_t projection_max_iter  # steps per solve at most

    cdef double reg
    cdef double kappa
    cdef double delta
    cdef double newton_tol
    cdef double refit_growth
    cdef Py_ssize_t newton_max_iter
    cdef Py_ssize_t refit_min_samples
    cdef bint filippi
    cdef double[::1] _x
    cdef double[::1] _y
    cdef long long[::1] _n
    cdef double[::1] _mle
    cdef double[::1] _theta
    cdef double[::1] _inv
    cdef long long[::1] _next
    cdef double[::1] _widths
    cdef double[::1] _bounds
    cdef double[::1] _grad
    cdef double[::1] _u
    cdef double[::1] _uh
    cdef double[::1] _hx
    cdef double[::1] _h
    cdef double[::1] _l
    cdef double[::1] _y_inv
    cdef double[::1] _w
    cdef Py_ssize_t[::1] _index
    cdef Py_ssize_t[::1] _support      # (K, capacity, d): each stored row's non-zero columns
    cdef Py_ssize_t[::1] _support_len  # (K, capacity): how many
    cdef Projection _projection
    cdef DenseAlgebra _algebra
    cdef double[::1] _gram         # the refit's dense rows scaled by √μ̇ (BLAS only)
    cdef long long[::1] _versions  # rank-one updates of V_k⁻¹ so far
    cdef double[::1] _last_u       # (K, d): the last one's u, V_k⁻¹ −= u uᵀ
    cdef long long[::1] _projected # (K,): θ_k is the last update's projection

    cpdef double width(self, long long n_samples, double bound) noexcept
    cdef bint add(self, Py_ssize_t k, double[::1] xs, Py_ssize_t xo, double outcome)
    cdef void refit(self, Py_ssize_t k)
    cdef void rank_one(self, Py_ssize_t k, double[::1] xs, Py_ssize_t xo, Py_ssize_t slot, double weight)
    cdef void project(self, Py_ssize_t k, double norm, double bound)
