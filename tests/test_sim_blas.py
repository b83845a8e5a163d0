"""The estimator's BLAS/LAPACK algebra (cqb.sim._blas, from d = BLAS_MIN_DIM)
against the core's loops and numpy from scratch:

* each step (Cholesky factor, solve, SPD inverse, the Hessian's Gram sum,
  M x, M −= u uᵀ) on random SPD problems, just below and above the threshold;
* the threshold itself: loops below it, BLAS from it, loops uncompiled;
* an estimator on BLAS against one on the loops after every update;
* a run's bits do not depend on the number of BLAS threads.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import cqb.sim.core as core_module
from cqb.sim.core import blas_module, core
from reference_math import estimator_params, logistic

THRESHOLD = core().BLAS_MIN_DIM
SIZES = (THRESHOLD - 1, THRESHOLD, 61)


def spd_problem(d, seed):
    rng = np.random.default_rng(seed)
    root = rng.normal(size=(d, d))
    a = root @ root.T / d + 0.5 * np.eye(d)
    return a, rng.normal(size=(3 * d, d)) / math.sqrt(d), rng.normal(size=d), rng.normal(size=d) * 0.1


@pytest.mark.parametrize("d", SIZES)
def test_each_blas_step_matches_the_loops_and_numpy(d):
    a, rows, x, u = spd_problem(d, d)
    blas = blas_module().BlasAlgebra().kernels(a, rows, x, u)
    loops = core().DenseAlgebra().kernels(a, rows, x, u)
    expected = (np.linalg.cholesky(a), np.linalg.solve(a, x), np.linalg.inv(a), np.triu(a + rows.T @ rows), a @ x,
                a - np.outer(u, u))
    for name, got, reference, numpy_value in zip(("factor", "solve", "inverse", "gram", "matvec", "downdate"),
                                                 blas, loops, expected):
        np.testing.assert_allclose(got, reference, rtol=1e-11, atol=1e-13, err_msg=name)
        np.testing.assert_allclose(got, numpy_value, rtol=1e-10, atol=1e-12, err_msg=name)
    factor, _, inverse, _, _, downdated = blas
    assert not np.triu(factor, 1).any()  # the factor's upper part is zero, as the loops leave it
    np.testing.assert_array_equal(inverse, inverse.T)  # exactly symmetric
    np.testing.assert_array_equal(downdated, downdated.T)


def test_a_matrix_that_is_not_positive_definite_fails_both_ways():
    a, rows, x, u = spd_problem(THRESHOLD, 1)
    a[3, 3] = -1.0
    for algebra in (blas_module().BlasAlgebra(), core().DenseAlgebra()):
        factor, solved, inverse, *_ = algebra.kernels(a, rows, x, u)
        assert factor is None and solved is None and inverse is None


def test_blas_from_the_threshold_up_the_loops_below_and_uncompiled():
    assert type(core().dense_algebra(THRESHOLD - 1)) is core().DenseAlgebra
    assert type(core().dense_algebra(THRESHOLD)) is blas_module().BlasAlgebra
    plain = core_module.plain_kernels()
    assert not plain.COMPILED and type(plain.dense_algebra(200)) is plain.DenseAlgebra


@pytest.mark.parametrize("ones", [None, 3])
def test_an_estimator_on_blas_follows_one_on_the_loops(ones):
    d, K = THRESHOLD, 2
    rng = np.random.default_rng(7)
    params = estimator_params(norm_bound=3.0, reg=1.0, refit_min_samples=4)
    blas = core().Estimator(K, d, 400, params)
    loops = core().Estimator(K, d, 400, params, core().DenseAlgebra())
    theta = rng.normal(size=(K, d)) * 2 / math.sqrt(d)
    for i in range(400):
        server = int(rng.integers(K))
        if ones is None:
            x = rng.normal(size=d) / math.sqrt(d)
        else:
            x = np.zeros(d)
            x[rng.choice(d, ones, replace=False)] = 0.7
        y = float(rng.random() < logistic(x @ theta[server]))
        assert blas.update(server, x, y) == loops.update(server, x, y)
        for field in ("mle", "theta", "inverses", "widths"):
            np.testing.assert_allclose(getattr(blas, field), getattr(loops, field), rtol=1e-8, atol=1e-10,
                                       err_msg=f"{field} after update {i}")
        for m in range(2):
            np.testing.assert_array_equal(blas.inverses[server, m], blas.inverses[server, m].T)
    assert blas.refits == loops.refits > 10


RUN = """
import hashlib, json, sys
import numpy as np
from cqb.sim.simulate import simulate
spec, horizon = json.loads(sys.argv[1])
run = simulate(spec, "cqb_opt", None, horizon, 3)
print(hashlib.sha256(np.ascontiguousarray(run.queue).tobytes()).hexdigest())
"""


def test_a_blas_run_is_the_same_bits_for_any_number_of_blas_threads():
    spec = {"kind": "synthetic", "n_servers": 2, "dim": THRESHOLD, "arrival_rate": 0.7, "slack": 0.1,
            "min_accept_rate": 0.005}
    digests = set()
    for threads in ("1", "2", "4"):
        environment = dict(os.environ, OPENBLAS_NUM_THREADS=threads, MKL_NUM_THREADS=threads)
        done = subprocess.run([sys.executable, "-c", RUN, json.dumps([spec, 1500])], env=environment,
                              capture_output=True, text=True, check=True)
        digests.add(done.stdout.strip())
    assert len(digests) == 1
