"""The policies' per-round decisions (:class:`Chooser` and its subclasses,
declared in _choosers.pxd): CQB-Opt and the forced exploration of
CQB-ε/CQB-ε-Opt/CQB-η-2, CQB-TS, Q-UCB/Q-ThS, Random, the oracle, and
:class:`PolicyChooser`, which calls a plugin policy's Python methods."""

import cython
import numpy as np

if cython.compiled:
    from cython.cimports.cpython.pycapsule import PyCapsule_GetPointer
    from cython.cimports.cqb.sim._scorer import Scorer
    from cython.cimports.libc.math import INFINITY, isnan, log, sqrt
    from cython.cimports.numpy.random import bitgen_t
    from cython.cimports.numpy.random.c_distributions import (random_beta, random_bounded_uint64,
                                                              random_standard_normal)
else:
    from math import isnan, log, sqrt
    from math import inf as INFINITY

    from ._scorer import Scorer


@cython.cclass
class Draws:
    """A chooser's draws from its Generator, one value at a time. Compiled and
    given a plain numpy Generator, they come from its bit generator through
    numpy's C functions for random(), integers(n), standard_normal() and
    beta(a, b): the values those methods return, in the same order, without a
    Python call or an array per round. Any other object (a test's stand-in, a
    subclass) is asked through its own methods. The bit generator's lock is not
    taken: a run's streams belong to its one thread."""

    def __init__(self, rng):
        self.rng = rng
        self.direct = False
        if cython.compiled and type(rng) is np.random.Generator:
            self._bit_generator = rng.bit_generator
            self.bits = cython.cast(cython.pointer(bitgen_t),
                                    PyCapsule_GetPointer(self._bit_generator.capsule, b"BitGenerator"))
            self.direct = True

    @cython.cfunc
    def uniform(self) -> cython.double:
        """rng.random()."""
        if cython.compiled and self.direct:
            return self.bits.next_double(self.bits.state)
        return float(self.rng.random())

    @cython.cfunc
    def below(self, n: cython.Py_ssize_t) -> cython.Py_ssize_t:
        """rng.integers(n), n ≥ 1: numpy's default draw (Lemire's, not masked)."""
        if cython.compiled and self.direct:
            return cython.cast(cython.Py_ssize_t, random_bounded_uint64(self.bits, 0, n - 1, 0, False))
        return int(self.rng.integers(n))

    @cython.cfunc
    def normals(self, out: cython.double[::1], n: cython.Py_ssize_t) -> cython.int:
        """out[:n] = rng.standard_normal(n)."""
        i: cython.Py_ssize_t
        if cython.compiled and self.direct:
            for i in range(n):
                out[i] = random_standard_normal(self.bits)
            return 0
        drawn: cython.double[::1] = np.asarray(self.rng.standard_normal(n), dtype=np.float64)
        for i in range(n):
            out[i] = drawn[i]
        return 0

    @cython.cfunc
    def betas(self, a: cython.double[::1], b: cython.double[::1], out: cython.double[::1],
              n: cython.Py_ssize_t) -> cython.int:
        """out[:n] = rng.beta(a[:n], b[:n]), drawn in order."""
        i: cython.Py_ssize_t
        if cython.compiled and self.direct:
            for i in range(n):
                out[i] = random_beta(self.bits, a[i], b[i])
            return 0
        drawn: cython.double[::1] = np.asarray(self.rng.beta(np.asarray(a[:n]), np.asarray(b[:n])),
                                               dtype=np.float64)
        for i in range(n):
            out[i] = drawn[i]
        return 0


@cython.cclass
class Chooser:
    """A policy's per-round decision and learning. :meth:`choose` sets
    ``position`` (in the queue), ``server`` and ``explored``; :meth:`observe`
    takes the outcome. ``queue`` holds the waiting arrival ids, oldest first,
    in its first ``length`` entries."""

    @cython.ccall
    def choose(self, t: cython.Py_ssize_t, queue: cython.longlong[::1], length: cython.Py_ssize_t,
               new_arrival: cython.bint):
        raise NotImplementedError

    @cython.ccall
    def observe(self, t: cython.Py_ssize_t, job: cython.Py_ssize_t, server: cython.Py_ssize_t,
                success: cython.bint):
        pass


@cython.cfunc
@cython.exceptval(check=False)
def first_max(values: cython.double[::1], n: cython.Py_ssize_t) -> cython.Py_ssize_t:
    """The position of the first maximum of values[:n], n ≥ 1, a NaN winning
    (the first one), as numpy's argmax: every chooser's tie and NaN rule."""
    i: cython.Py_ssize_t
    best_at: cython.Py_ssize_t = 0
    best: cython.double = values[0]
    if isnan(best):
        return 0
    for i in range(1, n):
        if isnan(values[i]):
            return i
        if values[i] > best:
            best = values[i]
            best_at = i
    return best_at


@cython.cclass
class ScoringChooser(Chooser):
    """A chooser on a cached scorer (CQB-Opt, CQB-TS): its outcomes go to the
    scorer's estimator."""

    @cython.cfunc
    def take_first_max(self, scores: cython.double[::1], length: cython.Py_ssize_t) -> cython.void:
        """The (position, server) of the first maximum of the queued jobs'
        scores laid out row-major (earliest job, then lowest server)."""
        K: cython.Py_ssize_t = self.scorer.estimator.n_servers
        best_at: cython.Py_ssize_t = first_max(scores, length * K)
        self.position, self.server, self.explored = best_at // K, best_at % K, False

    @cython.ccall
    def observe(self, t: cython.Py_ssize_t, job: cython.Py_ssize_t, server: cython.Py_ssize_t,
                success: cython.bint):
        self.scorer.learn(job, server, success)


@cython.cclass
class OptimisticChooser(ScoringChooser):
    """CQB-Opt: the UCB pair in every round. With ``explore_until`` > 0, the
    forced exploration of CQB-ε, CQB-ε-Opt and CQB-η-2 first: rounds t ≤ tau
    explore every fresh arrival (server round-robin or uniform); rounds
    tau < t ≤ explore_until explore a fresh arrival with probability
    explore_prob (uniform server)."""

    def __init__(self, scorer: Scorer, rng=None, tau: cython.double = 0.0, explore_prob: cython.double = 0.0,
                 explore_until: cython.double = 0.0, round_robin: cython.bint = False):
        self.scorer = scorer
        self.rng = rng
        self.draws = Draws(rng)
        self.tau, self.explore_prob, self.explore_until = tau, explore_prob, explore_until
        self.round_robin = round_robin
        self.phase1_visits = 0
        self._gathered = np.empty(0)

    @cython.ccall
    def choose(self, t: cython.Py_ssize_t, queue: cython.longlong[::1], length: cython.Py_ssize_t,
               new_arrival: cython.bint):
        K: cython.Py_ssize_t = self.scorer.estimator.n_servers
        if new_arrival and t <= self.explore_until:
            if t <= self.tau:
                if self.round_robin:
                    self.server = self.phase1_visits % K
                    self.phase1_visits += 1
                else:
                    self.server = self.draws.below(K)
                self.position = length - 1
                self.explored = True
                return
            if self.draws.uniform() < self.explore_prob:
                self.server = self.draws.below(K)
                self.position = length - 1
                self.explored = True
                return
        # the UCB indices of the queued jobs, row-major (earliest job, then lowest server)
        scorer: Scorer = self.scorer
        i: cython.Py_ssize_t
        k: cython.Py_ssize_t
        scorer.refresh(queue, length)
        if self._gathered.shape[0] < length * K:
            self._gathered = np.empty(2 * length * K)
        for i in range(length):
            for k in range(K):
                self._gathered[i * K + k] = scorer._ucb[queue[i] * K + k]
        self.take_first_max(self._gathered, length)


@cython.cclass
class ThompsonChooser(ScoringChooser):
    """CQB-TS, score mode: a standard normal z per queued (job, server) pair
    (rng.standard_normal((length, K)), drawn in that order), the score mean + bonus·z, and its
    row-major first maximum, a NaN winning."""

    def __init__(self, scorer: Scorer, rng):
        self.scorer = scorer
        self.rng = rng
        self.draws = Draws(rng)
        self._noise = np.empty(0)

    @cython.ccall
    def choose(self, t: cython.Py_ssize_t, queue: cython.longlong[::1], length: cython.Py_ssize_t,
               new_arrival: cython.bint):
        scorer: Scorer = self.scorer
        K: cython.Py_ssize_t = scorer.estimator.n_servers
        i: cython.Py_ssize_t
        k: cython.Py_ssize_t
        cell: cython.Py_ssize_t
        scorer.refresh(queue, length)
        if self._noise.shape[0] < length * K:
            self._noise = np.empty(2 * length * K)
        # the noise (row-major, as standard_normal((length, K))), then in its place the sampled scores
        scores: cython.double[::1] = self._noise
        self.draws.normals(scores, length * K)
        for i in range(length):
            for k in range(K):
                cell = queue[i] * K + k
                scores[i * K + k] = scorer._means[cell] + scorer._bonuses[cell] * scores[i * K + k]
        self.take_first_max(scores, length)


@cython.cclass
class QueueBanditChooser(Chooser):
    """Q-UCB and Q-ThS (Krishnasamy et al. 2021), context-blind, the oldest job:
    a uniform server with probability min(1, c·K·ln²t/t), else the server of
    the largest index: ŝ_k + √(ln²t/(2n_k)) (∞ untried), or (``sampling``) a
    Beta(s_k + 1, n_k − s_k + 1) draw."""

    def __init__(self, n_servers: cython.Py_ssize_t, rng, sampling: cython.bint, explore_constant: cython.double):
        self.n_servers = n_servers
        self.rng = rng
        self.draws = Draws(rng)
        self.sampling = sampling
        self.explore_constant = explore_constant
        self.successes = np.zeros(n_servers)
        self.trials = np.zeros(n_servers)
        self._s = self.successes
        self._n = self.trials
        self._values = np.zeros(n_servers)
        self._alpha = np.zeros(n_servers)
        self._beta = np.zeros(n_servers)

    @cython.ccall
    def choose(self, t: cython.Py_ssize_t, queue: cython.longlong[::1], length: cython.Py_ssize_t,
               new_arrival: cython.bint):
        K: cython.Py_ssize_t = self.n_servers
        k: cython.Py_ssize_t
        log_t: cython.double = log(t)
        squared_log: cython.double = log_t * log_t
        explore_prob: cython.double = min(1.0, self.explore_constant * K * squared_log / t)
        self.position = 0
        self.explored = False
        if self.draws.uniform() < explore_prob:
            self.server = self.draws.below(K)
            self.explored = True
            return
        if self.sampling:
            for k in range(K):
                self._alpha[k] = self._s[k] + 1.0
                self._beta[k] = self._n[k] - self._s[k] + 1.0
            self.draws.betas(self._alpha, self._beta, self._values, K)
            self.server = first_max(self._values, K)
            return
        for k in range(K):
            self._values[k] = self._s[k] / self._n[k] + sqrt(squared_log / (2.0 * self._n[k])) \
                if self._n[k] > 0 else INFINITY
        self.server = first_max(self._values, K)

    @cython.ccall
    def observe(self, t: cython.Py_ssize_t, job: cython.Py_ssize_t, server: cython.Py_ssize_t,
                success: cython.bint):
        self._n[server] += 1.0
        if success:
            self._s[server] += 1.0


@cython.cclass
class RandomChooser(Chooser):
    """A uniform job and an independent uniform server (rng.integers twice)."""

    def __init__(self, n_servers: cython.Py_ssize_t, rng):
        self.n_servers = n_servers
        self.rng = rng
        self.draws = Draws(rng)

    @cython.ccall
    def choose(self, t: cython.Py_ssize_t, queue: cython.longlong[::1], length: cython.Py_ssize_t,
               new_arrival: cython.bint):
        self.position = self.draws.below(length)
        self.server = self.draws.below(self.n_servers)
        self.explored = True


@cython.cclass
class OracleChooser(Chooser):
    """π*: the waiting job of highest best true mean (the earliest on ties) at
    its best server (the lowest index on ties)."""

    def __init__(self, true_means):
        true_means = np.asarray(true_means, dtype=np.float64)
        self._best_mean = np.ascontiguousarray(true_means.max(axis=1)) if true_means.shape[0] else np.zeros(0)
        self._best_server = np.ascontiguousarray(true_means.argmax(axis=1), dtype=np.longlong) \
            if true_means.shape[0] else np.zeros(0, dtype=np.longlong)

    @cython.ccall
    def choose(self, t: cython.Py_ssize_t, queue: cython.longlong[::1], length: cython.Py_ssize_t,
               new_arrival: cython.bint):
        i: cython.Py_ssize_t
        best_position: cython.Py_ssize_t = 0
        best: cython.double = self._best_mean[queue[0]]
        for i in range(1, length):
            if self._best_mean[queue[i]] > best:
                best = self._best_mean[queue[i]]
                best_position = i
        self.position = best_position
        self.server = self._best_server[queue[best_position]]
        self.explored = False


@cython.cclass
class PolicyChooser(Chooser):
    """A plugin policy (any object with choose(t, queue, new_arrival) →
    (position, server, explored) and observe(t, job, server, success)) called
    through Python, so it runs through the same round loop. With ``record``
    (a dict), what the loop gave it: "rounds", "new_arrival", "jobs"."""

    def __init__(self, policy, record=None):
        self.policy = policy
        self.record = record

    @cython.ccall
    def choose(self, t: cython.Py_ssize_t, queue: cython.longlong[::1], length: cython.Py_ssize_t,
               new_arrival: cython.bint):
        position, server, explored = self.policy.choose(t, self.queue_array[:length], bool(new_arrival))
        self.position, self.server, self.explored = position, server, explored
        if self.record is not None:
            self.record["rounds"].append(t)
            self.record["new_arrival"].append(bool(new_arrival))

    @cython.ccall
    def observe(self, t: cython.Py_ssize_t, job: cython.Py_ssize_t, server: cython.Py_ssize_t,
                success: cython.bint):
        if self.record is not None:
            self.record["jobs"].append(job)
        self.policy.observe(t, job, server, bool(success))
