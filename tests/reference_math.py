"""From-scratch numpy computations the compiled core is checked against
(docs/model.md#the-per-server-logistic-estimator): the regularised logistic MLE, the widths β_k, and resolved
estimator parameters for tests that build an estimator directly."""

from __future__ import annotations

import math

import numpy as np

from cqb.sim.policies.parameters import EstimatorParams


def logistic(z):
    return 1.0 / (1.0 + np.exp(-np.asarray(z, dtype=np.float64)))


def estimator_params(**overrides) -> EstimatorParams:
    """A resolved EstimatorParams (delta and norm_bound set) with ``overrides``."""
    values = {"delta": 0.01, "norm_bound": 1.0, **overrides}
    return EstimatorParams(**values)


def fit_logistic(X, y, reg, theta0=None, tol=1e-10, max_iter=100):
    """Minimiser of Σ log-loss + (reg/2)‖θ‖² by Newton's method (no intercept)."""
    X = np.asarray(X, dtype=np.float64)
    theta = np.zeros(X.shape[1]) if theta0 is None else np.array(theta0, dtype=np.float64)
    for _ in range(max_iter):
        prob = logistic(X @ theta)
        gradient = X.T @ (prob - y) + reg * theta
        hessian = (X.T * (prob * (1.0 - prob))) @ X + reg * np.eye(X.shape[1])
        step = np.linalg.solve(hessian, gradient)  # the ridge keeps it positive definite
        theta -= step
        if np.abs(step).max() < tol:
            break
    return theta


def confidence_width(params, dim, n_servers, n_samples):
    """β_k = (κ/2)√(2d log(1 + N_k/(κλ₀d)) + log(K/δ)) + κS_k√λ₀/2 (the paper's §5; S_k = S
    for a shared bound, else the per-server tuple)."""
    kappa, reg = params.kappa, params.reg
    inner = 2 * dim * np.log1p(np.asarray(n_samples, dtype=np.float64) / (kappa * reg * dim))
    inner = inner + math.log(n_servers / params.delta)
    bound = params.norm_bound
    if isinstance(bound, tuple):
        bound = np.asarray(bound, dtype=np.float64)
    return 0.5 * kappa * np.sqrt(inner) + 0.5 * kappa * bound * math.sqrt(reg)
