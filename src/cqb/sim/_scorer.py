"""The cached scores of queued jobs (:class:`Scorer`, declared in
_scorer.pxd): μ(xᵀθ_k), the bonuses and the UCB index, and the row keys that
let identical contexts share their cached quadratic forms."""

import cython
import numpy as np

if cython.compiled:
    from cython.cimports.cqb.sim._algebra import at, index_from, logistic, quad_form, row_dot, row_support
    from cython.cimports.cqb.sim._estimator import Estimator
    from cython.cimports.libc.math import sqrt
else:
    from math import sqrt

    from ._algebra import at, index_from, logistic, quad_form, row_dot, row_support
    from ._estimator import Estimator


MASK64 = 0xFFFFFFFFFFFFFFFF  # unsigned 64-bit arithmetic wraps by itself in C; as plain Python it is masked


def row_keys(rows):
    """A key per row of the (n, d) float64 ``rows``, equal for rows equal bit
    for bit (so −0.0 and 0.0 differ, as in a comparison of their bytes) and
    only for them: 0, 1, … in order of first appearance, by a hash table of
    the rows' 64-bit words, O(n·d) (a sort of the rows' bytes costs
    O(n log n) comparisons)."""
    array = np.ascontiguousarray(rows, dtype=np.float64)
    if array.ndim != 2:
        raise ValueError(f"row_keys: rows must be (n, d), got shape {array.shape}")
    n: cython.Py_ssize_t = array.shape[0]
    d: cython.Py_ssize_t = array.shape[1]
    words: cython.ulonglong[::1] = array.view(np.uint64).reshape(-1)
    size: cython.Py_ssize_t = 1
    while size < 2 * n:
        size *= 2
    first_array = np.full(size, -1, dtype=np.intp)  # per slot, the first row of its content
    first: cython.Py_ssize_t[::1] = first_array
    keys_array = np.empty(n, dtype=np.intp)
    keys: cython.Py_ssize_t[::1] = keys_array
    i: cython.Py_ssize_t
    j: cython.Py_ssize_t
    row: cython.Py_ssize_t
    slot: cython.Py_ssize_t
    equal: cython.bint
    next_key: cython.Py_ssize_t = 0
    h: cython.ulonglong
    MIX: cython.ulonglong = 0xFF51AFD7ED558CCD
    for i in range(n):
        h = 0x9E3779B97F4A7C15
        for j in range(d):  # a multiply-xorshift mix of each word
            h = (h ^ words[i * d + j]) * MIX
            if not cython.compiled:
                h &= MASK64
            h ^= h >> 29
        slot = cython.cast(cython.Py_ssize_t, h & (size - 1))
        while True:
            row = first[slot]
            if row < 0:
                first[slot] = i
                keys[i] = next_key
                next_key += 1
                break
            equal = True
            for j in range(d):
                if words[row * d + j] != words[i * d + j]:
                    equal = False
                    break
            if equal:
                keys[i] = keys[row]
                break
            slot = (slot + 1) & (size - 1)
    return keys_array


def row_supports(rows):
    """:func:`row_support` of every row of the (n, d) float64 ``rows``, kept
    so that the sums over a row never recompute it: (support, count), row i's
    entries in support[i*d : i*d + count[i]]."""
    array = np.ascontiguousarray(rows, dtype=np.float64)
    if array.ndim != 2:
        raise ValueError(f"row_supports: rows must be (n, d), got shape {array.shape}")
    n: cython.Py_ssize_t = array.shape[0]
    d: cython.Py_ssize_t = array.shape[1]
    flat: cython.double[::1] = array.reshape(-1)
    support_array = np.zeros(max(n * d, 1), dtype=np.intp)
    count_array = np.zeros(max(n, 1), dtype=np.intp)
    support: cython.Py_ssize_t[::1] = support_array
    count: cython.Py_ssize_t[::1] = count_array
    i: cython.Py_ssize_t
    for i in range(n):
        count[i] = row_support(at(flat), i * d, d, index_from(support, i * d))
    return support_array, count_array


@cython.cclass
class Scorer:
    """μ(xᵀθ_k), the bonus c_β·β_k·‖x‖_{V_k⁻¹} and their sum (the UCB index) of
    queued jobs, cached by arrival id: a round recomputes only the stale
    servers' columns and the rows of new arrivals. The quadratic forms
    q = xᵀV_k⁻¹x are cached per distinct context (identical contexts, frequent
    in a pool, share one entry, so their scores stay exactly equal and an exact
    tie goes to the earliest job) with the version of V_k⁻¹ they hold: one
    Sherman–Morrison update V_k⁻¹ −= u uᵀ behind, q −= (uᵀx)², O(d) instead
    of O(d²); further behind, q from V_k⁻¹ itself."""

    def __init__(self, estimator: Estimator, contexts, bonus_scale: cython.double):
        self.estimator = estimator
        self.contexts = np.ascontiguousarray(contexts, dtype=np.float64)
        if self.contexts.ndim != 2 or self.contexts.shape[1] != estimator.dim:
            raise ValueError(f"contexts must be (N, {estimator.dim}), got shape {self.contexts.shape}")
        self.n_contexts = self.contexts.shape[0]
        K = estimator.n_servers
        self.means = np.zeros((self.n_contexts, K))
        self.bonuses = np.zeros((self.n_contexts, K))
        self.ucb = np.zeros((self.n_contexts, K))
        self.stale = np.zeros(K, dtype=bool)
        self.bonus_scale = bonus_scale
        self.scored_until = 0
        self._c = self.contexts.reshape(-1)
        self._means = self.means.reshape(-1)
        self._bonuses = self.bonuses.reshape(-1)
        self._ucb = self.ucb.reshape(-1)
        self._stale = self.stale.view(np.uint8)
        # one key per row content, bit for bit: a pool's repeated rows share their cached quadratic forms
        key = row_keys(self.contexts)
        self._key = key
        n_keys = int(key.max()) + 1 if self.n_contexts else 0
        self._quads = np.zeros(n_keys * K)
        self._quad_version = np.full(n_keys * K, -1, dtype=np.int64)
        # each context's non-zero columns, found once (score() runs per job and server)
        self._support, self._support_len = row_supports(self.contexts)

    @cython.cfunc
    @cython.exceptval(check=False)
    def score(self, job: cython.Py_ssize_t, k: cython.Py_ssize_t) -> cython.void:
        """Job's cell of column k, its q from the cache where it is current or
        one update behind."""
        est: Estimator = self.estimator
        d: cython.Py_ssize_t = est.dim
        K: cython.Py_ssize_t = est.n_servers
        xo: cython.Py_ssize_t = job * d
        cell: cython.Py_ssize_t = job * K + k
        entry: cython.Py_ssize_t = self._key[job] * K + k
        version: cython.longlong = est._versions[k]
        inner: cython.double
        linear: cython.double
        quad: cython.double
        m: cython.Py_ssize_t = self._support_len[job]
        index: cython.pointer(cython.Py_ssize_t) = index_from(self._support, xo)
        linear = row_dot(at(est._theta), k * d, at(self._c), xo, d, index, m)
        if self._quad_version[entry] == version:
            quad = self._quads[entry]
        elif self._quad_version[entry] == version - 1 and version > 0:
            inner = row_dot(at(est._last_u), k * d, at(self._c), xo, d, index, m)
            quad = max(self._quads[entry] - inner * inner, 0.0)
        else:
            quad = quad_form(at(est._inv), k * 2 * d * d, at(self._c), xo, d, index, m)
        self._quads[entry] = quad
        self._quad_version[entry] = version
        mean: cython.double = logistic(linear)
        bonus: cython.double = (self.bonus_scale * est._widths[k]) * sqrt(quad)
        self._means[cell] = mean
        self._bonuses[cell] = bonus
        self._ucb[cell] = mean + bonus

    @cython.ccall
    def refresh(self, queue: cython.longlong[::1], length: cython.Py_ssize_t):
        """The stale columns of the queued jobs, then the rows of new arrivals."""
        K: cython.Py_ssize_t = self.estimator.n_servers
        i: cython.Py_ssize_t
        k: cython.Py_ssize_t
        job: cython.Py_ssize_t
        lo: cython.Py_ssize_t
        hi: cython.Py_ssize_t
        mid: cython.Py_ssize_t
        if length <= 0:
            raise ValueError("the queue is empty")
        for i in range(length):
            if not 0 <= queue[i] < self.n_contexts:
                raise IndexError(f"arrival id {queue[i]} out of range ({self.n_contexts} contexts)")
        newest: cython.Py_ssize_t = queue[length - 1] + 1
        fresh: cython.Py_ssize_t = max(newest - self.scored_until, 0)
        n_old: cython.Py_ssize_t
        # new ids sit at the tail of the id-sorted queue; an explored newcomer
        # may have left unscored: then a binary search for the first unscored id
        if fresh == 0:
            n_old = length
        elif fresh <= length and queue[length - fresh] == self.scored_until:
            n_old = length - fresh
        else:
            lo, hi = 0, length
            while lo < hi:
                mid = (lo + hi) // 2
                if queue[mid] < self.scored_until:
                    lo = mid + 1
                else:
                    hi = mid
            n_old = lo
        for k in range(K):
            if self._stale[k]:
                for i in range(n_old):
                    self.score(queue[i], k)
                self._stale[k] = 0
        for job in range(self.scored_until, newest):
            for k in range(K):
                self.score(job, k)
        if newest > self.scored_until:
            self.scored_until = newest

    @cython.ccall
    def learn(self, job: cython.Py_ssize_t, server: cython.Py_ssize_t, success: cython.bint):
        """The outcome of serving arrival ``job`` at ``server``: the estimator's
        update with the job's context, and server's column goes stale."""
        if not 0 <= job < self.n_contexts:
            raise IndexError(f"job {job} out of range ({self.n_contexts} contexts)")
        if not 0 <= server < self.estimator.n_servers:
            raise IndexError(f"server {server} out of range (K = {self.estimator.n_servers})")
        self.estimator.add(server, self._c, job * self.estimator.dim, 1.0 if success else 0.0)
        self._stale[server] = 1
