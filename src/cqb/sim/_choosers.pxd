# The choosers (_choosers.py), for the round loop that cimports them.

from cqb.sim._scorer cimport Scorer


cdef class Chooser:
    cdef readonly Py_ssize_t position
    cdef readonly Py_ssize_t server
    cdef readonly bint explored

    cpdef choose(self, Py_ssize_t t, long long[::1] queue, Py_ssize_t length, bint new_arrival)
    cpdef observe(self, Py_ssize_t t, Py_ssize_t job, Py_ssize_t server, bint success)


cdef class ScoringChooser(Chooser):
    cdef readonly Scorer scorer
    cdef readonly object rng

    cdef void take_first_max(self, double[::1] scores, Py_ssize_t length)


cdef class OptimisticChooser(ScoringChooser):
    cdef readonly double tau
    cdef readonly double explore_prob
    cdef readonly double explore_until
    cdef readonly bint round_robin
    cdef readonly Py_ssize_t phase1_visits
    cdef double[::1] _gathered  # the queued jobs' UCB indices, row-major


cdef class ThompsonChooser(ScoringChooser):
    pass


cdef class QueueBanditChooser(Chooser):
    cdef readonly object successes  # (K,) float64
    cdef readonly object trials
    cdef readonly object rng
    cdef readonly bint sampling
    cdef readonly double explore_constant
    cdef Py_ssize_t n_servers
    cdef double[::1] _s
    cdef double[::1] _n
    cdef double[::1] _values  # the servers' indices


cdef class RandomChooser(Chooser):
    cdef readonly object rng
    cdef Py_ssize_t n_servers


cdef class OracleChooser(Chooser):
    cdef double[::1] _best_mean
    cdef long long[::1] _best_server


cdef class PolicyChooser(Chooser):
    cdef readonly object policy
    cdef public object queue_array  # the loop's queue, as numpy
    cdef readonly object record
