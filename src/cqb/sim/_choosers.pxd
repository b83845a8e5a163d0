# The choosers (_choosers.py), for the round loop that cimports them.

from numpy.random cimport bitgen_t

from cqb.sim._scorer cimport Scorer


cdef class Draws:
    cdef readonly object rng
    cdef readonly bint direct        # drawn from the bit generator by numpy's C functions
    cdef object _bit_generator       # keeps bits' owner alive
    cdef bitgen_t* bits

    cdef double uniform(self)
    cdef Py_ssize_t below(self, Py_ssize_t n)
    cdef int normals(self, double[::1] out, Py_ssize_t n)
    cdef int betas(self, double[::1] a, double[::1] b, double[::1] out, Py_ssize_t n)


cdef class Chooser:
    cdef readonly Py_ssize_t position
    cdef readonly Py_ssize_t server
    cdef readonly bint explored

    cpdef choose(self, Py_ssize_t t, long long[::1] queue, Py_ssize_t length, bint new_arrival)
    cpdef observe(self, Py_ssize_t t, Py_ssize_t job, Py_ssize_t server, bint success)


cdef class ScoringChooser(Chooser):
    cdef readonly Scorer scorer
    cdef readonly object rng
    cdef Draws draws

    cdef void take_first_max(self, double[::1] scores, Py_ssize_t length)


cdef class OptimisticChooser(ScoringChooser):
    cdef readonly double tau
    cdef readonly double explore_prob
    cdef readonly double explore_until
    cdef readonly bint round_robin
    cdef readonly Py_ssize_t phase1_visits
    cdef double[::1] _gathered  # the queued jobs' UCB indices, row-major


cdef class ThompsonChooser(ScoringChooser):
    cdef double[::1] _noise


cdef class QueueBanditChooser(Chooser):
    cdef readonly object successes  # (K,) float64
    cdef readonly object trials
    cdef readonly object rng
    cdef Draws draws
    cdef readonly bint sampling
    cdef readonly double explore_constant
    cdef Py_ssize_t n_servers
    cdef double[::1] _s
    cdef double[::1] _n
    cdef double[::1] _values  # the servers' indices
    cdef double[::1] _alpha   # the Beta draws' arguments
    cdef double[::1] _beta


cdef class RandomChooser(Chooser):
    cdef readonly object rng
    cdef Draws draws
    cdef Py_ssize_t n_servers


cdef class OracleChooser(Chooser):
    cdef double[::1] _best_mean
    cdef long long[::1] _best_server


cdef class PolicyChooser(Chooser):
    cdef readonly object policy
    cdef public object queue_array  # the loop's queue, as numpy
    cdef readonly object record
