# The cached scores (_scorer.py), for the choosers that cimport them.

from cqb.sim._estimator cimport Estimator


cdef class Scorer:
    cdef readonly Estimator estimator
    cdef readonly object contexts            # (N, d)
    cdef readonly object means               # (N, K)
    cdef readonly object bonuses
    cdef readonly object ucb
    cdef readonly object stale               # (K,) bool: columns to refresh
    cdef readonly double bonus_scale
    cdef readonly Py_ssize_t scored_until    # ids below have full rows
    cdef Py_ssize_t n_contexts
    cdef double[::1] _c
    cdef double[::1] _means
    cdef double[::1] _bonuses
    cdef double[::1] _ucb
    cdef Py_ssize_t[::1] _key                # (N,): each arrival's distinct context
    cdef double[::1] _quads                  # (distinct contexts, K): xᵀV_k⁻¹x
    cdef long long[::1] _quad_version        # the version of V_k⁻¹ it is for (−1: none)
    cdef unsigned char[::1] _stale
    cdef Py_ssize_t[::1] _support            # (N, d): each context's non-zero columns
    cdef Py_ssize_t[::1] _support_len        # (N,): how many

    cdef void score(self, Py_ssize_t job, Py_ssize_t k) noexcept
    cpdef refresh(self, long long[::1] queue, Py_ssize_t length)
    cpdef learn(self, Py_ssize_t job, Py_ssize_t server, bint success)
