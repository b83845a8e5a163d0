"""The rejection sampler's draws and acceptance screen (:func:`draw_screened`),
read from the Generator's bit generator when compiled."""

import cython
import numpy as np

if cython.compiled:
    from cython.cimports.cpython.pycapsule import PyCapsule_GetPointer
    from cython.cimports.libc.math import INFINITY, sqrt
    from cython.cimports.numpy.random import bitgen_t
else:
    from math import sqrt
    from math import inf as INFINITY


def draw_screened(rng, n_rows: cython.Py_ssize_t, theta, low: cython.double, high: cython.double):
    """The rejection sampler's draws and its screen in one pass: ``n_rows`` raw
    draws from U(−1, 1)^d, the very doubles ``rng.uniform(-1, 1, (n_rows, d))``
    returns (−1 + 2u for each of the Generator's next uniforms u, row by row),
    each coded by its largest score max_k (x·θ_k)/‖x‖ (x not yet scaled to
    unit length): 1 if ≥ ``high``, 0 if ≤ ``low``, 2 (undecided) in between;
    returns the rows coded 1 or 2, in draw order, and their codes. Compiled, the uniforms come one at a time from the
    Generator's bit generator (numpy's documented ``bitgen_t`` of its
    capsule), so the 10⁵–10⁶ draws of a run are never held in memory; as
    plain Python, from ``rng.random``."""
    theta_array = np.ascontiguousarray(theta, dtype=np.float64)
    if theta_array.ndim != 2 or n_rows < 0:
        raise ValueError("draw_screened: theta (K, d) and n_rows ≥ 0")
    K: cython.Py_ssize_t = theta_array.shape[0]
    d: cython.Py_ssize_t = theta_array.shape[1]
    th: cython.double[::1] = theta_array.reshape(-1)
    capacity: cython.Py_ssize_t = n_rows // 16 + 16
    kept_array = np.empty((capacity, d))
    codes_array = np.empty(capacity, dtype=np.uint8)
    kept: cython.double[::1] = kept_array.reshape(-1)
    codes: cython.uchar[::1] = codes_array
    row: cython.double[::1] = np.empty(d)
    i: cython.Py_ssize_t
    j: cython.Py_ssize_t
    k: cython.Py_ssize_t
    m: cython.Py_ssize_t = 0
    code: cython.int
    squares: cython.double
    best: cython.double
    score: cython.double
    bits: cython.pointer(bitgen_t)
    uniforms: cython.double[::1]
    if not cython.compiled:
        uniforms = rng.random(n_rows * d)
    with rng.bit_generator.lock:  # as the Generator's own methods hold it
        if cython.compiled:
            bits = cython.cast(cython.pointer(bitgen_t),
                               PyCapsule_GetPointer(rng.bit_generator.capsule, b"BitGenerator"))
        for i in range(n_rows):
            for j in range(d):
                if cython.compiled:
                    row[j] = -1.0 + 2.0 * bits.next_double(bits.state)
                else:
                    row[j] = -1.0 + 2.0 * uniforms[i * d + j]
            # the screen: the largest score max_k (x·θ_k)/‖x‖ against the cuts
            squares = 0.0
            for j in range(d):
                squares += row[j] * row[j]
            best = -INFINITY
            for k in range(K):
                score = 0.0
                for j in range(d):
                    score += row[j] * th[k * d + j]
                best = score if score > best else best  # a max instruction, not a branch
            best = best / sqrt(squares)  # μ and 1/‖x‖ > 0 keep the order: scale the best score only
            code = 1 if best >= high else 0 if best <= low else 2
            if code:
                if m == capacity:  # grows as a list does: rare, accept rates are a few percent
                    capacity *= 2
                    kept_array = np.resize(kept_array, (capacity, d))
                    codes_array = np.resize(codes_array, capacity)
                    kept = kept_array.reshape(-1)
                    codes = codes_array
                for j in range(d):
                    kept[m * d + j] = row[j]
                codes[m] = code
                m += 1
    return kept_array[:m].copy(), codes_array[:m].copy()
