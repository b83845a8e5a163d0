"""The round loop of docs/model.md#the-queue-and-its-rounds (:func:`play_rounds`: the queue, the lazy heap
of the best waiting mean for the gap, the service coins and the arrivals), the
only implementation of the queue dynamics that a policy runs through, and the
oracle's queue lengths by the same heap."""

import cython
import numpy as np

if cython.compiled:
    from cython.cimports.cpython.exc import PyErr_CheckSignals
    from cython.cimports.cqb.sim._choosers import Chooser, PolicyChooser
else:
    from ._choosers import Chooser, PolicyChooser

# The compiled round loop runs no Python bytecode, where the interpreter acts on
# signals: it asks every so many rounds, so a Ctrl-C ends a long run at once.
SIGNAL_CHECK_ROUNDS = 4096


@cython.cfunc
@cython.exceptval(check=False)
def heap_set(keys: cython.double[::1], ids: cython.longlong[::1], i: cython.Py_ssize_t, key: cython.double,
             job: cython.longlong) -> cython.void:
    """Entry i of the heap: (key, job)."""
    keys[i] = key
    ids[i] = job


@cython.cfunc
@cython.exceptval(check=False)
def heap_push(keys: cython.double[::1], ids: cython.longlong[::1], size: cython.Py_ssize_t, key: cython.double,
              job: cython.longlong) -> cython.Py_ssize_t:
    """Push (key, job) on the max-heap of ``size`` entries; the new size."""
    i: cython.Py_ssize_t = size
    parent: cython.Py_ssize_t
    while i > 0:
        parent = (i - 1) // 2
        if not keys[parent] < key:
            break
        heap_set(keys, ids, i, keys[parent], ids[parent])  # the parent moves down
        i = parent
    heap_set(keys, ids, i, key, job)
    return size + 1


@cython.cfunc
@cython.exceptval(check=False)
def heap_pop(keys: cython.double[::1], ids: cython.longlong[::1], size: cython.Py_ssize_t) -> cython.Py_ssize_t:
    """Drop the top of the max-heap; the new size."""
    size -= 1
    key: cython.double = keys[size]
    job: cython.longlong = ids[size]
    i: cython.Py_ssize_t = 0
    child: cython.Py_ssize_t
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and keys[child + 1] > keys[child]:
            child += 1
        if not keys[child] > key:
            break
        heap_set(keys, ids, i, keys[child], ids[child])  # the larger child moves up
        i = child
    heap_set(keys, ids, i, key, job)
    return size


def loop_inputs(arrivals, service, means, means_name: str):
    """A trace's arrays as the loops read them (C-contiguous, typed), after
    the check that they belong together: one service uniform per round, a
    row of ``means`` per arriving job."""
    arrivals_array = np.ascontiguousarray(arrivals, dtype=np.uint8)
    service_array = np.ascontiguousarray(service, dtype=np.float64)
    means_array = np.ascontiguousarray(means, dtype=np.float64)
    if service_array.shape[0] != arrivals_array.shape[0] or int(arrivals_array.sum()) > means_array.shape[0]:
        raise ValueError(f"the trace's arrivals, service uniforms and {means_name} do not match")
    return arrivals_array, service_array, means_array


def play_rounds(chooser: Chooser, arrivals, service, true_means):
    """The round loop for one policy on a trace (docs/model.md#the-queue-and-its-rounds): Q(t) before the
    decision; with a queue, the chooser's pair, the gap to the best waiting
    job's mean (a max-heap of the queued jobs' best true means, departed jobs
    dropped when they reach the top), the service coin U₂(t) ≤ μ of the pair,
    the outcome to the chooser, the departure; then the arrival, which waits
    from round t + 1. Returns (queue length, gap, explored, departures), each (T,)."""
    arrivals_array, service_array, means_array = loop_inputs(arrivals, service, true_means, "true means")
    horizon: cython.Py_ssize_t = arrivals_array.shape[0]
    n_jobs: cython.Py_ssize_t = means_array.shape[0]
    K: cython.Py_ssize_t = means_array.shape[1] if means_array.ndim == 2 else 0
    queue_length_out = np.zeros(horizon, dtype=np.int64)
    gap_out = np.full(horizon, np.nan)
    explored_out = np.zeros(horizon, dtype=bool)
    departures_out = np.zeros(horizon, dtype=bool)
    queue_array = np.zeros(horizon + 1, dtype=np.longlong)  # arrival ids, oldest first
    if isinstance(chooser, PolicyChooser):
        chooser.queue_array = queue_array
    best_mean_array = np.ascontiguousarray(means_array.max(axis=1)) if n_jobs else np.zeros(0)
    a_in: cython.uchar[::1] = arrivals_array
    u_in: cython.double[::1] = service_array
    mu_in: cython.double[::1] = means_array.reshape(-1)
    best_mean: cython.double[::1] = best_mean_array
    q_out: cython.longlong[::1] = queue_length_out
    gap: cython.double[::1] = gap_out
    explored: cython.uchar[::1] = explored_out.view(np.uint8)
    departures: cython.uchar[::1] = departures_out.view(np.uint8)
    queue: cython.longlong[::1] = queue_array
    departed: cython.uchar[::1] = np.zeros(n_jobs + 1, dtype=np.uint8)
    heap_keys: cython.double[::1] = np.zeros(n_jobs + 1)
    heap_ids: cython.longlong[::1] = np.zeros(n_jobs + 1, dtype=np.longlong)
    heap_size: cython.Py_ssize_t = 0
    length: cython.Py_ssize_t = 0
    next_id: cython.longlong = 0
    t: cython.Py_ssize_t
    position: cython.Py_ssize_t
    server: cython.Py_ssize_t
    job: cython.longlong
    chosen_mean: cython.double
    success: cython.bint
    for t in range(1, horizon + 1):
        if cython.compiled and t % SIGNAL_CHECK_ROUNDS == 0:
            PyErr_CheckSignals()  # raises the handler's exception (KeyboardInterrupt) here
        q_out[t - 1] = length
        if length:
            chooser.choose(t, queue, length, t >= 2 and a_in[t - 2] != 0)
            position, server = chooser.position, chooser.server
            if not (0 <= position < length and 0 <= server < K):
                raise IndexError(f"the policy chose (position {position}, server {server}) out of range "
                                 f"(queue of {length}, K = {K})")
            explored[t - 1] = chooser.explored
            job = queue[position]
            chosen_mean = mu_in[job * K + server]
            while departed[heap_ids[0]]:
                heap_size = heap_pop(heap_keys, heap_ids, heap_size)
            gap[t - 1] = heap_keys[0] - chosen_mean
            success = u_in[t - 1] <= chosen_mean
            chooser.observe(t, job, server, success)
            if success:
                departures[t - 1] = 1
                departed[job] = 1
                for position in range(position, length - 1):
                    queue[position] = queue[position + 1]
                length -= 1
        if a_in[t - 1]:
            queue[length] = next_id
            length += 1
            heap_size = heap_push(heap_keys, heap_ids, heap_size, best_mean[next_id], next_id)
            next_id += 1
    return queue_length_out, gap_out, explored_out, departures_out


def oracle_queue_lengths(arrivals, service, best_means):
    """Q*(t), t = 1..T, of π* on a trace, by a max-heap of the waiting jobs'
    best true means instead of a scan of the queue: a round serves the top job
    when U₂(t) ≤ its mean. Which of several jobs of equal mean is served leaves
    the same multiset of means waiting, so the path is π*'s (the earliest job
    on ties) whatever the heap's order among ties (tests/test_sim_simulate.py
    plays the oracle policy through :func:`play_rounds` against it)."""
    arrivals_array, service_array, means_array = loop_inputs(arrivals, service, best_means, "best means")
    horizon: cython.Py_ssize_t = arrivals_array.shape[0]
    n_jobs: cython.Py_ssize_t = means_array.shape[0]
    queue_length_out = np.zeros(horizon, dtype=np.int64)
    a_in: cython.uchar[::1] = arrivals_array
    u_in: cython.double[::1] = service_array
    best_mean: cython.double[::1] = means_array
    q_out: cython.longlong[::1] = queue_length_out
    heap_keys: cython.double[::1] = np.zeros(n_jobs + 1)
    heap_ids: cython.longlong[::1] = np.zeros(n_jobs + 1, dtype=np.longlong)
    size: cython.Py_ssize_t = 0
    next_id: cython.longlong = 0
    t: cython.Py_ssize_t
    for t in range(horizon):
        q_out[t] = size
        if size and u_in[t] <= heap_keys[0]:
            size = heap_pop(heap_keys, heap_ids, size)
        if a_in[t]:
            size = heap_push(heap_keys, heap_ids, size, best_mean[next_id], next_id)
            next_id += 1
    return queue_length_out
